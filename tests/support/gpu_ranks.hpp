// The GPU tests over ranks (tests/mpi/*_cuda) run only where every rank has a usable CUDA
// device; elsewhere the root prints "SKIPPED: ..." and every rank exits with 0, which CTest
// reports as skipped (their SKIP_REGULAR_EXPRESSION, tests/CMakeLists.txt). Not 77: mpiexec
// holds a non-zero exit ~2 s before it returns, 33 times in a build without a GPU.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/comm.hpp"
#include "core/parallel.hpp"
#include "fmm/p2p_cuda_factory.hpp"

namespace orbis::test {

// This rank's GPU (gpu_device_for_rank), or the skip on every rank when any rank has none
// (collective: no rank is left waiting).
inline int rank_gpu_or_skip(const Comm& world) {
  const int device = gpu_device_for_rank(-1, world);
  std::string why;
  const bool usable = cuda_device_usable(device, &why);
  if (!world.all(usable)) {
    if (world.is_root()) std::printf("SKIPPED: a rank has no usable CUDA device (%s)\n", usable ? "another rank" : why.c_str());
    std::fflush(stdout);
    parallel::finalize();
    std::exit(0);
  }
  return device;
}

}  // namespace orbis::test
