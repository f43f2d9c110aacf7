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

namespace orbis {

// The in-place real-to-complex and complex-to-real transforms in the mesh precision (cuFFT
// names them per type), checked.
inline void cufft_forward_real(cufftHandle plan, float* data) {
  ORBIS_CUFFT_CHECK(cufftExecR2C(plan, data, reinterpret_cast<cufftComplex*>(data)));
}
inline void cufft_forward_real(cufftHandle plan, double* data) {
  ORBIS_CUFFT_CHECK(cufftExecD2Z(plan, data, reinterpret_cast<cufftDoubleComplex*>(data)));
}
inline void cufft_backward_real(cufftHandle plan, float* data) {
  ORBIS_CUFFT_CHECK(cufftExecC2R(plan, reinterpret_cast<cufftComplex*>(data), data));
}
inline void cufft_backward_real(cufftHandle plan, double* data) {
  ORBIS_CUFFT_CHECK(cufftExecZ2D(plan, reinterpret_cast<cufftDoubleComplex*>(data), data));
}

}  // namespace orbis
