// Grow-only device and pinned host arrays: the run loop calls P2P every step with similar
// sizes, so buffers are allocated once (with 1/8 headroom) and reused; contents are not
// kept when an array grows, so whoever fills an array sizes it first. Pinned host memory
// makes the uploads and downloads truly asynchronous, so the CPU can work while they run.
//
// Growing frees the old array while work queued earlier, on any stream, may still read or
// write it: ensure() waits for the device first (cudaDeviceSynchronize, said explicitly
// rather than left to cudaFree's implicit wait). Growth happens in a run's first steps.
#pragma once
#include <cstddef>

#include "gpu/cuda_check.cuh"

namespace orbis::gpu {

// cudaMalloc that says, when the device is full, how much was asked and what is free, and
// which settings lower the need (every device array of a step comes through here).
inline void* device_alloc(std::size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();   // clear it: the error is reported, not sticky
    std::size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    const auto mib = [](std::size_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); };
    ::orbis::fail("GPU memory exhausted: an array of {:.1f} MiB does not fit ({:.1f} MiB free of {:.1f} MiB). "
                  "Fewer particles per GPU (more MPI ranks), a smaller [gravity] r_cut_over_rs or "
                  "[gpu] p2p_precision = \"float\" need less; [gpu] backend = \"cpu\" needs none",
                  mib(bytes), mib(free_bytes), mib(total_bytes));
  }
  ORBIS_CUDA_CHECK(e);
  return p;
}

template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { if (p_) cudaFree(p_); }
  T* data() const { return p_; }
  std::size_t capacity() const { return cap_; }
  // Bytes an ensure(n) would newly allocate (for the memory check before any allocation).
  std::size_t growth_bytes(std::size_t n) const { return n <= cap_ ? 0 : grown(n) * sizeof(T); }
  // Room for n elements; a grown array holds no data.
  void ensure(std::size_t n) {
    if (n <= cap_) return;
    if (p_) {
      ORBIS_CUDA_CHECK(cudaDeviceSynchronize());   // queued work may still use the old array
      ORBIS_CUDA_CHECK(cudaFree(p_));
    }
    p_ = nullptr;
    cap_ = 0;
    p_ = static_cast<T*>(device_alloc(grown(n) * sizeof(T)));
    cap_ = grown(n);
  }

 private:
  static std::size_t grown(std::size_t n) { return n + n / 8 + 1; }
  T* p_ = nullptr;
  std::size_t cap_ = 0;
};

template <typename T>
class PinnedArray {
 public:
  PinnedArray() = default;
  PinnedArray(const PinnedArray&) = delete;
  PinnedArray& operator=(const PinnedArray&) = delete;
  ~PinnedArray() { if (p_) cudaFreeHost(p_); }
  T* data() const { return p_; }
  std::size_t capacity() const { return cap_; }
  void ensure(std::size_t n) {
    if (n <= cap_) return;
    if (p_) {
      ORBIS_CUDA_CHECK(cudaDeviceSynchronize());   // a queued copy may still use the old array
      ORBIS_CUDA_CHECK(cudaFreeHost(p_));
    }
    p_ = nullptr;
    cap_ = 0;
    const std::size_t want = n + n / 8 + 1;
    ORBIS_CUDA_CHECK(cudaMallocHost(&p_, want * sizeof(T)));
    cap_ = want;
  }

 private:
  T* p_ = nullptr;
  std::size_t cap_ = 0;
};

}  // namespace orbis::gpu
