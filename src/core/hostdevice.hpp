// ORBIS_HD marks interaction math that is compiled for the host and, under nvcc, the device:
// the CPU reference and the CUDA kernel share one definition, so their
// results differ only in the order of the sums.
#pragma once
#if defined(__CUDACC__)
#define ORBIS_HD __host__ __device__ __forceinline__
#else
#define ORBIS_HD inline
#endif
