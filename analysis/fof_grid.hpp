// The spatial index shared by the friends-of-friends linker and the halo properties: a
// periodic two-level cell grid over particle indices.
//
//   coarse cells  side >= linking length, about 4 particles each on average: every pair
//                 closer than the linking length lies in the same or in adjacent coarse cells;
//   fine cells    side <= linking length / sqrt(3), m^3 of them per coarse cell: any two
//                 particles in one fine cell are friends, which makes dense haloes cheap
//                 (a fine cell is linked as a whole; see fof.cpp).
//
// Particles are counting-sorted into coarse cells (x-major, so a slab of x planes is one
// contiguous range of slots), and inside each coarse cell by (fine cell, particle index):
// the order is fully determined by the positions, whatever the thread count.
// Memory: 4 bytes per particle (`order`) plus 4 bytes per coarse cell (~1 byte/particle).
#pragma once
#include <cstdint>
#include <vector>

#include "core/hostdevice.hpp"
#include "core/vec3.hpp"

namespace orbis::fof {

struct CellCoord {
  std::int64_t x = 0, y = 0, z = 0;
};

// The cell sizes CellGrid takes for `count` particles (its constructor's first step, on its
// own for the device linker, gpu/fof_cuda.cuh, which must put every particle in the same
// coarse cell as the host: that cell decides how a pair across the box's faces is computed).
// Fails as the constructor does on an impossible box or linking length.
struct GridShape {
  std::int64_t coarse_side = 1;     // coarse cells per box side, nc
  std::int64_t fine_per_coarse = 2; // fine cells per coarse side, m
  double inv_fine = 0;              // fine cells per Mpc/h, nc m / box
  double fine_limit = 0;            // nc m as a double
};
GridShape grid_shape(double box_mpc_h, double link_mpc_h, std::size_t count);

// The fine coordinate along one axis of v in [0, box) (CellGrid::fine_cell's): truncation of
// v * inv_fine, 0 below (and for NaN), nc m - 1 at or above the box. Host and device.
ORBIS_HD std::int64_t fine_axis(double v, double inv_fine, double fine_limit, std::int64_t fine_side) {
  const double t = v * inv_fine;
  if (!(t >= 0)) return 0;                       // also NaN: the constructor reports it
  if (t >= fine_limit) return fine_side - 1;
  return static_cast<std::int64_t>(t);           // truncation = floor for t >= 0
}

class CellGrid {
 public:
  // `link_mpc_h` is the linking length; it fixes the fine cells (side <= link/sqrt(3)) and
  // the lower bound of the coarse cells. Requires 0 < link < box/2 and < 2^32 particles.
  // The cells are sized for `sizing_count` particles (0: pos.size()): a grid over part of a
  // set (the members of groups gathered from several ranks) then has the whole set's cells.
  CellGrid(const std::vector<Vec3d>& pos, double box_mpc_h, double link_mpc_h, std::size_t sizing_count = 0);

  double box() const { return box_; }
  double link() const { return link_; }
  std::int64_t coarse_side() const { return nc_; }      // coarse cells per box side
  std::int64_t fine_per_coarse() const { return m_; }   // fine cells per coarse side
  std::int64_t fine_side() const { return nc_ * m_; }   // fine cells per box side
  double coarse_length() const { return box_ / static_cast<double>(nc_); }   // Mpc/h
  double fine_length() const { return box_ / static_cast<double>(nc_ * m_); } // Mpc/h

  // Fine-cell coordinates of a position in [0, box), each in [0, fine_side()).
  CellCoord fine_cell(const Vec3d& x) const {
    return {fine_axis(x.x), fine_axis(x.y), fine_axis(x.z)};
  }
  // Index of the coarse cell with (periodically wrapped) coordinates c.
  std::size_t coarse_index(std::int64_t cx, std::int64_t cy, std::int64_t cz) const {
    return static_cast<std::size_t>((wrap_coarse(cx) * nc_ + wrap_coarse(cy)) * nc_ + wrap_coarse(cz));
  }
  // Key of a fine cell inside its coarse cell, (lx m + ly) m + lz with l = fine mod m.
  std::uint32_t local_key(const CellCoord& f) const {
    return static_cast<std::uint32_t>(((f.x % m_) * m_ + f.y % m_) * m_ + f.z % m_);
  }

  // Slots [cell_begin(c), cell_end(c)) of coarse cell c; order()[slot] is a particle index.
  std::uint32_t cell_begin(std::size_t c) const { return start_[c]; }
  std::uint32_t cell_end(std::size_t c) const { return start_[c + 1]; }
  std::size_t num_cells() const { return start_.size() - 1; }
  const std::vector<std::uint32_t>& order() const { return order_; }
  std::size_t size() const { return order_.size(); }

  // Bytes held by the index (for the benchmark's memory budget).
  std::size_t bytes() const {
    return order_.capacity() * sizeof(std::uint32_t) + start_.capacity() * sizeof(std::uint32_t);
  }

 private:
  std::int64_t fine_axis(double v) const { return fof::fine_axis(v, inv_fine_, fine_limit_, nc_ * m_); }
  std::int64_t wrap_coarse(std::int64_t v) const {
    if (v >= 0 && v < nc_) return v;               // the common case: no division
    v %= nc_;
    return v < 0 ? v + nc_ : v;
  }

  double box_, link_;
  double fine_limit_ = 0;               // fine_side() as a double
  std::int64_t nc_ = 1, m_ = 1;
  double inv_fine_ = 0;                 // fine cells per Mpc/h
  std::vector<std::uint32_t> order_;    // slot -> particle index
  std::vector<std::uint32_t> start_;    // coarse cell -> first slot; start_[num_cells] = N
};

}  // namespace orbis::fof
