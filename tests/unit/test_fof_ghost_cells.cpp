// fof::GhostCells, which picks the particles a rank sends to another as friends-of-friends
// ghosts: against brute force over random points (some drifted just outside the box, some
// on cell faces), every point within the linking length of a marked point is found, by the
// 27-cell test and by the one-lookup neighbourhood; nothing farther than l plus a cell
// diagonal is; the neighbourhood of random bits is the brute-force 27-cell dilation for grid
// sides that do and do not fill whole words; two cell boxes touch exactly when some cells
// of theirs are neighbours, across the periodic boundary too.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <random>
#include <vector>

#include "analysis/fof_ghost_cells.hpp"
#include "support/periodic_distance.hpp"

using orbis::Vec3d;
using orbis::fof::GhostCells;
using orbis::test::periodic_distance2;

namespace {

// x wrapped into [0, box), the tests' own way.
Vec3d wrapped(Vec3d x, double box) {
  for (int a = 0; a < 3; ++a) x[a] = std::fmod(std::fmod(x[a], box) + box, box);
  return x;
}

// Whether cell (i, j, k) of a grid of `side` is set in bits laid out as GhostCells says.
bool cell_set(const std::vector<std::uint64_t>& bits, std::int64_t side, std::int64_t i, std::int64_t j,
              std::int64_t k) {
  const std::int64_t row_words = (side + 63) / 64;
  const auto bit = static_cast<std::uint64_t>((i * side + j) * row_words * 64 + k);
  return (bits[bit >> 6] >> (bit & 63) & 1u) != 0;
}

}  // namespace

TEST_CASE("GhostCells finds every point within the linking length of a marked point, and none far off") {
  std::mt19937_64 rng(29);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (const double link : {0.7, 1.0, 2.5, 9.0}) {
    const double box = 20.0;
    const GhostCells cells(box, link);
    INFO("link " << link << ", side " << cells.side());
    CHECK(box / static_cast<double>(cells.side()) > link);   // cells wider than l
    const double cell = box / static_cast<double>(cells.side());
    int pairs_within = 0, found = 0;
    for (int trial = 0; trial < 400; ++trial) {
      // One marked point (on a cell face every fourth trial), one probe near it: inside the
      // box, or its image just outside (a rank's particles between wraps).
      Vec3d q{u(rng) * box, u(rng) * box, u(rng) * box};
      if (trial % 4 == 0) q.x = cell * std::floor(q.x / cell);
      Vec3d p;
      for (int a = 0; a < 3; ++a) p[a] = q[a] + (u(rng) - 0.5) * 3 * link;
      if (trial % 3 == 0) p.x += p.x < box / 2 ? box : -box;
      const std::vector<std::uint64_t> marked = cells.occupancy({q});
      const std::vector<std::uint64_t> around = cells.neighbourhood({marked.data()});
      const bool near = GhostCells::any_set(cells.near(p), marked.data());
      const double d2 = periodic_distance2(wrapped(p, box), wrapped(q, box), box);
      if (d2 <= link * link) {
        ++pairs_within;
        CHECK(near);
      }
      if (near) {
        ++found;
        CHECK(cells.in(p, around.data()));   // the lookup passes what the 27-cell test finds
        const double bound = link + std::sqrt(3.0) * cell;   // q anywhere in its cell
        CHECK(d2 <= bound * bound * (1 + 1e-12));
      }
    }
    CHECK(pairs_within > 20);
    CHECK(found >= pairs_within);
  }
}

