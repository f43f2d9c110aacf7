// The block layout of the x slab <-> y slab transpose (pm/slab_transpose.hpp) that the cuFFT
// slab PM sends through Comm's all-to-all: every rank's x slab of a mesh whose elements name
// their own (i, j, k) is packed by the layout, the all-to-all is played on one process (what
// rank s sends to r lands in r's buffer, sources in rank order), and every rank must receive
// exactly its y slab [i][j - y0][k]; then back, y slab -> x slab, must restore every x slab.
// Mesh sides that the rank counts divide and that they do not, and ranks with no planes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "pm/slab_transpose.hpp"

using orbis::PitchedBlock;
using orbis::SlabTranspose;

namespace {

// A value that names a mode: distinct for every (i, j, k) of the mesh.
std::uint64_t code(int i, int j, int k) {
  return (static_cast<std::uint64_t>(i) << 40) | (static_cast<std::uint64_t>(j) << 20) | static_cast<std::uint64_t>(k);
}

// The all-to-all of Comm::alltoallv_known played for all ranks at once: send[s] is packed by
// destination with counts[s][r] elements for r; rank r receives the sources in rank order.
std::vector<std::vector<std::uint64_t>> alltoall(const std::vector<std::vector<std::uint64_t>>& send,
                                                 const std::vector<std::vector<std::size_t>>& counts) {
  const std::size_t p = send.size();
  std::vector<std::vector<std::uint64_t>> recv(p);
  for (std::size_t r = 0; r < p; ++r)
    for (std::size_t s = 0; s < p; ++s) {
      const std::size_t offset = std::accumulate(counts[s].begin(), counts[s].begin() + static_cast<std::ptrdiff_t>(r),
                                                 std::size_t{0});
      recv[r].insert(recv[r].end(), send[s].begin() + static_cast<std::ptrdiff_t>(offset),
                     send[s].begin() + static_cast<std::ptrdiff_t>(offset + counts[s][r]));
    }
  return recv;
}

}  // namespace

TEST_CASE("slab transpose: x slabs -> y slabs -> x slabs over the all-to-all") {
  struct Case { int n, ranks; };
  // 3 ranks on 32 (11, 11, 10), on 4 (2, 2, 0: a rank without planes), on 8 (3, 3, 2);
  // 4 ranks on 6 (2, 2, 2, 0), 1 rank, 2 ranks on 10.
  for (const Case c : {Case{32, 3}, Case{4, 3}, Case{8, 3}, Case{6, 4}, Case{12, 1}, Case{10, 2}}) {
    INFO("n = " << c.n << ", " << c.ranks << " ranks");
    const int n = c.n, p = c.ranks, nzc = n / 2 + 1;
    std::vector<SlabTranspose> layouts;
    for (int r = 0; r < p; ++r) layouts.emplace_back(n, p, r);
    // Every plane belongs to exactly one rank, in order; the counts of both sides agree.
    int planes = 0;
    for (int r = 0; r < p; ++r) {
      const SlabTranspose& t = layouts[static_cast<std::size_t>(r)];
      CHECK(t.x.first == std::min(n, planes));
      planes += t.x.count;
      CHECK(t.x_slab_count == static_cast<std::size_t>(t.x.count) * n * nzc);
      CHECK(t.y_slab_count == static_cast<std::size_t>(t.y.count) * n * nzc);
      std::size_t at = 0;
      for (int s = 0; s < p; ++s) {
        const auto& other = layouts[static_cast<std::size_t>(s)];
        CHECK(t.x_counts[static_cast<std::size_t>(s)] == other.y_counts[static_cast<std::size_t>(r)]);
        CHECK(t.x_lines[static_cast<std::size_t>(s)] * nzc == t.x_counts[static_cast<std::size_t>(s)]);
        CHECK(t.y_lines[static_cast<std::size_t>(s)] * nzc == t.y_counts[static_cast<std::size_t>(s)]);
        CHECK(t.y_offsets[static_cast<std::size_t>(s)] == at);   // sources arrive in rank order
        at += t.y_counts[static_cast<std::size_t>(s)];
      }
      CHECK(at == t.y_slab_count);
      CHECK(std::accumulate(t.x_counts.begin(), t.x_counts.end(), std::size_t{0}) == t.x_slab_count);
    }
    CHECK(planes == n);

    // x slabs [i - x0][j][k] of the named mesh, packed by destination.
    std::vector<std::vector<std::uint64_t>> x_slabs(p), send(p);
    std::vector<std::vector<std::size_t>> x_counts(p), y_counts(p);
    for (int r = 0; r < p; ++r) {
      const SlabTranspose& t = layouts[static_cast<std::size_t>(r)];
      auto& slab = x_slabs[static_cast<std::size_t>(r)];
      for (int i = t.x.first; i < t.x.first + t.x.count; ++i)
        for (int j = 0; j < n; ++j)
          for (int k = 0; k < nzc; ++k) slab.push_back(code(i, j, k));
      send[static_cast<std::size_t>(r)].assign(t.x_slab_count, ~std::uint64_t{0});
      orbis::pack_x_blocks(t, slab.data(), send[static_cast<std::size_t>(r)].data());
      x_counts[static_cast<std::size_t>(r)] = t.x_counts;
      y_counts[static_cast<std::size_t>(r)] = t.y_counts;
    }
    const auto y_slabs = alltoall(send, x_counts);
    for (int r = 0; r < p; ++r) {
      const SlabTranspose& t = layouts[static_cast<std::size_t>(r)];
      const auto& got = y_slabs[static_cast<std::size_t>(r)];
      REQUIRE(got.size() == t.y_slab_count);
      std::size_t wrong = 0, q = 0;
      for (int i = 0; i < n; ++i)
        for (int j = t.y.first; j < t.y.first + t.y.count; ++j)
          for (int k = 0; k < nzc; ++k) wrong += got[q++] != code(i, j, k);
      CHECK(wrong == 0);
    }
    // Back: each y slab sent as it is, unpacked into the x slabs.
    const auto back = alltoall(y_slabs, y_counts);
    for (int r = 0; r < p; ++r) {
      const SlabTranspose& t = layouts[static_cast<std::size_t>(r)];
      REQUIRE(back[static_cast<std::size_t>(r)].size() == t.x_slab_count);
      std::vector<std::uint64_t> slab(t.x_slab_count, ~std::uint64_t{0});
      orbis::unpack_x_blocks(t, back[static_cast<std::size_t>(r)].data(), slab.data());
      CHECK(slab == x_slabs[static_cast<std::size_t>(r)]);
    }
  }
}

TEST_CASE("slab transpose: the blocks of one rank tile its x slab") {
  const SlabTranspose t(20, 3, 1);   // planes 7..13 of 20
  CHECK(t.x.first == 7);
  CHECK(t.x.count == 7);
  std::vector<int> hits(t.x_slab_count, 0);
  for (const PitchedBlock& b : t.x_blocks)
    for (std::size_t row = 0; row < b.rows; ++row)
      for (std::size_t e = 0; e < b.width; ++e) ++hits[b.slab_offset + row * b.pitch + e];
  CHECK(std::count(hits.begin(), hits.end(), 1) == static_cast<std::ptrdiff_t>(hits.size()));
}
