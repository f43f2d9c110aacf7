#include "gpu/copy_2d.cuh"

#include <algorithm>
#include <cstdint>

#include "gpu/cuda_check.cuh"

namespace orbis::gpu {
namespace {

constexpr unsigned kThreads = 256;

// One block-row of threads strides over a row's words; blockIdx.y strides over the rows.
template <typename Word>
__global__ void copy_2d_kernel(unsigned char* __restrict__ dst, std::size_t dst_pitch,
                               const unsigned char* __restrict__ src, std::size_t src_pitch, std::size_t words,
                               std::size_t rows) {
  for (std::size_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const Word* from = reinterpret_cast<const Word*>(src + row * src_pitch);
    Word* to = reinterpret_cast<Word*>(dst + row * dst_pitch);
    for (std::size_t w = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; w < words;
         w += static_cast<std::size_t>(gridDim.x) * blockDim.x)
      to[w] = from[w];
  }
}

template <typename Word>
void launch(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch, std::size_t width,
            std::size_t rows, cudaStream_t stream) {
  const std::size_t words = width / sizeof(Word);
  // About 2048 blocks in all (enough to fill the device several times over), each row's
  // spread over as many as its words need.
  const auto down = static_cast<unsigned>(std::min<std::size_t>(rows, 65535));
  const std::size_t wanted = std::max<std::size_t>(64, (2048 + down - 1) / down);
  const auto across = static_cast<unsigned>(std::min<std::size_t>((words + kThreads - 1) / kThreads, wanted));
  copy_2d_kernel<Word><<<dim3(std::max(across, 1u), down), kThreads, 0, stream>>>(
      static_cast<unsigned char*>(dst), dst_pitch, static_cast<const unsigned char*>(src), src_pitch, words, rows);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void copy_2d(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch, std::size_t width,
             std::size_t rows, cudaStream_t stream) {
  if (width == 0 || rows == 0) return;
  const std::uintptr_t all = reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src) |
                             dst_pitch | src_pitch | width;
  if (all % 16 == 0) launch<uint4>(dst, dst_pitch, src, src_pitch, width, rows, stream);
  else if (all % 8 == 0) launch<uint2>(dst, dst_pitch, src, src_pitch, width, rows, stream);
  else if (all % 4 == 0) launch<unsigned>(dst, dst_pitch, src, src_pitch, width, rows, stream);
  else launch<unsigned char>(dst, dst_pitch, src, src_pitch, width, rows, stream);
}

}  // namespace orbis::gpu
