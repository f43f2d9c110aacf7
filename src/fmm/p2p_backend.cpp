// The P2P backend factory: the one file that knows both the CPU and the CUDA evaluator
// (docs/design.md, "Layers"). "cuda" that cannot run is an error before any work; "auto" takes the GPU
// when one is usable and says which it chose.
#include <memory>
#include <string>

#include "core/error.hpp"
#include "core/log.hpp"
#include "fmm/p2p.hpp"
#include "fmm/p2p_cpu.hpp"
#if defined(ORBIS_HAVE_CUDA)
#include "fmm/p2p_cuda_factory.hpp"
#endif

namespace orbis {

int gpu_device_for_rank(std::int64_t configured, const Comm& comm) {
  if (configured >= 0) return static_cast<int>(configured);
  const int node_rank = comm.size() > 1 ? comm.node_rank() : 0;
#if defined(ORBIS_HAVE_CUDA)
  const int count = cuda_device_count();
  return count > 0 ? node_rank % count : 0;
#else
  (void)node_rank;
  return 0;
#endif
}

std::unique_ptr<P2PEvaluator> make_p2p_evaluator(const std::string& backend, int device) {
  if (backend != "auto" && backend != "cpu" && backend != "cuda")
    fail("[gpu] backend = \"{}\": expected auto, cpu or cuda", backend);
  if (backend == "cpu") {
    log::info("P2P backend: cpu ({})", CpuP2PEvaluator::simd_variant());
    return std::make_unique<CpuP2PEvaluator>();
  }
  std::string why;
#if defined(ORBIS_HAVE_CUDA)
  if (cuda_device_usable(device, &why)) {
    log::info("P2P backend: cuda (device {})", device);
    return make_cuda_p2p_evaluator(device);
  }
#else
  (void)device;
  why = "this build has no CUDA (configure with -DORBIS_CUDA=ON)";
#endif
  if (backend == "cuda") fail("[gpu] backend = \"cuda\", but {}", why);
  log::info("P2P backend: cpu ({}), since {}", CpuP2PEvaluator::simd_variant(), why);
  return std::make_unique<CpuP2PEvaluator>();
}

}  // namespace orbis
