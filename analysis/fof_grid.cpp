#include "analysis/fof_grid.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"

namespace orbis::fof {
namespace {

constexpr double kParticlesPerCoarseCell = 4.0;   // ~56 distance checks per particle in voids
// m^3 local fine keys must fit in 32 bits.
constexpr std::int64_t kMaxFinePerCoarse = 1625;

}  // namespace

GridShape grid_shape(double box, double link, std::size_t count) {
  if (!(box > 0)) fail("fof_grid.cpp: box side {} Mpc/h must be positive", box);
  if (!(link > 0) || !(link < 0.5 * box))
    fail("fof_grid.cpp: linking length {} Mpc/h must be positive and below half the box ({} Mpc/h)",
         link, 0.5 * box);
  // Fine side h <= link/sqrt(3) with a margin, so that a cell's diagonal stays below the
  // linking length even after rounding of x/h.
  const double fine_needed = std::ceil(box * std::sqrt(3.0) / link * (1.0 + 1e-9));
  // Coarse cells: ~4 particles each, side >= link (then m >= sqrt(3) >= 2 follows).
  std::int64_t nc = static_cast<std::int64_t>(std::cbrt(static_cast<double>(count) / kParticlesPerCoarseCell));
  nc = std::clamp<std::int64_t>(nc, 1, static_cast<std::int64_t>(std::floor(box / link)));
  nc = std::min<std::int64_t>(nc, 1024);
  std::int64_t m = static_cast<std::int64_t>(std::ceil(fine_needed / static_cast<double>(nc)));
  if (m > kMaxFinePerCoarse)
    fail("fof_grid.cpp: linking length {} Mpc/h is too small for the grid ({} fine cells per coarse "
         "cell side, at most {}); expected a linking length above ~0.002 mean spacings",
         link, m, kMaxFinePerCoarse);
  GridShape shape;
  shape.coarse_side = nc;
  shape.fine_per_coarse = std::max<std::int64_t>(m, 2);
  shape.inv_fine = static_cast<double>(nc * shape.fine_per_coarse) / box;
  shape.fine_limit = static_cast<double>(nc * shape.fine_per_coarse);
  return shape;
}

CellGrid::CellGrid(const std::vector<Vec3d>& pos, double box_mpc_h, double link_mpc_h, std::size_t sizing_count)
    : box_(box_mpc_h), link_(link_mpc_h) {
  const std::size_t n = pos.size();
  const GridShape shape = grid_shape(box_, link_, sizing_count ? sizing_count : n);
  if (n >= std::numeric_limits<std::uint32_t>::max())
    fail("fof_grid.cpp: {} particles in one friends-of-friends set; at most 2^32 - 2 are supported "
         "per rank", n);
  nc_ = shape.coarse_side;
  m_ = shape.fine_per_coarse;
  inv_fine_ = shape.inv_fine;
  fine_limit_ = shape.fine_limit;

  const std::size_t ncells = static_cast<std::size_t>(nc_ * nc_ * nc_);
  start_.assign(ncells + 1, 0);
  order_.resize(n);
  auto coarse_of = [&](const Vec3d& x) {
    const CellCoord f = fine_cell(x);
    return coarse_index(f.x / m_, f.y / m_, f.z / m_);
  };

  // Counting sort into coarse cells: count, inclusive prefix sum (start_[c] = end of c), then
  // scatter backwards so that start_[c] ends as the first slot of c. The scatter order
  // depends on the threads; the per-cell sort below makes the final order unique.
  bool outside = false;
  std::uint32_t* count = start_.data();
#pragma omp parallel for schedule(static) reduction(|| : outside)
  for (std::size_t i = 0; i < n; ++i) {
    const Vec3d& x = pos[i];
    if (!(x.x >= 0 && x.x < box_ && x.y >= 0 && x.y < box_ && x.z >= 0 && x.z < box_)) outside = true;
    const std::size_t c = coarse_of(x);
#pragma omp atomic
    count[c]++;
  }
  if (outside)
    fail("fof_grid.cpp: a particle position lies outside [0, {}) Mpc/h; expected positions wrapped "
         "into the periodic box", box_);
  std::uint32_t running = 0;
  for (std::size_t c = 0; c < ncells; ++c) {
    running += start_[c];
    start_[c] = running;
  }
  start_[ncells] = static_cast<std::uint32_t>(n);
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t c = coarse_of(pos[i]);
    std::uint32_t slot;
#pragma omp atomic capture
    slot = --count[c];
    order_[slot] = static_cast<std::uint32_t>(i);
  }

  // Inside each coarse cell: by fine cell, then by particle index.
#pragma omp parallel
  {
    std::vector<std::uint64_t> keys;
#pragma omp for schedule(dynamic, 256)
    for (std::size_t c = 0; c < ncells; ++c) {
      const std::uint32_t b = start_[c], e = start_[c + 1];
      if (e - b < 2) continue;
      keys.resize(e - b);
      for (std::uint32_t s = b; s < e; ++s) {
        const std::uint32_t i = order_[s];
        keys[s - b] = (static_cast<std::uint64_t>(local_key(fine_cell(pos[i]))) << 32) | i;
      }
      std::sort(keys.begin(), keys.end());
      for (std::uint32_t s = b; s < e; ++s) order_[s] = static_cast<std::uint32_t>(keys[s - b]);
    }
  }
}

}  // namespace orbis::fof
