// Every cuFFT call is checked as the CUDA runtime's are (gpu/cuda_check.cuh): a failure
// becomes an orbis::Error naming the call, the file and line, and cuFFT's status code.
#pragma once
#include <cufft.h>

#include "core/error.hpp"

#define ORBIS_CUFFT_CHECK(call)                                                                   \
  do {                                                                                            \
    const cufftResult orbis_cufft_status_ = (call);                                               \
    if (orbis_cufft_status_ != CUFFT_SUCCESS)                                                     \
      ::orbis::fail("cuFFT error at {}:{}: {} returned {}", __FILE__, __LINE__, #call,            \
                    static_cast<int>(orbis_cufft_status_));                                       \
  } while (0)
