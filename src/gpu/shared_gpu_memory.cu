#include "gpu/shared_gpu_memory.hpp"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/cuda_check.cuh"
#include "gpu/device_buffer.cuh"

namespace orbis::gpu {
namespace {

// What a rank asks of its GPU's free memory beyond its pool, and which GPU.
struct GpuAsk {
  cudaUUID_t uuid;
  std::uint64_t bytes;
};

}  // namespace

bool fits_on_gpus(const Comm& comm, int device, std::size_t bytes) {
  ORBIS_CUDA_CHECK(cudaSetDevice(device));
  const std::size_t unused = pool_unused_bytes();
  std::size_t free_bytes = 0, total_bytes = 0;
  cudaDeviceProp prop{};
  cudaError_t status = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (status == cudaSuccess) status = cudaGetDeviceProperties(&prop, device);
  GpuAsk mine{};
  mine.uuid = prop.uuid;
  mine.bytes = bytes > unused ? bytes - unused : 0;
  // Every rank takes part in the allgather, whatever failed before it.
  const std::vector<GpuAsk> all = comm.allgather(mine);
  comm.throw_if_any_failed(status != cudaSuccess ? "cudaMemGetInfo or cudaGetDeviceProperties failed: " +
                                                       std::string(cudaGetErrorString(status))
                                                 : std::string());
  std::size_t on_this_gpu = 0;
  for (const GpuAsk& a : all)
    if (std::memcmp(a.uuid.bytes, prop.uuid.bytes, sizeof(prop.uuid.bytes)) == 0) on_this_gpu += a.bytes;
  return comm.all(on_this_gpu <= free_bytes);
}

}  // namespace orbis::gpu
