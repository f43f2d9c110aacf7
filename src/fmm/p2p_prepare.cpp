#include "fmm/p2p_prepare.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "fmm/truncation.hpp"

namespace orbis {

void check_p2p_call(const P2PSettings& s, const P2PInput& in, std::uint32_t max_count) {
  if (!in.positions || !in.leaves || !in.tasks)
    fail("P2P: positions, leaves and tasks must all be given");
  if (!(s.box_mpc_h > 0)) fail("P2P: box size {} Mpc/h must be positive", s.box_mpc_h);
  if (!(s.r_s > 0)) fail("P2P: r_s = {} Mpc/h must be positive", s.r_s);
  if (!(s.r_cut > 0) || !(s.r_cut < 0.5 * s.box_mpc_h))
    fail("P2P: r_cut = {} Mpc/h must lie in (0, BoxSize/2 = {})", s.r_cut, 0.5 * s.box_mpc_h);
  if (!(s.softening >= 0)) fail("P2P: softening {} Mpc/h must be >= 0", s.softening);
  if (s.taylor_order < -1 || s.taylor_order > 4)
    fail("P2P: taylor_order = {} is not in 0..4 (or -1 for exact erfc)", s.taylor_order);
  if (s.table_size < 2) fail("P2P: taylor_table_size = {} must be >= 2", s.table_size);
  const std::size_t n = in.positions->size();
  if (n >= (std::size_t{1} << 32)) fail("P2P: {} particles exceed 32-bit indices", n);
  for (const Leaf& l : *in.leaves) {
    if (std::size_t{l.first} + l.count > n)
      fail("P2P: leaf [{}, {}) lies outside the {} particles", l.first, l.first + l.count, n);
    if (l.count > max_count)
      fail("P2P: a leaf holds {} particles, more than this backend's {} ([gravity] max_leaf)",
           l.count, max_count);
  }
  const std::size_t nl = in.leaves->size();
  for (const InteractionTask& t : *in.tasks)
    if (t.target >= nl || t.source >= nl)
      fail("P2P: task ({}, {}) refers to a leaf beyond the {} leaves", t.target, t.source, nl);
}

template <typename R>
void leaf_relative_positions(const std::vector<Vec3d>& pos, const std::vector<Leaf>& leaves,
                             double scale, R* x, R* y, R* z) {
  const std::int64_t n = static_cast<std::int64_t>(pos.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < n; ++p) x[p] = y[p] = z[p] = R(0);
  const std::int64_t nl = static_cast<std::int64_t>(leaves.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t l = 0; l < nl; ++l) {
    const Leaf& leaf = leaves[l];
    for (std::uint32_t p = leaf.first; p < leaf.first + leaf.count; ++p) {
      x[p] = static_cast<R>((pos[p].x - leaf.centre.x) * scale);
      y[p] = static_cast<R>((pos[p].y - leaf.centre.y) * scale);
      z[p] = static_cast<R>((pos[p].z - leaf.centre.z) * scale);
    }
  }
}

template <typename R>
void leaf_relative_positions(const std::vector<Vec3d>& pos, const std::vector<Leaf>& leaves,
                             double scale, LeafRelativePositions<R>& out) {
  out.x.resize(pos.size());
  out.y.resize(pos.size());
  out.z.resize(pos.size());
  leaf_relative_positions(pos, leaves, scale, out.x.data(), out.y.data(), out.z.data());
}

template void leaf_relative_positions<float>(const std::vector<Vec3d>&, const std::vector<Leaf>&,
                                             double, LeafRelativePositions<float>&);
template void leaf_relative_positions<double>(const std::vector<Vec3d>&, const std::vector<Leaf>&,
                                              double, LeafRelativePositions<double>&);
template void leaf_relative_positions<float>(const std::vector<Vec3d>&, const std::vector<Leaf>&,
                                             double, float*, float*, float*);
template void leaf_relative_positions<double>(const std::vector<Vec3d>&, const std::vector<Leaf>&,
                                              double, double*, double*, double*);

void copy_accelerations(const double* xyz, std::size_t n, std::vector<Vec3d>& acc) {
  static_assert(sizeof(Vec3d) == 3 * sizeof(double), "Vec3d is three doubles");
  acc.resize(n);
  const std::int64_t chunks = 64;
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::size_t lo = n * c / chunks, hi = n * (c + 1) / chunks;
    if (hi > lo) std::memcpy(static_cast<void*>(&acc[lo]), xyz + 3 * lo, (hi - lo) * sizeof(Vec3d));
  }
}

double p2p_interaction_count(const std::vector<Leaf>& leaves,
                             const std::vector<InteractionTask>& tasks) {
  double sum = 0;
  for (const InteractionTask& t : tasks)
    sum += double(leaves[t.target].count) * double(leaves[t.source].count);
  return sum;
}

std::uint32_t max_leaf_count(const std::vector<Leaf>& leaves) {
  std::uint32_t m = 0;
  for (const Leaf& l : leaves) m = std::max(m, l.count);
  return m;
}

}  // namespace orbis
