#include "gpu/staged_copy.cuh"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "gpu/cuda_check.cuh"

namespace orbis::gpu {
namespace {

// A chunk's host side copied by the threads (one thread copies ~5-10 GB/s).
void parallel_copy(void* to, const void* from, std::size_t bytes) {
  constexpr std::size_t kBlock = std::size_t{1} << 20;
  const auto blocks = static_cast<std::int64_t>((bytes + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::size_t begin = static_cast<std::size_t>(b) * kBlock;
    std::memcpy(static_cast<char*>(to) + begin, static_cast<const char*>(from) + begin,
                std::min(kBlock, bytes - begin));
  }
}

}  // namespace

StagedCopy::~StagedCopy() {
  for (cudaEvent_t& e : moved_)
    if (e) cudaEventDestroy(e);
}

void StagedCopy::ensure(std::size_t bytes) {
  const std::size_t chunk = std::min(bytes, kChunkBytes);
  for (int b = 0; b < 2; ++b) {
    chunk_[b].ensure(chunk);
    if (!moved_[b]) ORBIS_CUDA_CHECK(cudaEventCreateWithFlags(&moved_[b], cudaEventDisableTiming));
  }
}

void StagedCopy::to_device(void* to, const void* from, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  ensure(bytes);
  std::size_t k = 0;
  for (std::size_t at = 0; at < bytes; at += kChunkBytes, ++k) {
    const std::size_t b = k & 1, len = std::min(kChunkBytes, bytes - at);
    // The chunk's last copy (of this call or an earlier one) has left it; an event never
    // recorded counts as done.
    ORBIS_CUDA_CHECK(cudaEventSynchronize(moved_[b]));
    parallel_copy(chunk_[b].data(), static_cast<const char*>(from) + at, len);
    ORBIS_CUDA_CHECK(
        cudaMemcpyAsync(static_cast<char*>(to) + at, chunk_[b].data(), len, cudaMemcpyHostToDevice, stream));
    ORBIS_CUDA_CHECK(cudaEventRecord(moved_[b], stream));
  }
}

void StagedCopy::to_host(void* to, const void* from, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  ensure(bytes);
  const std::size_t chunks = (bytes + kChunkBytes - 1) / kChunkBytes;
  const auto queue = [&](std::size_t k) {   // chunk k's copy down into its buffer
    const std::size_t b = k & 1, at = k * kChunkBytes, len = std::min(kChunkBytes, bytes - at);
    ORBIS_CUDA_CHECK(cudaStreamWaitEvent(stream, moved_[b], 0));   // an earlier upload has left it
    ORBIS_CUDA_CHECK(
        cudaMemcpyAsync(chunk_[b].data(), static_cast<const char*>(from) + at, len, cudaMemcpyDeviceToHost, stream));
    ORBIS_CUDA_CHECK(cudaEventRecord(moved_[b], stream));
  };
  queue(0);
  if (chunks > 1) queue(1);
  for (std::size_t k = 0; k < chunks; ++k) {
    const std::size_t b = k & 1, at = k * kChunkBytes, len = std::min(kChunkBytes, bytes - at);
    ORBIS_CUDA_CHECK(cudaEventSynchronize(moved_[b]));
    parallel_copy(static_cast<char*>(to) + at, chunk_[b].data(), len);
    if (k + 2 < chunks) queue(k + 2);   // into the buffer just emptied
  }
}

}  // namespace orbis::gpu
