// The GPU tests over ranks (tests/mpi/*_cuda) run only where every rank has a usable CUDA
// device; elsewhere every rank says so and exits with 77, which CTest reports as skipped.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/comm.hpp"
#include "core/parallel.hpp"
#include "fmm/p2p_cuda_factory.hpp"

namespace orbis::test {

// This rank's GPU (gpu_device_for_rank), or exit 77 on every rank when any rank has none
// (collective: no rank is left waiting).
inline int rank_gpu_or_skip(const Comm& world) {
  const int device = gpu_device_for_rank(-1, world);
  std::string why;
  const bool usable = cuda_device_usable(device, &why);
  if (!world.all(usable)) {
    if (world.is_root()) std::printf("SKIPPED: a rank has no usable CUDA device (%s)\n", usable ? "another rank" : why.c_str());
    std::fflush(stdout);
    parallel::finalize();
    std::exit(77);
  }
  return device;
}

}  // namespace orbis::test
