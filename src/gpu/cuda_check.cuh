// Every CUDA runtime call is checked; a failure becomes an orbis::Error naming the call, the
// file and line, and CUDA's message (a failed launch or a kernel's fault does not show in
// the exit code unless it is asked for).
#pragma once
#include <cuda_runtime.h>

#include "core/error.hpp"

#define ORBIS_CUDA_CHECK(call)                                                              \
  do {                                                                                      \
    const cudaError_t orbis_cuda_status_ = (call);                                          \
    if (orbis_cuda_status_ != cudaSuccess)                                                  \
      ::orbis::fail("CUDA error at {}:{}: {} returned {} ({})", __FILE__, __LINE__, #call,  \
                    cudaGetErrorName(orbis_cuda_status_),                                   \
                    cudaGetErrorString(orbis_cuda_status_));                                \
  } while (0)
