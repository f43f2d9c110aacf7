// gpu::copy_2d and copy_2d_batch (the PM transposes' pitched copies) against a host copy of
// the same rows: each word size its alignment picks (16, 8, 4 and 1 bytes), one row and many,
// rows wider than a block's stride, batches of mixed copies and of more than one launch holds,
// and only the rows' bytes written (the pitch's gaps keep their values).
// Without a usable GPU the program prints "SKIPPED" and returns 77 (CTest: skipped).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gpu/copy_2d.cuh"
#include "gpu/cuda_check.cuh"
#include "gpu/device_buffer.cuh"
#include "support/gpu_skip.hpp"

using namespace orbis;

namespace {

// Random source and destination bytes on the host, and their copies on the device.
struct Buffers {
  std::vector<unsigned char> src, dst;
  gpu::DeviceArray<unsigned char> d_src, d_dst;
  Buffers(std::size_t src_bytes, std::size_t dst_bytes, std::mt19937& rng) : src(src_bytes), dst(dst_bytes) {
    for (auto& b : src) b = static_cast<unsigned char>(rng());
    for (auto& b : dst) b = static_cast<unsigned char>(rng());
    d_src.ensure_exact(src_bytes);
    d_dst.ensure_exact(dst_bytes);
    ORBIS_CUDA_CHECK(cudaMemcpy(d_src.data(), src.data(), src_bytes, cudaMemcpyHostToDevice));
    ORBIS_CUDA_CHECK(cudaMemcpy(d_dst.data(), dst.data(), dst_bytes, cudaMemcpyHostToDevice));
  }
  // The destination after the copies (waits for the device).
  std::vector<unsigned char> result() {
    ORBIS_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<unsigned char> got(dst.size());
    ORBIS_CUDA_CHECK(cudaMemcpy(got.data(), d_dst.data(), got.size(), cudaMemcpyDeviceToHost));
    return got;
  }
};

}  // namespace

TEST_CASE("copy_2d writes the host copy's rows at any alignment and leaves the gaps alone") {
  test::require_gpu_or_skip();
  struct Case {
    std::size_t src_offset, src_pitch, dst_offset, dst_pitch, width, rows;
  };
  const Case cases[] = {
      {0, 4096, 0, 8192, 4096, 7},            // 16-byte words, a gap on the destination
      {16, 1 << 20, 32, 1 << 20, 1 << 20, 3},  // rows wider than a block's stride
      {8, 776, 24, 1560, 776, 300},            // 8-byte words (the float mesh's odd n)
      {4, 100, 12, 300, 100, 9},               // 4-byte words
      {3, 101, 5, 203, 99, 11},                // bytes
      {0, 0, 0, 0, 5000000, 1},                // one long row
      {0, 64, 0, 64, 0, 5},                    // nothing
  };
  std::mt19937 rng(7);
  for (const Case& c : cases) {
    CAPTURE(c.width);
    CAPTURE(c.rows);
    const std::size_t src_bytes = c.src_offset + c.rows * std::max(c.src_pitch, c.width) + 16;
    const std::size_t dst_bytes = c.dst_offset + c.rows * std::max(c.dst_pitch, c.width) + 16;
    Buffers b(src_bytes, dst_bytes, rng);
    const std::size_t src_pitch = c.rows > 1 ? c.src_pitch : c.width, dst_pitch = c.rows > 1 ? c.dst_pitch : c.width;
    gpu::copy_2d(b.d_dst.data() + c.dst_offset, dst_pitch, b.d_src.data() + c.src_offset, src_pitch, c.width, c.rows,
                 nullptr);
    std::vector<unsigned char> expected = b.dst;
    for (std::size_t r = 0; r < c.rows; ++r)
      std::memcpy(expected.data() + c.dst_offset + r * dst_pitch, b.src.data() + c.src_offset + r * src_pitch, c.width);
    CHECK(b.result() == expected);
  }
}

TEST_CASE("copy_2d_batch writes every copy's rows, in batches past one launch's, and leaves the gaps alone") {
  test::require_gpu_or_skip();
  std::mt19937 rng(11);
  // Two batches: 40 aligned copies (16-byte words, more than one launch holds) and a mixed one
  // (an odd width: byte words for all), each copy's rows in its own part of one source and
  // one destination, the parts apart by a gap.
  for (const bool mixed : {false, true}) {
    CAPTURE(mixed);
    struct Part {
      std::size_t src_offset, src_pitch, dst_offset, dst_pitch, width, rows;
    };
    std::vector<Part> parts;
    std::size_t src_bytes = 0, dst_bytes = 0;
    const int count = mixed ? 5 : 40;
    for (int k = 0; k < count; ++k) {
      Part p;
      p.width = mixed && k == 2 ? 99 : 16 * (1 + rng() % 300);
      p.rows = k == 3 ? 0 : 1 + rng() % 20;
      p.src_pitch = p.width + 16 * (rng() % 4);
      p.dst_pitch = p.width + 16 * (rng() % 4);
      p.src_offset = src_bytes;
      p.dst_offset = dst_bytes;
      src_bytes += p.rows * p.src_pitch + 64;
      dst_bytes += p.rows * p.dst_pitch + 64;
      parts.push_back(p);
    }
    Buffers b(src_bytes, dst_bytes, rng);
    std::vector<gpu::Copy2d> copies;
    std::vector<unsigned char> expected = b.dst;
    for (const Part& p : parts) {
      copies.push_back(gpu::Copy2d{b.d_dst.data() + p.dst_offset, b.d_src.data() + p.src_offset, p.dst_pitch,
                                   p.src_pitch, p.width, p.rows});
      for (std::size_t r = 0; r < p.rows; ++r)
        std::memcpy(expected.data() + p.dst_offset + r * p.dst_pitch, b.src.data() + p.src_offset + r * p.src_pitch,
                    p.width);
    }
    gpu::copy_2d_batch(copies, nullptr);
    CHECK(b.result() == expected);
  }
}