TEST_CASE("GhostCells' neighbourhood is the 27-cell dilation of the bits' union, periodic") {
  std::mt19937_64 rng(31);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (const double cells_per_side : {1.5, 2.5, 3.5, 17.5, 64.5, 65.5, 130.5}) {
    const double box = 1.0, link = box / cells_per_side;
    const GhostCells cells(box, link);
    const std::int64_t g = cells.side();
    INFO("side " << g);
    // Two sources of a few marked cells each, on the grid's faces too; the cells by the
    // tests' own arithmetic (box 1: cell i holds [i / g, (i + 1) / g)).
    std::vector<std::vector<std::uint64_t>> sources;
    std::vector<std::array<std::int64_t, 3>> marked;
    for (int s = 0; s < 2; ++s) {
      std::vector<Vec3d> pts;
      for (int k = 0; k < 6; ++k) {
        Vec3d x{u(rng), u(rng), u(rng)};
        if (k == 0) x.z = 0.5 / static_cast<double>(g);   // cell 0 along z: its neighbour g - 1 wraps
        if (k == 1) x.y = 1 - 0.5 / static_cast<double>(g);
        pts.push_back(x);
        marked.push_back({static_cast<std::int64_t>(x.x * g), static_cast<std::int64_t>(x.y * g),
                          static_cast<std::int64_t>(x.z * g)});
      }
      sources.push_back(cells.occupancy(pts));
    }
    const std::vector<std::uint64_t> got = cells.neighbourhood({sources[0].data(), sources[1].data()});
    REQUIRE(got.size() == cells.words());
    auto close = [g](std::int64_t a, std::int64_t b) {
      const std::int64_t d = std::abs(a - b);
      return std::min(d, g - d) <= 1;
    };
    int set = 0, mismatches = 0;
    for (std::int64_t i = 0; i < g; ++i)
      for (std::int64_t j = 0; j < g; ++j)
        for (std::int64_t k = 0; k < g; ++k) {
          bool expected = false;
          for (const auto& m : marked) expected |= close(i, m[0]) && close(j, m[1]) && close(k, m[2]);
          set += expected;
          mismatches += expected != cell_set(got, g, i, j, k);
        }
    CHECK(set > 0);
    CHECK(mismatches == 0);
    // Nothing beyond the grid's cells: the padding of each row stays clear.
    const std::int64_t row_words = (g + 63) / 64;
    int padding = 0;
    for (std::int64_t r = 0; r < g * g; ++r)
      for (std::int64_t k = g; k < row_words * 64; ++k) padding += cell_set(got, g, r / g, r % g, k);
    CHECK(padding == 0);
  }
}

TEST_CASE("GhostCells' cell boxes touch where some of their cells are neighbours") {
  const double box = 100.0, link = 1.0;
  const GhostCells cells(box, link);
  const double cell = box / static_cast<double>(cells.side());
  // Points at the centres of the cells [lo, hi] along x (wrapping), one cell along y and z.
  auto slab = [&](int lo, int hi, int y) {
    std::vector<Vec3d> pts;
    for (int i = lo; i <= hi; ++i) {
      const double c = (std::fmod(i + 10.0 * cells.side(), cells.side()) + 0.5) * cell;
      pts.push_back({c, (y + 0.5) * cell, 0.5 * cell});
    }
    return cells.box_of(cells.occupancy(pts));
  };
  const GhostCells::Box a = slab(10, 20, 5);
  CHECK(a.first[0] == 10);
  CHECK(a.length[0] == 11);
  CHECK(a.length[1] == 1);
  CHECK(cells.may_touch(a, slab(21, 30, 5)));    // adjacent along x
  CHECK(!cells.may_touch(a, slab(22, 30, 5)));   // one empty cell between them
  CHECK(cells.may_touch(a, slab(15, 16, 6)));    // overlapping along x, adjacent along y
  CHECK(!cells.may_touch(a, slab(15, 16, 7)));
  // Across the boundary: a run from -5 to 5 covers 11 cells from side - 5.
  const GhostCells::Box wrap = slab(-5, 5, 5);
  CHECK(wrap.first[0] == cells.side() - 5);
  CHECK(wrap.length[0] == 11);
  CHECK(cells.may_touch(wrap, slab(6, 8, 5)));
  CHECK(cells.may_touch(wrap, slab(-9, -6, 5)));
  CHECK(!cells.may_touch(wrap, slab(7, 8, 5)));
  CHECK(cells.may_touch(a, slab(15, 16, 6)) == cells.may_touch(slab(15, 16, 6), a));
  // Nothing marked: touches nothing.
  CHECK(cells.box_of(cells.occupancy({})).empty());
  CHECK(!cells.may_touch(cells.box_of(cells.occupancy({})), a));
}
