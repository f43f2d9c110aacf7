#include "analysis/halo_potential.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>

#include "core/error.hpp"

namespace orbis::halo {
namespace {

constexpr double kUnitRoundoff = DBL_EPSILON / 2;
constexpr std::uint32_t kLeafSize = 8;           // members per octree leaf (summed exactly)
constexpr int kMaxDepth = 40;                    // coincident members end in one leaf
constexpr double kFirstTheta = 0.4;              // opening angle b / d of the first bound
constexpr double kLastTheta = 0.05;              // no bound below this: the exact sums are cheaper
constexpr std::size_t kExactCandidates = 32;     // this few survivors: exact sums at once

// S_i in the order the header defines: four interleaved partial sums over j in member
// order (j == i adds 0, which leaves a sum unchanged), so the loop can vectorise and the value
// is fixed by the members alone.
template <bool Wrap>
double row_sum(const Vec3d* y, std::uint32_t n, std::uint32_t i, double box, double eps2) {
  const Vec3d yi = y[i];
  auto term = [&](std::uint32_t j) {
    double dx = y[j].x - yi.x, dy = y[j].y - yi.y, dz = y[j].z - yi.z;
    if constexpr (Wrap) {
      dx = periodic_wrap_delta(dx, box);
      dy = periodic_wrap_delta(dy, box);
      dz = periodic_wrap_delta(dz, box);
    }
    const double t = 1.0 / std::sqrt(dx * dx + dy * dy + dz * dz + eps2);
    return j == i ? 0.0 : t;
  };
  double s[4] = {0, 0, 0, 0};
  std::uint32_t j = 0;
  for (; j + 4 <= n; j += 4)
    for (std::uint32_t l = 0; l < 4; ++l) s[l] += term(j + l);
  for (; j < n; ++j) s[j & 3] += term(j);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

double exact_sum(const std::vector<Vec3d>& y, std::uint32_t i, bool wrap, double box, double eps2) {
  const auto n = static_cast<std::uint32_t>(y.size());
  return wrap ? row_sum<true>(y.data(), n, i, box, eps2) : row_sum<false>(y.data(), n, i, box, eps2);
}

// Octree over the members (relative positions), children of a node contiguous in `nodes`.
struct Node {
  Vec3d com;                 // centre of mass
  double b = 0;              // max |y_j - com| over the node's members
  double q = 0;              // sum |y_j - com|^2
  std::uint32_t begin = 0, end = 0;        // into `order`
  std::uint32_t first_child = 0, children = 0;
};

class Octree {
 public:
  explicit Octree(const std::vector<Vec3d>& y) : y_(y), order_(y.size()) {
    for (std::uint32_t k = 0; k < order_.size(); ++k) order_[k] = k;
    Vec3d lo = y[0], hi = y[0];
    for (const Vec3d& p : y)
      for (int d = 0; d < 3; ++d) lo[d] = std::min(lo[d], p[d]), hi[d] = std::max(hi[d], p[d]);
    const double side = std::max({hi.x - lo.x, hi.y - lo.y, hi.z - lo.z});
    nodes_.push_back(Node{});
    nodes_[0].end = static_cast<std::uint32_t>(y.size());
    scratch_.resize(y.size());
    build(0, lo, side, 0);
  }

  // The leaf holding each member.
  std::vector<std::uint32_t> leaf_of() const {
    std::vector<std::uint32_t> out(y_.size());
    for (std::uint32_t k = 0; k < nodes_.size(); ++k)
      if (nodes_[k].children == 0)
        for (std::uint32_t s = nodes_[k].begin; s < nodes_[k].end; ++s) out[order_[s]] = k;
    return out;
  }

  // Lower and upper bounds on S_i for the members targets[0..count), all in leaf `leaf`: one
  // walk for the leaf (its ball: centre c_T, radius b_T). A node B is taken as its monopole
  // when b_B + b_T < theta d, d = |c_B - c_T|: then every target lies outside B's ball, at
  // least d - b_T - b_B from it, which bounds the remainder (header) for all of them at once.
  // Leaves reached are summed exactly.
  void bounds(std::uint32_t leaf, const std::uint32_t* targets, std::size_t count, double theta, double eps2,
              double delta, std::vector<std::uint32_t>& stack, double* lower, double* upper) const {
    const Node& t = nodes_[leaf];
    std::vector<double> s(count, 0.0);
    double e = 0;
    stack.assign(1, 0);
    while (!stack.empty()) {
      const Node& nd = nodes_[stack.back()];
      stack.pop_back();
      if (nd.children == 0) {
        for (std::size_t k = 0; k < count; ++k) {
          const std::uint32_t i = targets[k];
          const Vec3d yi = y_[i];
          double sum = 0;
          for (std::uint32_t m = nd.begin; m < nd.end; ++m) {
            const std::uint32_t j = order_[m];
            if (j != i) sum += 1.0 / std::sqrt(norm2(y_[j] - yi) + eps2);
          }
          s[k] += sum;
        }
        continue;
      }
      const double d = std::sqrt(norm2(nd.com - t.com));
      if (nd.b + t.b < theta * d) {
        const double n = nd.end - nd.begin;
        for (std::size_t k = 0; k < count; ++k) s[k] += n / std::sqrt(norm2(nd.com - y_[targets[k]]) + eps2);
        // Remainder (header) at the nearest target, and the centre of mass's rounding
        // (delta) through |K'(r)| <= 1 / (r^2 + eps^2), r >= d - b_T.
        const double r = d - t.b - nd.b, near = d - t.b;
        const double r2 = r * r + eps2;
        e += nd.q / (r2 * std::sqrt(r2)) + n * delta / (near * near + eps2);
      } else {
        for (std::uint32_t c = 0; c < nd.children; ++c) stack.push_back(nd.first_child + c);
      }
    }
    // Rounding of b, q and d (relative 1e-6 of the bound is far above it) and of the sums:
    // S~ and the exact S each carry <= (n + 64) 2u S of summation and kernel rounding.
    const double rel = (static_cast<double>(y_.size()) + 64) * 4 * kUnitRoundoff;
    for (std::size_t k = 0; k < count; ++k) {
      const double margin = e * (1 + 1e-6) + rel * s[k];
      lower[k] = s[k] - margin;
      upper[k] = s[k] + margin;
    }
  }

 private:
  void build(std::uint32_t node, const Vec3d& lo, double side, int depth) {
    const std::uint32_t begin = nodes_[node].begin, end = nodes_[node].end;
    Vec3d sum{};
    for (std::uint32_t k = begin; k < end; ++k) sum += y_[order_[k]];
    const Vec3d com = sum * (1.0 / (end - begin));
    double b2 = 0, q = 0;
    for (std::uint32_t k = begin; k < end; ++k) {
      const double r2 = norm2(y_[order_[k]] - com);
      b2 = std::max(b2, r2);
      q += r2;
    }
    nodes_[node].com = com;
    nodes_[node].b = std::sqrt(b2);
    nodes_[node].q = q;
    if (end - begin <= kLeafSize || depth >= kMaxDepth || !(side > 0)) return;

    const double half = 0.5 * side;
    const Vec3d mid = lo + Vec3d{half, half, half};
    auto octant = [&](std::uint32_t j) {
      const Vec3d& p = y_[j];
      return (p.x >= mid.x ? 4 : 0) + (p.y >= mid.y ? 2 : 0) + (p.z >= mid.z ? 1 : 0);
    };
    std::array<std::uint32_t, 9> start{};
    for (std::uint32_t k = begin; k < end; ++k) ++start[octant(order_[k]) + 1];
    for (int o = 0; o < 8; ++o) start[o + 1] += start[o];
    std::array<std::uint32_t, 8> next{};
    for (int o = 0; o < 8; ++o) next[o] = begin + start[o];
    for (std::uint32_t k = begin; k < end; ++k) scratch_[next[octant(order_[k])]++] = order_[k];
    std::copy(scratch_.begin() + begin, scratch_.begin() + end, order_.begin() + begin);

    const auto first = static_cast<std::uint32_t>(nodes_.size());
    std::uint32_t children = 0;
    std::array<int, 8> which{};
    for (int o = 0; o < 8; ++o)
      if (start[o + 1] > start[o]) {
        Node child;
        child.begin = begin + start[o];
        child.end = begin + start[o + 1];
        nodes_.push_back(child);
        which[children++] = o;
      }
    nodes_[node].first_child = first;
    nodes_[node].children = children;
    for (std::uint32_t c = 0; c < children; ++c) {
      const int o = which[c];
      const Vec3d child_lo{lo.x + ((o & 4) ? half : 0.0), lo.y + ((o & 2) ? half : 0.0), lo.z + ((o & 1) ? half : 0.0)};
      build(first + c, child_lo, half, depth + 1);
    }
  }

  const std::vector<Vec3d>& y_;
  std::vector<std::uint32_t> order_, scratch_;
  std::vector<Node> nodes_;
};

// The candidate with the largest exact S (ties: smallest ID).
PotentialMinimum best_of(const std::vector<Vec3d>& y, const std::vector<std::uint64_t>& ids,
                         const std::vector<std::uint32_t>& candidates, bool wrap, double box, double eps2) {
  std::vector<double> sums(candidates.size());
  const bool parallel = !omp_in_parallel() && candidates.size() > 1;
#pragma omp parallel for schedule(dynamic, 4) if (parallel)
  for (std::size_t k = 0; k < candidates.size(); ++k) sums[k] = exact_sum(y, candidates[k], wrap, box, eps2);
  PotentialMinimum best{candidates[0], sums[0]};
  for (std::size_t k = 1; k < candidates.size(); ++k)
    if (sums[k] > best.sum || (sums[k] == best.sum && ids[candidates[k]] < ids[best.member]))
      best = {candidates[k], sums[k]};
  return best;
}

}  // namespace

PotentialMinimum potential_minimum(const std::vector<Vec3d>& pos, const std::vector<std::uint64_t>& id,
                                   const std::uint32_t* members, std::uint32_t len, double box,
                                   double softening, std::uint32_t direct_max) {
  if (len == 0) fail("internal: halo_potential.cpp: a group without members");
  if (!(softening >= 0)) fail("halo_potential.cpp: softening {} Mpc/h must be >= 0", softening);
  // Relative positions (header) and the group's extent.
  const Vec3d ref = pos[members[0]];
  std::vector<Vec3d> y(len);
  std::vector<std::uint64_t> ids(len);
  Vec3d lo{}, hi{};
  for (std::uint32_t k = 0; k < len; ++k) {
    const Vec3d d = pos[members[k]] - ref;
    y[k] = {periodic_wrap_delta(d.x, box), periodic_wrap_delta(d.y, box), periodic_wrap_delta(d.z, box)};
    ids[k] = id[members[k]];
    for (int a = 0; a < 3; ++a) lo[a] = std::min(lo[a], y[k][a]), hi[a] = std::max(hi[a], y[k][a]);
  }
  const bool wrap = std::max({hi.x - lo.x, hi.y - lo.y, hi.z - lo.z}) >= 0.5 * box;
  const double eps2 = softening * softening;

  std::vector<std::uint32_t> candidates(len);
  for (std::uint32_t k = 0; k < len; ++k) candidates[k] = k;
  if (len <= direct_max || wrap) return best_of(y, ids, candidates, wrap, box, eps2);

  const Octree tree(y);
  // Rounding of a node's centre of mass: <= (count + 8) 2u max|y| per coordinate.
  const double ymax = std::max({-lo.x, -lo.y, -lo.z, hi.x, hi.y, hi.z});
  const double delta = (static_cast<double>(len) + 8) * 2 * kUnitRoundoff * ymax * std::sqrt(3.0);
  const std::vector<std::uint32_t> leaf = tree.leaf_of();
  std::vector<double> lower, upper;
  const bool parallel = !omp_in_parallel();
  for (double theta = kFirstTheta; candidates.size() > kExactCandidates && theta >= kLastTheta; theta *= 0.5) {
    // Candidates by leaf (the walk is per leaf), then by member.
    std::sort(candidates.begin(), candidates.end(), [&](std::uint32_t a, std::uint32_t b) {
      return leaf[a] != leaf[b] ? leaf[a] < leaf[b] : a < b;
    });
    std::vector<std::size_t> runs;
    for (std::size_t k = 0; k < candidates.size(); ++k)
      if (k == 0 || leaf[candidates[k]] != leaf[candidates[k - 1]]) runs.push_back(k);
    const std::size_t leaves = runs.size();
    runs.push_back(candidates.size());
    lower.resize(candidates.size());
    upper.resize(candidates.size());
#pragma omp parallel if (parallel)
    {
      std::vector<std::uint32_t> stack;
#pragma omp for schedule(dynamic, 4)
      for (std::size_t r = 0; r < leaves; ++r)
        tree.bounds(leaf[candidates[runs[r]]], candidates.data() + runs[r], runs[r + 1] - runs[r], theta, eps2, delta,
                    stack, lower.data() + runs[r], upper.data() + runs[r]);
    }
    // The maximum's upper bound reaches every lower bound, so it survives; a member whose
    // upper bound is below the largest lower bound cannot be the maximum.
    const double floor = *std::max_element(lower.begin(), lower.end());
    std::vector<std::uint32_t> kept;
    for (std::size_t k = 0; k < candidates.size(); ++k)
      if (upper[k] >= floor) kept.push_back(candidates[k]);
    candidates.swap(kept);
  }
  std::sort(candidates.begin(), candidates.end());
  return best_of(y, ids, candidates, false, box, eps2);
}

}  // namespace orbis::halo
