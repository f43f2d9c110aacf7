// Test particle sets spread over the ranks of an MPI test, and the set that probes the x slabs
// of the meshes over ranks (the PM, the energy and the P(k) on the GPUs over ranks).
#pragma once
#include <cmath>
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/particles.hpp"
#include "core/vec3.hpp"
#include "pm/fft_mesh.hpp"
#include "pm/pm_solver.hpp"
#include "support/clustered_particles.hpp"

namespace orbis::test {

// Which of n global particles rank `rank` holds under each way of sharing them among `ranks`:
// "round robin", "contiguous", "all on rank 0", "last rank empty" (every particle on the
// others), "shuffled" (a hashed deal, listed in reverse global order).
inline std::vector<std::size_t> share_of(const std::string& how, std::size_t n, int ranks, int rank) {
  std::vector<std::size_t> mine;
  const auto p = static_cast<std::size_t>(ranks), r = static_cast<std::size_t>(rank);
  for (std::size_t i = 0; i < n; ++i) {
    bool take = false;
    if (how == "round robin") take = i % p == r;
    else if (how == "contiguous") take = i * p / n == r;
    else if (how == "all on rank 0") take = r == 0;
    else if (how == "last rank empty") take = p == 1 || (i * (p - 1) / n == r);
    else if (how == "shuffled") take = (i * 2654435761u) % 7919 % p == r;
    if (take) mine.push_back(i);
  }
  if (how == "shuffled") std::reverse(mine.begin(), mine.end());   // and not in global order
  return mine;
}

// This rank's share when particle i starts on rank i mod P, whatever its domain (an engine's
// first domain update then migrates most): positions, momenta, ids and time bins (if any).
inline Particles strided_share(const Particles& all, const Comm& comm) {
  Particles mine;
  mine.mass = all.mass;
  for (std::size_t i = static_cast<std::size_t>(comm.rank()); i < all.size(); i += static_cast<std::size_t>(comm.size())) {
    mine.pos.push_back(all.pos[i]);
    mine.mom.push_back(all.mom[i]);
    mine.id.push_back(all.id[i]);
    if (!all.time_bin.empty()) mine.time_bin.push_back(all.time_bin[i]);
  }
  return mine;
}

// This rank's positions of `all` when particle i goes to rank (7 (i + deal)) mod (used + 1),
// slot `used` meaning rank 0 (so rank 0 gets about twice the others' share); the last rank
// none when empty_last (and more than one rank).
inline std::vector<Vec3d> uneven_share(const std::vector<Vec3d>& all, const Comm& comm, bool empty_last,
                                       std::size_t deal) {
  const int ranks = comm.size(), used = (empty_last && ranks > 1) ? ranks - 1 : ranks;
  std::vector<Vec3d> mine;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const int slot = static_cast<int>((7 * (i + deal)) % static_cast<std::size_t>(used + 1));
    if ((slot == used ? 0 : slot) == comm.rank()) mine.push_back(all[i]);
  }
  return mine;
}

// The long-range settings of the slab tests: an n mesh in a box of `box`, r_s 1.25 cells.
inline PmSettings slab_test_settings(double box, int n, Window window, bool double_mesh, bool interlaced) {
  PmSettings s;
  s.box_mpc_h = box;
  s.grid_side = n;
  s.window = window;
  s.r_s_mpc_h = 1.25 * box / n;
  s.double_mesh = double_mesh;
  s.interlaced = interlaced;
  return s;
}

// The clustered set (12^3) and, at the first plane of every slab of `ranks` ranks on an n
// mesh (rank 0's is the periodic seam), particles a little before, on and after it, in cell
// units; and two outside the box (wrapped by every solver).
inline std::vector<Vec3d> slab_boundary_particles(double box, int n, int ranks) {
  std::vector<Vec3d> all = clustered_particles(12, box, 2026);
  const double cell = box / n;
  const double offsets[] = {-1.49, -1.0, -0.51, -0.5, -0.01, 0.0, 0.01, 0.25, 0.49, 0.5, 0.99};
  int k = 0;
  for (int r = 0; r < ranks; ++r) {
    const SlabPlanes slab = slab_planes(n, ranks, r);
    if (slab.count == 0) continue;
    for (double o : offsets) {
      const double x = std::fmod((slab.first + o) * cell + box, box);
      all.push_back({x, std::fmod(0.37 * box + 0.11 * k, box), std::fmod(0.81 * box + 0.07 * k, box)});
      ++k;
    }
  }
  all.push_back({std::nextafter(box, 0.0), 0.5 * box, 0.25 * box});
  all.push_back({-0.3 * cell, box + 0.2 * cell, 0.5 * box});
  return all;
}

}  // namespace orbis::test
