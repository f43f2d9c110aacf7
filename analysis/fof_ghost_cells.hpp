// Which of a rank's particles another rank needs as friends-of-friends ghosts, from a coarse
// occupancy grid (fof_ranks.cpp's import_ghosts).
//
// A particle p of rank s must reach rank r when some particle of r lies within one linking
// length l of p. A bounding box of r's particles answers that loosely: a domain made of runs
// of top-tree nodes with a cut inside a subtree (as measured work moves it) is L-shaped, its
// box reaches deep into its neighbour, and every particle of the neighbour there would travel
// (half of all particles at 128^3 with bench_fof_ranks' skewed domains). Here each rank marks
// the cells of a periodic grid (cells a little wider than l, at most kMaxSide per side) that
// hold any of its particles, and p travels to r only when a cell within l of p is marked by
// r: a layer about one cell thick along the boundary.
//
// Completeness: a particle q of r within l of p lies in a marked cell within l of p (the
// distance from p to q's cell is at most |p - q|), and the cells within l of p are among
// the 27 around p's own (cells wider than l). The test keeps a relative margin of 1e-6 on
// l, so a position rounded into the neighbouring cell is never missed; a few particles too
// many cost only their trip and their links.
//
// The bits: cell (i, j, k) (along x, y, z) is bit k of row (i, j), each row padded to whole
// 64-bit words, so that the neighbourhood of the marked cells is a few word operations.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/vec3.hpp"

namespace orbis::fof {

class GhostCells {
 public:
  static constexpr std::int64_t kMaxSide = 256;   // 2 MiB of bits a rank's grid

  // Cells of side box / side, side = floor(box / (l (1 + 1e-5))) within [1, kMaxSide].
  GhostCells(double box_mpc_h, double link_mpc_h);

  std::int64_t side() const { return side_; }
  // 64-bit words of one rank's occupancy bits.
  std::size_t words() const { return static_cast<std::size_t>(side_ * side_ * row_words_); }

  // The occupancy bits of `pos` (any positions: wrapped into the box as they are read):
  // words() words, OpenMP threads.
  std::vector<std::uint64_t> occupancy(const std::vector<Vec3d>& pos) const;

  // The runs of cells along each axis (periodic) that hold every marked cell of some bits:
  // a rank's cell box, all ranks' allgathered to choose which ranks exchange their bits.
  struct Box {
    std::int32_t first[3] = {0, 0, 0}, length[3] = {0, 0, 0};   // all 0: nothing marked
    bool empty() const { return length[0] == 0; }
  };
  Box box_of(const std::vector<std::uint64_t>& bits) const;
  // Whether a particle in one box may lie within l of a particle in the other: along every
  // axis the two runs overlap or touch (a whole cell between them is wider than l).
  bool may_touch(const Box& a, const Box& b) const;

  // The cells set in any of `bits` (words() words each) and their 26 neighbours (periodic),
  // in the same bits (OpenMP threads). A position whose own cell is not set there lies
  // farther than l from every set cell: most of a rank's particles pass after one lookup.
  std::vector<std::uint64_t> neighbourhood(const std::vector<const std::uint64_t*>& bits) const;
  bool in(const Vec3d& x, const std::uint64_t* bits) const { return test(bits, cell_of(x)); }

  // The cells within the linking length of x (any position: wrapped into the box): its own
  // and those of its neighbours whose nearest point lies within l (with the margin), at most 27.
  struct Near {
    std::uint64_t bit[27];
    int count = 0;
  };
  Near near(const Vec3d& x) const;
  // Whether any of `near`'s cells is set in `bits` (words() words).
  static bool any_set(const Near& near, const std::uint64_t* bits) {
    for (int k = 0; k < near.count; ++k)
      if (test(bits, near.bit[k])) return true;
    return false;
  }

 private:
  static bool test(const std::uint64_t* bits, std::uint64_t bit) { return (bits[bit >> 6] >> (bit & 63) & 1u) != 0; }
  std::uint64_t bit_of(std::int64_t i, std::int64_t j, std::int64_t k) const {
    return static_cast<std::uint64_t>((i * side_ + j) * row_words_ * 64 + k);
  }
  double wrap(double v) const;                 // v in [0, box)
  std::int64_t axis(double wrapped) const;     // the cell along one axis of a coordinate in [0, box)
  std::uint64_t cell_of(const Vec3d& x) const; // x's bit, x wrapped into the box

  double box_, cell_, inv_cell_, reach2_;
  std::int64_t side_, row_words_;
};

}  // namespace orbis::fof
