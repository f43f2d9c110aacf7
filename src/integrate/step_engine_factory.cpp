// The one place that knows every step engine (step_engine.hpp).
#include <memory>
#include <string>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "fmm/short_range.hpp"
#include "integrate/host_engine.hpp"
#include "integrate/step_engine.hpp"
#if defined(ORBIS_HAVE_CUDA)
#include "fmm/p2p_cuda_factory.hpp"
#include "gpu/step_engine_cuda.hpp"
#endif

namespace orbis {

std::unique_ptr<StepEngine> make_step_engine(const Params& params, const Comm& comm) {
  const std::string backend = params.get_string("gpu.backend");
  // The counts that stay 32-bit, checked before any engine allocates (PM meshes, particles).
  if (params.get_string("gravity.solver") != "pm") {
    const auto side = static_cast<std::size_t>(params.get_int("box.particles_per_side"));
    check_short_range_counts(side * side * side, static_cast<int>(params.get_int("gravity.max_leaf")),
                             backend != "cpu" ? ShortRangeGpu::p2p : ShortRangeGpu::none);
  }
  // The CUDA step engine (particles resident on the device) for [gpu] backend = "cuda", or
  // "auto" with a usable GPU, on one rank; the host engine otherwise (over several ranks its
  // P2P still runs on the [gpu] backend, which also reports a "cuda" that cannot run).
#if defined(ORBIS_HAVE_CUDA)
  if (backend != "cpu" && comm.size() == 1) {
    const int device = gpu_device_for_rank(params.get_int("gpu.device"), comm);
    std::string why;
    if (cuda_device_usable(device, &why)) {
      log::info("step engine: cuda (device {}; particles on the GPU)", device);
      return make_cuda_step_engine(params, device);
    }
    if (backend == "cuda") fail("{} = \"cuda\", but {}", params.describe("gpu.backend"), why);
  }
#endif
  return std::make_unique<HostStepEngine>(params, comm);
}

}  // namespace orbis
