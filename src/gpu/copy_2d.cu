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

// copy_2d_batch's copies, by value in the launch's parameters (up to kBatch of them).
constexpr int kBatch = 32;
struct Batch {
  unsigned char* dst[kBatch];
  const unsigned char* src[kBatch];
  std::size_t dst_pitch[kBatch], src_pitch[kBatch], words[kBatch], rows[kBatch];
};

// blockIdx.y: the copy; its blocks stride over its rows and their words as copy_2d_kernel's.
template <typename Word>
__global__ void copy_2d_batch_kernel(Batch b) {
  const unsigned c = blockIdx.y;
  const std::size_t words = b.words[c], rows = b.rows[c];
  const std::size_t per_row = (words + blockDim.x - 1) / blockDim.x;   // row pieces of blockDim words
  for (std::size_t piece = blockIdx.x; piece < per_row * rows; piece += gridDim.x) {
    const std::size_t row = piece / per_row, w = (piece % per_row) * blockDim.x + threadIdx.x;
    if (w < words)
      reinterpret_cast<Word*>(b.dst[c] + row * b.dst_pitch[c])[w] =
          reinterpret_cast<const Word*>(b.src[c] + row * b.src_pitch[c])[w];
  }
}

template <typename Word>
void launch_batch(const Copy2d* copies, int count, cudaStream_t stream) {
  Batch b{};
  for (int c = 0; c < count; ++c) {
    b.dst[c] = static_cast<unsigned char*>(copies[c].dst);
    b.src[c] = static_cast<const unsigned char*>(copies[c].src);
    b.dst_pitch[c] = copies[c].dst_pitch;
    b.src_pitch[c] = copies[c].src_pitch;
    b.words[c] = copies[c].width / sizeof(Word);
    b.rows[c] = copies[c].rows;
  }
  // About 1024 blocks in all: every copy's blocks resident together on a large device.
  const auto across = static_cast<unsigned>(std::max(1, 1024 / count));
  copy_2d_batch_kernel<Word><<<dim3(across, static_cast<unsigned>(count)), kThreads, 0, stream>>>(b);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void copy_2d_batch(const std::vector<Copy2d>& all, cudaStream_t stream) {
  std::vector<Copy2d> copies;
  std::uintptr_t bits = 0;
  for (const Copy2d& c : all) {
    if (c.width == 0 || c.rows == 0) continue;
    copies.push_back(c);
    bits |= reinterpret_cast<std::uintptr_t>(c.dst) | reinterpret_cast<std::uintptr_t>(c.src) | c.dst_pitch |
            c.src_pitch | c.width;
  }
  for (std::size_t first = 0; first < copies.size(); first += kBatch) {
    const Copy2d* part = copies.data() + first;
    const int count = static_cast<int>(std::min<std::size_t>(kBatch, copies.size() - first));
    if (bits % 16 == 0) launch_batch<uint4>(part, count, stream);
    else if (bits % 8 == 0) launch_batch<uint2>(part, count, stream);
    else if (bits % 4 == 0) launch_batch<unsigned>(part, count, stream);
    else launch_batch<unsigned char>(part, count, stream);
  }
}

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
