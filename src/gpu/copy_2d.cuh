// Pitched 2D copies between device buffers (this device's, or another's mapped through CUDA
// IPC or peer access) by a kernel instead of cudaMemcpy2DAsync. The transposes of the PM over
// ranks move whole x slabs this way (two 0.9 GB blocks per transpose at a 768^3 float mesh on
// 2 ranks); a device-to-device cudaMemcpy2DAsync runs on a copy engine, the kernel on every SM.
#pragma once
#include <cstddef>

#include <cuda_runtime.h>

namespace orbis::gpu {

// rows rows of `width` bytes from src (a row every src_pitch bytes) to dst (every dst_pitch);
// on `stream`, asynchronous. Any alignment; 16-byte words where the pointers, pitches and
// width allow, else 8-, 4- or 1-byte words.
void copy_2d(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch, std::size_t width,
             std::size_t rows, cudaStream_t stream);

}  // namespace orbis::gpu
