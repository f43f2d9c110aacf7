// Device arrays from one stream-ordered pool, and pinned host arrays.
//
// Device memory: every DeviceArray comes from the device's stream-ordered pool
// (cudaMallocAsync), which keeps what is freed (release threshold: all of it) for the next
// allocation instead of giving it back to the driver. The step's phases (the PM's meshes,
// the tree's build arrays, the walk's and P2P's work arrays) are never live at the same
// time: each allocates its arrays when it starts and releases them when it ends, and the
// next phase reuses the same memory. The device then holds the persistent state plus the
// largest phase, not the sum of all phases. Allocation and release are queued on the stream
// that uses the array (AllocationStream names it for a scope), so a release needs no wait:
// the next allocation on that stream is ordered after the work that used the memory, so an
// array allocated on a stream is filled by work queued on that stream (upload()). Outside
// any AllocationStream (loading, outputs, tests), an allocation waits for the device first,
// as cudaMalloc and cudaFree did.
//
// Arrays are grow-only with 1/8 headroom (ensure) or exact (ensure_exact, for the
// per-particle arrays whose size never changes); contents are not kept when an array grows,
// so whoever fills an array sizes it first. Pinned host memory makes the uploads and
// downloads truly asynchronous, so the CPU can work while they run.
#pragma once
#include <cstddef>
#include <cstdint>

#include "gpu/cuda_check.cuh"

namespace orbis::gpu {

namespace detail {
struct AllocationContext {
  bool set = false;
  cudaStream_t stream = nullptr;
};
inline AllocationContext& allocation_context() {
  thread_local AllocationContext c;
  return c;
}
}  // namespace detail

// The device's pool, told once to keep freed memory (by default it returns it to the driver
// at every synchronisation, and the next phase would map it anew).
inline cudaMemPool_t device_pool() {
  int device = 0;
  ORBIS_CUDA_CHECK(cudaGetDevice(&device));
  cudaMemPool_t pool = nullptr;
  ORBIS_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  static thread_local int configured = -1;
  if (configured != device) {
    std::uint64_t keep_all = ~std::uint64_t{0};
    ORBIS_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
    configured = device;
  }
  return pool;
}

// Bytes the pool holds but no array uses (free for the next allocation, not in
// cudaMemGetInfo's free).
inline std::size_t pool_unused_bytes() {
  cudaMemPool_t pool = device_pool();
  std::uint64_t reserved = 0, used = 0;
  ORBIS_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  ORBIS_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
  return reserved > used ? static_cast<std::size_t>(reserved - used) : 0;
}

// What the device can still give: free memory plus what the pool holds unused.
inline std::size_t device_available_bytes() {
  std::size_t free_bytes = 0, total_bytes = 0;
  ORBIS_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes + pool_unused_bytes();
}

// Gives the pool's unused memory back to the driver (waits for the device): an engine's end,
// so that the next one (or another process) finds it free.
inline void trim_device_pool() {
  ORBIS_CUDA_CHECK(cudaDeviceSynchronize());
  ORBIS_CUDA_CHECK(cudaMemPoolTrimTo(device_pool(), 0));
}

// Allocations and releases of DeviceArrays in this scope (this thread) are queued on
// `stream`, the stream that uses them.
class AllocationStream {
 public:
  explicit AllocationStream(cudaStream_t stream) : saved_(detail::allocation_context()) {
    detail::allocation_context() = {true, stream};
  }
  ~AllocationStream() { detail::allocation_context() = saved_; }
  AllocationStream(const AllocationStream&) = delete;
  AllocationStream& operator=(const AllocationStream&) = delete;

 private:
  detail::AllocationContext saved_;
};

// Pool allocation that says, when the device is full, how much was asked and what is free,
// and which settings lower the need (every device array of a step comes through here).
inline void* device_alloc(std::size_t bytes, cudaStream_t stream) {
  void* p = nullptr;
  const cudaError_t e = cudaMallocFromPoolAsync(&p, bytes, device_pool(), stream);
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
  ~DeviceArray() {
    if (!p_) return;
    cudaDeviceSynchronize();   // no throw from a destructor; queued work may still use it
    cudaFreeAsync(p_, nullptr);
  }
  T* data() const { return p_; }
  std::size_t capacity() const { return cap_; }
  // Bytes an ensure(n) would newly allocate (for the memory check before any allocation).
  std::size_t growth_bytes(std::size_t n) const { return n <= cap_ ? 0 : grown(n) * sizeof(T); }
  // Room for n elements (1/8 more when it grows); a grown array holds no data.
  void ensure(std::size_t n) {
    if (n > cap_) reallocate(grown(n));
  }
  // Room for exactly n elements when it grows (arrays whose size does not change).
  void ensure_exact(std::size_t n) {
    if (n > cap_) reallocate(n);
  }
  // Copies count elements from host memory into the array, and waits for the copy. It is
  // queued on the stream the array was allocated on: memory from the pool may still be in use
  // by work queued on that stream before the allocation (the array that had it before), and
  // a plain cudaMemcpy runs on the legacy stream, which a non-blocking stream does not wait
  // for, so it could be overwritten by that work after the copy.
  void upload(const T* src, std::size_t count) {
    if (count > cap_) ::orbis::fail("internal: upload of {} elements into a device array of {}", count, cap_);
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(p_, src, count * sizeof(T), cudaMemcpyHostToDevice, stream_));
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  // Gives the memory back to the pool (queued on the allocation stream): the array is
  // empty until the next ensure.
  void release() {
    if (!p_) return;
    free_on(stream_for_free());
    p_ = nullptr;
    cap_ = 0;
  }

 private:
  static std::size_t grown(std::size_t n) { return n + n / 8 + 1; }
  // The stream a free is queued on: the current allocation stream when the array was
  // allocated on it; otherwise the device is waited for first (work on any stream may
  // still use the array) and the free goes on the default stream.
  cudaStream_t stream_for_free() const {
    const detail::AllocationContext& c = detail::allocation_context();
    if (c.set && c.stream == stream_) return stream_;
    ORBIS_CUDA_CHECK(cudaDeviceSynchronize());
    return nullptr;
  }
  void free_on(cudaStream_t s) { ORBIS_CUDA_CHECK(cudaFreeAsync(p_, s)); }
  void reallocate(std::size_t elements) {
    if (p_) free_on(stream_for_free());
    p_ = nullptr;
    cap_ = 0;
    const detail::AllocationContext& c = detail::allocation_context();
    const cudaStream_t s = c.set ? c.stream : nullptr;
    p_ = static_cast<T*>(device_alloc(elements * sizeof(T), s));
    // Outside an allocation stream the array may be used on any stream at once.
    if (!c.set) ORBIS_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    stream_ = s;
    cap_ = elements;
  }
  T* p_ = nullptr;
  std::size_t cap_ = 0;
  cudaStream_t stream_ = nullptr;   // the stream it was allocated on
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
