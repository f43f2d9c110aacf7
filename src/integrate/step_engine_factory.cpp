// The one place that knows every step engine (step_engine.hpp).
#include <memory>

#include "core/params.hpp"
#include "integrate/host_engine.hpp"
#include "integrate/step_engine.hpp"

namespace orbis {

std::unique_ptr<StepEngine> make_step_engine(const Params& params) {
  // ---- The CUDA step engine (particles resident on the device) is chosen here, for
  // [gpu] backend = "cuda", or "auto" with a usable GPU: return make_cuda_step_engine(params).
  // Until then the host engine serves every backend (its P2P runs on the [gpu] backend).
  return std::make_unique<HostStepEngine>(params);
}

}  // namespace orbis
