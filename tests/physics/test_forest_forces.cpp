// Forces over "ranks" equal the serial ones (issue #17): the serial short-range solver with
// the walk from depth-d nodes (top_levels = d) on all particles, against, for each of a few
// ranks, a solver on a forest (OrbTree::assemble_forest) of its own contiguous run of the
// serial tree's depth-d nodes plus every other depth-d node within r_cut of one of them
// (walk_pair's gap test on the boxes, minimal image), targets = its own particles. Only the
// order of the sums may differ: 1e-12 relative, per particle (measured: bitwise equal). Then
// a refit step (moved positions, the same trees refitted) likewise. The same comparison with
// the walk from the root (top_levels = 0) differs by the FMM's error (~2e-3): the walk rule
// is what makes the forces equal.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "fmm/p2p_cpu.hpp"
#include "fmm/short_range.hpp"
#include "fmm/walk_pair.hpp"
#include "support/clustered_particles.hpp"
#include "tree/orb_tree.hpp"

using namespace orbis;

namespace {

constexpr double kBox = 100.0;   // Mpc/h
constexpr int kSide = 32;        // 32^3 clustered particles
constexpr int kNodeParticles = 64, kDepth = 9;   // top_node_particles, and the d it gives

ShortRangeSettings settings_with(int top_levels) {
  ShortRangeSettings s;
  s.box_mpc_h = kBox;
  s.r_s = 0.6 * kBox / kSide;   // 1.9 Mpc/h
  s.r_cut = 5.5 * s.r_s;        // 10.3 Mpc/h: a tenth of the box
  s.theta = 0.5;
  s.multipole_order = 4;
  s.max_leaf = 16;
  s.softening = 0.02;
  s.g_mass = 1.0;
  s.taylor_order = 3;
  s.p2p_double = true;
  s.top_levels = top_levels;
  return s;
}

// walk_pair's drop test alone: a sink that notes whether anything came out of two top nodes.
struct NotDropped {
  bool any = false;
  void m2l(const std::int8_t*) { any = true; }
  void p2p(const std::int8_t*) { any = true; }
  void child(std::int32_t, std::int32_t) { any = true; }
};
bool within_r_cut(const TreeNode& a, const TreeNode& b, const WalkPairParams& p) {
  // Both flagged top (with dummy children): a pair that is not dropped only splits.
  const WalkNode x = make_walk_node(a.lo, a.hi, a.centre, a.radius, 1, 2, -1, true);
  const WalkNode y = make_walk_node(b.lo, b.hi, b.centre, b.radius, 3, 4, -1, true);
  NotDropped sink;
  walk_pair(0, 1, x, y, p, sink);
  return sink.any;
}

struct RankForces {
  std::vector<std::size_t> caller;   // caller index of each own particle
  std::vector<Vec3d> acc;            // its acceleration
  std::size_t imported_groups = 0, particles = 0;
};

struct Rank {
  std::vector<Vec3d> positions;            // forest order
  std::vector<std::uint32_t> offsets;      // group offsets
  std::vector<std::size_t> caller;         // caller index per forest position
  std::vector<std::uint8_t> own;           // 1: own particle (a target)
  std::size_t imported = 0;
};

// The rank owning depth-d nodes [a, b) of `nodes` (index order): its groups and those within
// r_cut, in index order (an empty group inserted after its first group), each gathered
// shuffled and put in subtree order.
Rank make_rank(const OrbTree& serial, const std::vector<Vec3d>& input, const std::vector<std::int32_t>& nodes,
               std::size_t a, std::size_t b, const ShortRangeSettings& s, std::uint64_t seed) {
  const WalkPairParams params = walk_pair_params(WalkSettings{s.box_mpc_h, s.r_cut, s.theta, 0});
  Rank r;
  std::vector<std::size_t> gathered;
  std::vector<std::uint8_t> own;
  r.offsets.push_back(0);
  std::mt19937_64 rng(seed);
  for (std::size_t g = 0; g < nodes.size(); ++g) {
    const TreeNode& n = serial.nodes()[static_cast<std::size_t>(nodes[g])];
    const bool mine = g >= a && g < b;
    bool wanted = mine;
    for (std::size_t h = a; h < b && !wanted; ++h)
      wanted = within_r_cut(serial.nodes()[static_cast<std::size_t>(nodes[h])], n, params);
    if (!wanted) continue;
    r.imported += !mine;
    std::vector<std::size_t> members(serial.order().begin() + n.first, serial.order().begin() + n.first + n.count);
    std::shuffle(members.begin(), members.end(), rng);
    gathered.insert(gathered.end(), members.begin(), members.end());
    own.insert(own.end(), members.size(), mine ? 1 : 0);
    r.offsets.push_back(static_cast<std::uint32_t>(gathered.size()));
    if (r.offsets.size() == 2) r.offsets.push_back(r.offsets.back());   // an empty group
  }
  std::vector<Vec3d> pos(gathered.size());
  for (std::size_t i = 0; i < gathered.size(); ++i) pos[i] = input[gathered[i]];
  const std::vector<std::uint32_t> perm = OrbTree::subtree_order(pos, r.offsets, s.max_leaf);
  for (std::uint32_t t : perm) {
    r.positions.push_back(pos[t]);
    r.caller.push_back(gathered[t]);
    r.own.push_back(own[t]);
  }
  return r;
}

// Largest |a - b| / |b| over the rank's own particles.
double worst_relative(const Rank& r, const std::vector<Vec3d>& acc, const std::vector<Vec3d>& serial) {
  double worst = 0;
  for (std::size_t t = 0; t < r.positions.size(); ++t) {
    if (!r.own[t]) continue;
    const Vec3d& want = serial[r.caller[t]];
    worst = std::max(worst, norm(acc[t] - want) / norm(want));
  }
  return worst;
}

}  // namespace

