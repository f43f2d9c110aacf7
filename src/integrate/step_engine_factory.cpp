// The one place that knows every step engine (step_engine.hpp).
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/gravity_mode.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "fmm/short_range.hpp"
#include "integrate/host_engine.hpp"
#include "integrate/step_engine.hpp"
#include "integrate/vacuum_engine.hpp"
#if defined(ORBIS_HAVE_CUDA)
#include "fmm/p2p_cuda_factory.hpp"
#include "gpu/step_engine_cuda.hpp"
#endif

namespace orbis {
namespace {

// Over ranks: whether every rank has a usable GPU, decided together (an allgather), so that
// every rank takes the same engine: a rank that failed alone would leave the others waiting
// in the engines' first collective. Returns "" when all have one, else the reason, the same
// text on every rank: the ranks without one and the lowest one's own reason.
std::string ranks_without_gpu(int device, const Comm& comm) {
  std::string why;
#if defined(ORBIS_HAVE_CUDA)
  const bool usable = cuda_device_usable(device, &why);
#else
  (void)device;
  const bool usable = false;
  why = "this build has no CUDA (configure with -DORBIS_CUDA=ON)";
#endif
  const std::vector<int> all = comm.allgather(usable ? 1 : 0);
  std::vector<int> without;
  for (int r = 0; r < comm.size(); ++r)
    if (all[static_cast<std::size_t>(r)] == 0) without.push_back(r);
  if (without.empty()) return {};
  comm.broadcast(why, without.front());
  return fmt::format("rank{} {} of {} {} no usable GPU (rank {}: {})", without.size() == 1 ? "" : "s",
                     fmt::join(without, ", "), comm.size(), without.size() == 1 ? "has" : "have", without.front(), why);
}

}  // namespace

std::unique_ptr<StepEngine> make_step_engine(const Params& params, const Comm& comm) {
  const std::string backend = params.get_string("gpu.backend");
  // Isolated systems: on one rank with a usable GPU (backend "cuda", or "auto"), the CUDA step
  // engine with vacuum boundaries (particles, tree and walk on the device); otherwise the
  // host's vacuum engine (its P2P on the [gpu] backend's evaluator).
  if (!gravity_mode(params).periodic()) {
#if defined(ORBIS_HAVE_CUDA)
    if (backend != "cpu" && comm.size() == 1) {
      const int device = gpu_device_for_rank(params.get_int("gpu.device"), comm);
      std::string why;
      if (cuda_device_usable(device, &why)) {
        log::info("step engine: cuda (device {}; particles on the GPU), vacuum boundaries", device);
        return make_cuda_step_engine(params, device);
      }
      if (backend == "cuda") fail("{} = \"cuda\", but {}", params.describe("gpu.backend"), why);
    }
#endif
    auto engine = std::make_unique<VacuumStepEngine>(params, comm);
    log::info("step engine: host, vacuum boundaries (P2P on the [gpu] backend's evaluator)");
    return engine;
  }
  // The counts that stay 32-bit, checked before any engine allocates (PM meshes, particles).
  if (params.get_string("gravity.solver") != "pm") {
    const auto side = static_cast<std::size_t>(params.get_int("box.particles_per_side"));
    check_short_range_counts(side * side * side, static_cast<int>(params.get_int("gravity.max_leaf")),
                             backend != "cpu" ? ShortRangeGpu::p2p : ShortRangeGpu::none);
  }
  // The CUDA step engine (particles resident on the device) for [gpu] backend = "cuda", or
  // "auto" with a usable GPU; the host engine otherwise. On one rank the rank's GPU decides;
  // over several ranks every rank's, together: all usable runs the CUDA engine on every
  // rank, "cuda" with any rank lacking one stops every rank with the same message, and
  // "auto" runs the host engine on every rank (its PM transforms then on the host's x slabs;
  // its P2P still on the GPU of each rank that has one: make_p2p_evaluator decides per rank).
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
  if (backend != "cpu" && comm.size() > 1) {
    const int device = gpu_device_for_rank(params.get_int("gpu.device"), comm);
    const std::string without = ranks_without_gpu(device, comm);
#if defined(ORBIS_HAVE_CUDA)
    if (without.empty()) {
      log::info("step engine: cuda on {} ranks (each rank's particles on its GPU)", comm.size());
      return make_cuda_step_engine(params, device, comm);
    }
#endif
    if (backend == "cuda") fail("{} = \"cuda\" on {} ranks, but {}", params.describe("gpu.backend"), comm.size(), without);
    log::info("step engine: host on {} ranks, since {}", comm.size(), without);
  }
  return std::make_unique<HostStepEngine>(params, comm);
}

}  // namespace orbis
