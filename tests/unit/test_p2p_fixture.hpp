// Test and benchmark scenes for P2P, independent of the tree branch: clustered particles,
// leaves from a plain ORB bisection (median split along the longest axis, like the real
// tree), P2P tasks for every leaf pair whose periodic bounding boxes come closer than
// r_cut, and a plain double all-pairs reference (minimal image, exact erfc/exp). The
// reference knows nothing of leaves, tasks or tables.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "core/vec3.hpp"
#include "fmm/p2p.hpp"
#include "fmm/tasks.hpp"

namespace orbis::test {

// n particles: a fraction in Gaussian blobs of random widths (sigma_min..sigma_max, Mpc/h),
// the rest uniform; optionally all inside a sub-cube [lo, lo+extent) (wrapped into the box).
inline std::vector<Vec3d> clustered_positions(std::size_t n, double box, std::uint64_t seed,
                                              int n_blobs = 8, double blob_fraction = 0.6,
                                              double sigma_min = 0.2, double sigma_max = 1.5,
                                              Vec3d lo = {0, 0, 0}, double extent = -1) {
  if (extent <= 0) extent = box;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> g(0, 1);
  std::vector<Vec3d> centres(n_blobs);
  std::vector<double> sigma(n_blobs);
  for (int b = 0; b < n_blobs; ++b) {
    centres[b] = {lo.x + extent * u(rng), lo.y + extent * u(rng), lo.z + extent * u(rng)};
    sigma[b] = sigma_min * std::pow(sigma_max / sigma_min, u(rng));
  }
  std::vector<Vec3d> pos(n);
  for (auto& p : pos) {
    if (n_blobs > 0 && u(rng) < blob_fraction) {
      const int b = std::min(n_blobs - 1, static_cast<int>(u(rng) * n_blobs));
      p = {centres[b].x + sigma[b] * g(rng), centres[b].y + sigma[b] * g(rng),
           centres[b].z + sigma[b] * g(rng)};
    } else {
      p = {lo.x + extent * u(rng), lo.y + extent * u(rng), lo.z + extent * u(rng)};
    }
    p = {periodic_wrap_position(p.x, box), periodic_wrap_position(p.y, box),
         periodic_wrap_position(p.z, box)};
  }
  return pos;
}

struct OrbNode {
  Vec3d lo, hi;              // tight bounding box
  std::uint32_t first = 0, count = 0;
  int child[2] = {-1, -1};
  int leaf = -1;             // leaf index when a leaf
};

struct P2PScene {
  double box = 0;
  std::vector<Vec3d> pos;          // tree order
  std::vector<Leaf> leaves;
  std::vector<OrbNode> nodes;      // nodes[0] is the root
  std::vector<InteractionTask> tasks;
};

namespace detail {
inline int build_orb(P2PScene& s, std::uint32_t first, std::uint32_t count, std::uint32_t max_leaf) {
  OrbNode node;
  node.first = first;
  node.count = count;
  node.lo = {1e300, 1e300, 1e300};
  node.hi = {-1e300, -1e300, -1e300};
  for (std::uint32_t p = first; p < first + count; ++p)
    for (int d = 0; d < 3; ++d) {
      node.lo[d] = std::min(node.lo[d], s.pos[p][d]);
      node.hi[d] = std::max(node.hi[d], s.pos[p][d]);
    }
  const int id = static_cast<int>(s.nodes.size());
  s.nodes.push_back(node);
  if (count <= max_leaf) {
    s.nodes[id].leaf = static_cast<int>(s.leaves.size());
    Leaf leaf;
    leaf.first = first;
    leaf.count = count;
    leaf.centre = (node.lo + node.hi) * 0.5;
    s.leaves.push_back(leaf);
    return id;
  }
  int axis = 0;
  for (int d = 1; d < 3; ++d)
    if (node.hi[d] - node.lo[d] > node.hi[axis] - node.lo[axis]) axis = d;
  std::uint32_t half = count / 2;
  auto less = [axis](const Vec3d& a, const Vec3d& b) { return a[axis] < b[axis]; };
  if (node.hi[axis] - node.lo[axis] > 0.5 * s.box) {
    // A node wider than half the box may hold particles from both sides of the periodic
    // boundary: cut it at the box middle, so no leaf straddles the boundary (a leaf must
    // be compact around its centre for leaf-relative float positions to be accurate).
    auto mid = std::partition(s.pos.begin() + first, s.pos.begin() + first + count,
                              [axis, &s](const Vec3d& a) { return a[axis] < 0.5 * s.box; });
    half = static_cast<std::uint32_t>(mid - (s.pos.begin() + first));   // both sides non-empty
  } else {
    std::nth_element(s.pos.begin() + first, s.pos.begin() + first + half,
                     s.pos.begin() + first + count, less);
  }
  const int c0 = build_orb(s, first, half, max_leaf);
  const int c1 = build_orb(s, first + half, count - half, max_leaf);
  s.nodes[id].child[0] = c0;
  s.nodes[id].child[1] = c1;
  return id;
}
}  // namespace detail

// Leaves of at most max_leaf particles; reorders s.pos into tree order.
inline void build_leaves(P2PScene& s, std::uint32_t max_leaf) {
  s.leaves.clear();
  s.nodes.clear();
  if (!s.pos.empty()) detail::build_orb(s, 0, static_cast<std::uint32_t>(s.pos.size()), max_leaf);
}

// Every (target leaf, source leaf) pair whose periodic bounding boxes come closer than
// r_cut, self pairs included; the source image is the one nearest the target.
inline void build_tasks(P2PScene& s, double r_cut) {
  const double box = s.box;
  const std::int64_t n_leaves = static_cast<std::int64_t>(s.leaves.size());
  std::vector<int> leaf_node(n_leaves);
  for (std::size_t i = 0; i < s.nodes.size(); ++i)
    if (s.nodes[i].leaf >= 0) leaf_node[s.nodes[i].leaf] = static_cast<int>(i);
  std::vector<std::vector<InteractionTask>> per_leaf(n_leaves);
#pragma omp parallel for schedule(dynamic, 16)
  for (std::int64_t li = 0; li < n_leaves; ++li) {
    const OrbNode& a = s.nodes[leaf_node[li]];
    std::vector<int> stack{0};
    while (!stack.empty()) {
      const OrbNode& b = s.nodes[stack.back()];
      stack.pop_back();
      double d2 = 0;
      for (int d = 0; d < 3; ++d) {
        const double dc = periodic_wrap_delta(0.5 * (b.lo[d] + b.hi[d]) - 0.5 * (a.lo[d] + a.hi[d]), box);
        const double gap = std::fabs(dc) - 0.5 * (a.hi[d] - a.lo[d]) - 0.5 * (b.hi[d] - b.lo[d]);
        if (gap > 0) d2 += gap * gap;
      }
      if (d2 >= r_cut * r_cut) continue;
      if (b.leaf < 0) {
        stack.push_back(b.child[1]);
        stack.push_back(b.child[0]);
        continue;
      }
      InteractionTask t;
      t.target = static_cast<std::uint32_t>(li);
      t.source = static_cast<std::uint32_t>(b.leaf);
      for (int d = 0; d < 3; ++d)
        t.image[d] = static_cast<std::int8_t>(
            std::nearbyint((s.leaves[li].centre[d] - s.leaves[b.leaf].centre[d]) / box));
      per_leaf[li].push_back(t);
    }
  }
  s.tasks.clear();
  for (auto& v : per_leaf) s.tasks.insert(s.tasks.end(), v.begin(), v.end());
}

inline P2PScene make_scene(std::vector<Vec3d> pos, double box, std::uint32_t max_leaf, double r_cut) {
  P2PScene s;
  s.box = box;
  s.pos = std::move(pos);
  build_leaves(s, max_leaf);
  build_tasks(s, r_cut);
  return s;
}

inline double exact_truncation(double x) {
  return std::erfc(x) + 2.0 * x / std::sqrt(M_PI) * std::exp(-x * x);
}

// Plain double all-pairs sum over the particles `targets` (indices into pos): minimal image,
// exact T, Plummer softening, pairs at 0 < r < r_cut. near_cut[i] says whether target i
// has a pair within rel_band of r_cut (where float and double may disagree about the cut).
struct DirectResult {
  std::vector<Vec3d> acc;
  std::vector<char> near_cut;
};
inline DirectResult direct_reference(const std::vector<Vec3d>& pos, const std::vector<std::size_t>& targets,
                                     const P2PSettings& st, double rel_band = 1e-6) {
  DirectResult out;
  out.acc.assign(targets.size(), Vec3d{});
  out.near_cut.assign(targets.size(), 0);
  const double rc2 = st.r_cut * st.r_cut, eps2 = st.softening * st.softening;
  const double lo2 = rc2 * (1 - 2 * rel_band), hi2 = rc2 * (1 + 2 * rel_band);
  const std::int64_t nt = static_cast<std::int64_t>(targets.size());
#pragma omp parallel for schedule(dynamic, 8)
  for (std::int64_t k = 0; k < nt; ++k) {
    const Vec3d xi = pos[targets[k]];
    double ax = 0, ay = 0, az = 0;
    for (std::size_t j = 0; j < pos.size(); ++j) {
      const double dx = periodic_wrap_delta(pos[j].x - xi.x, st.box_mpc_h);
      const double dy = periodic_wrap_delta(pos[j].y - xi.y, st.box_mpc_h);
      const double dz = periodic_wrap_delta(pos[j].z - xi.z, st.box_mpc_h);
      const double r2 = dx * dx + dy * dy + dz * dz;
      if (r2 > lo2 && r2 < hi2) out.near_cut[k] = 1;
      if (!(r2 > 0 && r2 < rc2)) continue;
      const double s2 = r2 + eps2, s = std::sqrt(s2);
      const double g = exact_truncation(s / (2 * st.r_s)) / (s2 * s);
      ax += g * dx;
      ay += g * dy;
      az += g * dz;
    }
    out.acc[k] = Vec3d{ax, ay, az} * st.g_mass;
  }
  return out;
}

// Per-particle relative differences |a - a_ref| / |a_ref| (targets with a_ref = 0 skipped,
// and those flagged near the cut, if skip is given).
struct RelStats {
  double median = 0, p99 = 0, max = 0;
  std::size_t n = 0;
};
inline RelStats relative_stats(std::vector<double> rel) {
  RelStats r;
  r.n = rel.size();
  if (rel.empty()) return r;
  std::sort(rel.begin(), rel.end());
  r.median = rel[rel.size() / 2];
  r.p99 = rel[std::min(rel.size() - 1, static_cast<std::size_t>(0.99 * rel.size()))];
  r.max = rel.back();
  return r;
}

// P2P settings of a test scene: r_s = 1.2 L / n_pm, r_cut = 4.5 r_s, softening 1/40 of the
// mean spacing, order-3 table of 512 nodes, G m for m = 0.5.
inline P2PSettings settings_for(double box, int n_pm, std::size_t n_particles) {
  P2PSettings s;
  s.box_mpc_h = box;
  s.r_s = 1.2 * box / n_pm;
  s.r_cut = 4.5 * s.r_s;
  s.softening = 0.025 * box / std::cbrt(static_cast<double>(n_particles));
  s.g_mass = 43.0071 * 0.5;
  s.taylor_order = 3;
  s.table_size = 512;
  return s;
}

}  // namespace orbis::test
