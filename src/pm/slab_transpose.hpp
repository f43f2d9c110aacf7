// The block layout of the all-to-all transpose between x slabs and y slabs of a half-complex
// n x n x (n/2+1) mesh over P ranks (the cuFFT slab PM, gpu/pm_cuda_slabs.hpp: 2D (y, z)
// transforms on the x slabs, 1D x transforms on the y slabs). Both splits are FFTW-MPI's
// blocks (slab_planes), so rank r holds the x planes and the y planes [first_r, first_r + count_r).
//
// Layouts, in complex elements:
//   x slab   [i - x0][j][k]     (FftMesh's complex layout: rows of n/2+1)
//   y slab   [i][j - y0][k]     (every x plane; a rank's y columns contiguous per x plane, so
//                               the x transform is one strided batch of ny (n/2+1) lines)
// The block of rank s's x slab that rank r's y slab holds is [x0_s, x0_s + nx_s) x
// [y0_r, y0_r + ny_r) x all k. On the x side it is nx_s rows of ny_r (n/2+1) elements at
// column y0_r (n/2+1) of rows n (n/2+1) long (one pitched copy); on the y side it is the
// contiguous range starting at x0_s ny_r (n/2+1), since the x planes of the sources follow
// each other in rank order. So x -> y sends the x side's pitched blocks packed by destination
// and receives the y slab itself (sources in rank order); y -> x sends the y slab as it is
// and unpacks the pitched blocks. Ranks with no planes send and receive nothing.
#pragma once
#include <cstddef>
#include <vector>

#include "pm/fft_mesh.hpp"

namespace orbis {

// A block of rows: `rows` rows of `width` elements, at `slab_offset` with a row every `pitch`
// elements on the x slab side, packed contiguously at `buffer_offset` on the other.
struct PitchedBlock {
  std::size_t slab_offset = 0, pitch = 0, width = 0, rows = 0, buffer_offset = 0;
  std::size_t count() const { return width * rows; }
};

struct SlabTranspose {
  SlabTranspose(int n, int ranks, int rank);

  int n = 0, nzc = 0, ranks = 1, rank = 0;
  SlabPlanes x, y;   // this rank's x planes and y planes (the same split)
  std::size_t x_slab_count = 0;   // complex elements of the x slab, nx n (n/2+1)
  std::size_t y_slab_count = 0;   // of the y slab, n ny (n/2+1)
  // Per rank r: the block of this rank's x slab that r's y slab holds, packed in rank order
  // (the x -> y send buffer, the y -> x receive buffer).
  std::vector<PitchedBlock> x_blocks;
  // Per rank r: the counts of the x side (what x -> y sends to r) and of the y side (what
  // x -> y receives from r, its offset in the y slab being y_offsets[r]).
  std::vector<std::size_t> x_counts, y_counts, y_offsets;
  // x_counts and y_counts in z lines of n/2+1 elements, the unit the transpose sends in (MPI's
  // counts and offsets are ints: in lines they stay small for any mesh that fits a GPU).
  std::vector<std::size_t> x_lines, y_lines;
};

// Host copies of the blocks (the GPU does the same with cudaMemcpy2DAsync): x slab -> packed
// buffer, and packed buffer -> x slab.
template <typename T>
void pack_x_blocks(const SlabTranspose& t, const T* slab, T* buffer) {
  for (const PitchedBlock& b : t.x_blocks)
    for (std::size_t row = 0; row < b.rows; ++row)
      for (std::size_t e = 0; e < b.width; ++e)
        buffer[b.buffer_offset + row * b.width + e] = slab[b.slab_offset + row * b.pitch + e];
}
template <typename T>
void unpack_x_blocks(const SlabTranspose& t, const T* buffer, T* slab) {
  for (const PitchedBlock& b : t.x_blocks)
    for (std::size_t row = 0; row < b.rows; ++row)
      for (std::size_t e = 0; e < b.width; ++e)
        slab[b.slab_offset + row * b.pitch + e] = buffer[b.buffer_offset + row * b.width + e];
}

}  // namespace orbis
