#include "pm/slab_transpose.hpp"

#include "core/error.hpp"

namespace orbis {

SlabTranspose::SlabTranspose(int n_, int ranks_, int rank_) : n(n_), nzc(n_ / 2 + 1), ranks(ranks_), rank(rank_) {
  if (n < 2 || ranks < 1 || rank < 0 || rank >= ranks)
    fail("internal: slab transpose of a {}^3 mesh for rank {} of {}", n, rank, ranks);
  x = slab_planes(n, ranks, rank);
  y = slab_planes(n, ranks, rank);
  const std::size_t row = static_cast<std::size_t>(n) * nzc;
  x_slab_count = static_cast<std::size_t>(x.count) * row;
  y_slab_count = static_cast<std::size_t>(y.count) * row;
  x_blocks.resize(ranks);
  x_counts.resize(ranks);
  y_counts.resize(ranks);
  y_offsets.resize(ranks);
  x_lines.resize(ranks);
  y_lines.resize(ranks);
  std::size_t packed = 0;
  for (int r = 0; r < ranks; ++r) {
    const SlabPlanes their_y = slab_planes(n, ranks, r), their_x = slab_planes(n, ranks, r);
    PitchedBlock& b = x_blocks[r];
    b.slab_offset = static_cast<std::size_t>(their_y.first) * nzc;
    b.pitch = row;
    b.width = static_cast<std::size_t>(their_y.count) * nzc;
    b.rows = static_cast<std::size_t>(x.count);
    b.buffer_offset = packed;
    packed += b.count();
    x_counts[r] = b.count();
    y_counts[r] = static_cast<std::size_t>(their_x.count) * y.count * nzc;
    y_offsets[r] = static_cast<std::size_t>(their_x.first) * y.count * nzc;
    x_lines[r] = x_counts[r] / nzc;
    y_lines[r] = y_counts[r] / nzc;
  }
}

}  // namespace orbis