TEST_CASE("forces on a rank's forest of depth-d subtrees equal the serial tree's (walk from depth d)") {
  const std::vector<Vec3d> input = test::clustered_particles(kSide, kBox, 2024);
  const int max_leaf = settings_with(0).max_leaf;
  const int d = top_levels_for(static_cast<std::int64_t>(input.size()), kNodeParticles, max_leaf);
  REQUIRE(d == kDepth);
  const ShortRangeSettings s = settings_with(d);
  CpuP2PEvaluator p2p;

  ShortRangeSolver serial(s);
  std::vector<Vec3d> acc_serial;
  const ShortRangeStats serial_stats = serial.compute(input, p2p, acc_serial);
  REQUIRE(serial_stats.m2l_interactions > 0);
  // The root walk's forces, to show the rule matters: the same tree, other M2L/P2P splits.
  ShortRangeSolver root_walk(settings_with(0));
  std::vector<Vec3d> acc_root;
  root_walk.compute(input, p2p, acc_root);

  std::vector<std::int32_t> nodes;   // the serial tree's depth-d nodes, index (= tree) order
  for (std::size_t i = 0; i < serial.tree().nodes().size(); ++i)
    if (serial.tree().nodes()[i].depth == d) nodes.push_back(static_cast<std::int32_t>(i));
  REQUIRE(nodes.size() == (std::size_t{1} << d));

  // Moved positions for a refit step: every particle drifts by up to 0.2 Mpc/h.
  std::vector<Vec3d> moved = input;
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> step(-0.2, 0.2);
  for (Vec3d& x : moved)
    for (int k = 0; k < 3; ++k) {
      x[k] += step(rng);
      x[k] = x[k] < 0 ? x[k] + kBox : (x[k] >= kBox ? x[k] - kBox : x[k]);
    }
  ShortRangeTargets refit_all;
  refit_all.refit_tree = true;
  std::vector<Vec3d> acc_serial_moved;
  serial.begin(moved, p2p, refit_all);
  serial.end(acc_serial_moved);

  // Two and three "ranks": contiguous runs of the depth-d nodes, uneven.
  const std::size_t g = nodes.size();
  const std::vector<std::vector<std::size_t>> splits = {{0, g * 2 / 5, g}, {0, g * 2 / 7, g * 5 / 7 + 3, g}};
  std::printf("forest vs serial forces, %d^3 clustered, d = %d, r_cut = %.1f Mpc/h\n", kSide, d, s.r_cut);
  for (const auto& cuts : splits) {
    for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
      const Rank r = make_rank(serial.tree(), input, nodes, cuts[k], cuts[k + 1], s, 11 + k);
      CAPTURE(cuts.size() - 1);
      CAPTURE(k);
      std::vector<std::uint8_t> bins(r.own);   // own particles: bin 1, the targets
      ShortRangeTargets targets;
      targets.bins = &bins;
      targets.min_bin = 1;
      targets.forest_groups = &r.offsets;
      ShortRangeSolver solver(s);
      std::vector<Vec3d> acc(r.positions.size(), Vec3d{0, 0, 0});
      solver.begin(r.positions, p2p, targets);
      const ShortRangeStats stats = solver.end(acc);
      const double err = worst_relative(r, acc, acc_serial);
      const double err_root = worst_relative(r, acc, acc_root);
      CHECK(stats.m2l_interactions > 0);
      CHECK(r.imported > 0);
      CHECK(r.imported + (cuts[k + 1] - cuts[k]) < nodes.size());   // not everything: a real subset
      CHECK(err < 1e-12);
      CHECK(err_root > 1e-7);   // the root walk's split differs by the FMM's error

      // A refit step: the rank's particles moved, in its forest order.
      std::vector<Vec3d> moved_r(r.positions.size());
      for (std::size_t t = 0; t < moved_r.size(); ++t) moved_r[t] = moved[r.caller[t]];
      targets.refit_tree = true;
      solver.begin(moved_r, p2p, targets);
      solver.end(acc);
      const double err_moved = worst_relative(r, acc, acc_serial_moved);
      CHECK(err_moved < 1e-12);
      std::printf("  %zu ranks, rank %zu: %zu own nodes + %zu imported, %zu particles: max relative difference "
                  "%.2e (refit %.2e); vs the root walk %.2e\n",
                  cuts.size() - 1, k, cuts[k + 1] - cuts[k], r.imported, r.positions.size(), err, err_moved,
                  err_root);
    }
  }
}
