// Pitched 2D copies between device buffers (this device's, or another's mapped through CUDA
// IPC or peer access) by a kernel instead of cudaMemcpy2DAsync. The transposes of the PM over
// ranks move whole x slabs this way (two 0.9 GB blocks per transpose at a 768^3 float mesh on
// 2 ranks); a device-to-device cudaMemcpy2DAsync runs on a copy engine, the kernel on every SM.
#pragma once
#include <cstddef>
#include <vector>

#include <cuda_runtime.h>

namespace orbis::gpu {

// rows rows of `width` bytes from src (a row every src_pitch bytes) to dst (every dst_pitch);
// on `stream`, asynchronous. Any alignment; 16-byte words where the pointers, pitches and
// width allow, else 8-, 4- or 1-byte words.
void copy_2d(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch, std::size_t width,
             std::size_t rows, cudaStream_t stream);

// One pitched copy of copy_2d_batch.
struct Copy2d {
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t dst_pitch = 0, src_pitch = 0, width = 0, rows = 0;
};

// Several pitched copies in one launch, each on its share of the blocks, all of them running
// at once: a copy from another device's memory (bound by NVLink) beside one within this
// device's (bound by its own memory) takes the longer of the two, not their sum. Words as
// copy_2d's, chosen for all of them together.
void copy_2d_batch(const std::vector<Copy2d>& copies, cudaStream_t stream);

}  // namespace orbis::gpu
