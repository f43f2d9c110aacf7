// Copies between large pageable host arrays and device memory through two small page-locked
// chunks: the host's threads fill (or empty) one chunk while the copy engine moves the other.
// The step engine's state and outputs go through one (hundreds of MB at 256^3). Page-locking
// a whole array of 3n doubles instead cost 0.08-0.15 s at every run's start (cudaMallocHost
// of 200-400 MB on the H200 host), more than the copies themselves.
#pragma once
#include <cstddef>

#include <cuda_runtime.h>

#include "gpu/device_buffer.cuh"

namespace orbis::gpu {

class StagedCopy {
 public:
  StagedCopy() = default;
  StagedCopy(const StagedCopy&) = delete;
  StagedCopy& operator=(const StagedCopy&) = delete;
  ~StagedCopy();

  // `bytes` from host memory `from` to device memory `to`, queued on `stream` in chunks;
  // returns when every chunk is queued (`from` may then change; work queued on `stream` after
  // the call sees `to`).
  void to_device(void* to, const void* from, std::size_t bytes, cudaStream_t stream);
  // `bytes` from device memory `from` (written by work queued on `stream` before the call) to
  // host memory `to`; returns when `to` holds them.
  void to_host(void* to, const void* from, std::size_t bytes, cudaStream_t stream);
  std::size_t pinned_bytes() const { return chunk_[0].capacity() + chunk_[1].capacity(); }

  static constexpr std::size_t kChunkBytes = std::size_t{8} << 20;

 private:
  void ensure(std::size_t bytes);
  PinnedArray<unsigned char> chunk_[2];
  cudaEvent_t moved_[2] = {};   // chunk k's copy has finished
};

}  // namespace orbis::gpu
