// The one place that knows every step engine (step_engine.hpp).
#include <memory>

#include "core/params.hpp"
#include "fmm/short_range.hpp"
#include "integrate/host_engine.hpp"
#include "integrate/step_engine.hpp"

namespace orbis {

std::unique_ptr<StepEngine> make_step_engine(const Params& params, const Comm& comm) {
  // The counts that stay 32-bit, checked before any engine allocates (PM meshes, particles).
  if (params.get_string("gravity.solver") != "pm") {
    const auto side = static_cast<std::size_t>(params.get_int("box.particles_per_side"));
    check_short_range_counts(side * side * side, static_cast<int>(params.get_int("gravity.max_leaf")),
                             params.get_string("gpu.backend") != "cpu" ? ShortRangeGpu::p2p : ShortRangeGpu::none);
  }
  // ---- The CUDA step engine (particles resident on the device) is chosen here, for
  // [gpu] backend = "cuda", or "auto" with a usable GPU: return make_cuda_step_engine(params).
  // Until then the host engine serves every backend (its P2P runs on the [gpu] backend).
  return std::make_unique<HostStepEngine>(params, comm);
}

}  // namespace orbis
