// GPU tests run only where a CUDA device is usable; elsewhere they say so and exit with 77,
// which CTest reports as skipped (SKIP_RETURN_CODE in tests/CMakeLists.txt).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fmm/p2p_cuda_factory.hpp"

namespace orbis::test {

inline void require_gpu_or_skip(int device = 0) {
  std::string why;
  if (!cuda_device_usable(device, &why)) {
    std::printf("SKIPPED: no CUDA device (%s)\n", why.c_str());
    std::fflush(stdout);
    std::exit(77);
  }
}

}  // namespace orbis::test
