// Forces over "ranks" are bitwise the serial ones (issue #17): the serial short-range solver
// with the walk from depth-d nodes (top_levels = d) on all particles, against, for each of
// a few ranks, a solver on a forest (OrbTree::assemble_forest) of its own depth-d nodes of
// the serial tree plus every other depth-d node within r_cut of one of them (walk_pair's
// gap test on the boxes, minimal image), targets = its own particles. The walk's canonical
// order (each target's tasks by source, then image: fmm/walk.hpp) makes the CPU's sums the
// same list in the same order, so the forces are equal (==), not close: float P2P (the
// tiled kernel and the generic loop) and double; 2, 3 and 5 ranks of contiguous runs and a
// rank of two runs; the groups in increasing global order, reversed and own-first (these
// two with their global numbers, ShortRangeTargets::forest_group_ids); a refit step and a
// sub-step with a subset of targets (sinks) on the refitted trees; 1 and 2 OpenMP threads.
// (Without the canonical sort the forests' forces differ in the last bits.) The root walk
// (top_levels = 0) differs by the FMM's error (~2e-3): the walk rule is what makes the
// task sets equal.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include <omp.h>

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
  s.p2p_double = false;
  s.top_levels = top_levels;
  return s;
}

// walk_pair's drop test alone: a sink that notes whether anything came out of two top nodes.
struct NotDropped {
  bool any = false;
  void m2l(const std::int8_t*) { any = true; }
  void p2p(const std::int8_t*) { any = true; }
  void p2l_m2p(bool) { any = true; }
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

// The particles' forces of one solver sequence: a new tree, a refit to moved positions, and
// a sub-step on that refitted tree with the targets bins >= 1 (all three, caller order for
// the serial solver, forest order for a rank's).
struct Steps {
  std::vector<Vec3d> full, refit, sub;
};

// How a rank lists its groups: in increasing global order (no ids given), reversed or own
// first (the layout of RankDomains::with_ghosts), these two with their global numbers.
enum class Layout { increasing, reversed, own_first };
const char* name_of(Layout l) {
  return l == Layout::increasing ? "increasing" : (l == Layout::reversed ? "reversed + ids" : "own first + ids");
}

struct Rank {
  std::vector<Vec3d> positions;            // forest order
  std::vector<std::uint32_t> offsets;      // group offsets
  std::vector<std::uint32_t> ids;          // each group's global number (an empty one: unused)
  std::vector<std::size_t> caller;         // caller index per forest position
  std::vector<std::uint8_t> own;           // 1: own particle (a target)
  std::size_t imported = 0;
};

// The rank owning the depth-d nodes `mine` (indices into `nodes`, tree order) of `serial`
// (built on the input positions; `refitted`: the same tree refitted to the moved ones): its
// groups and those within r_cut of one of them in either tree (walk_pair's drop test, as
// the serial walk pairs them: at the moved positions a group with a particle that crossed
// the box's face has a box across the whole box, within r_cut of every group), listed as
// `layout` says, with an empty group after the first, each gathered shuffled and put in
// subtree order.
Rank make_rank(const OrbTree& serial, const OrbTree& refitted, const std::vector<Vec3d>& input,
               const std::vector<std::int32_t>& nodes, const std::vector<std::size_t>& mine, Layout layout,
               const ShortRangeSettings& s, std::uint64_t seed) {
  const WalkPairParams params = walk_pair_params(WalkSettings{s.box_mpc_h, s.r_cut, s.theta, 0});
  const auto near = [&](const OrbTree& t, std::size_t a, std::size_t b) {
    return within_r_cut(t.nodes()[static_cast<std::size_t>(nodes[a])], t.nodes()[static_cast<std::size_t>(nodes[b])],
                        params);
  };
  std::vector<unsigned char> is_mine(nodes.size(), 0);
  for (std::size_t g : mine) is_mine[g] = 1;
  std::vector<std::size_t> own_groups, imported;
  for (std::size_t g = 0; g < nodes.size(); ++g) {
    if (is_mine[g]) {
      own_groups.push_back(g);
      continue;
    }
    bool wanted = false;
    for (std::size_t h : mine)
      if (!wanted) wanted = near(serial, h, g) || near(refitted, h, g);
    if (wanted) imported.push_back(g);
  }
  std::vector<std::size_t> listed;
  if (layout == Layout::own_first) {
    listed = own_groups;
    listed.insert(listed.end(), imported.begin(), imported.end());
  } else {
    for (std::size_t g = 0; g < nodes.size(); ++g)
      if (is_mine[g] || std::binary_search(imported.begin(), imported.end(), g)) listed.push_back(g);
    if (layout == Layout::reversed) std::reverse(listed.begin(), listed.end());
  }
  Rank r;
  r.imported = imported.size();
  std::vector<std::size_t> gathered;
  std::vector<std::uint8_t> own;
  r.offsets.push_back(0);
  std::mt19937_64 rng(seed);
  for (std::size_t g : listed) {
    const TreeNode& n = serial.nodes()[static_cast<std::size_t>(nodes[g])];
    std::vector<std::size_t> members(serial.order().begin() + n.first, serial.order().begin() + n.first + n.count);
    std::shuffle(members.begin(), members.end(), rng);
    gathered.insert(gathered.end(), members.begin(), members.end());
    own.insert(own.end(), members.size(), is_mine[g]);
    r.offsets.push_back(static_cast<std::uint32_t>(gathered.size()));
    r.ids.push_back(static_cast<std::uint32_t>(g));
    if (r.offsets.size() == 2) {   // an empty group
      r.offsets.push_back(r.offsets.back());
      r.ids.push_back(static_cast<std::uint32_t>(nodes.size() + 7));
    }
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

// Active particles of the sub-steps: about a third, caller order (bin 1; the others bin 0).
std::vector<std::uint8_t> active_bins(std::size_t n) {
  std::vector<std::uint8_t> bins(n);
  std::mt19937_64 rng(5);
  for (auto& b : bins) b = (rng() % 3 == 0) ? 1 : 0;
  return bins;
}

Steps serial_steps(const ShortRangeSettings& s, P2PEvaluator& p2p, const std::vector<Vec3d>& input,
                   const std::vector<Vec3d>& moved, const std::vector<std::uint8_t>& bins) {
  ShortRangeSolver solver(s);
  Steps out;
  solver.compute(input, p2p, out.full);
  ShortRangeTargets refit;
  refit.refit_tree = true;
  solver.begin(moved, p2p, refit);
  solver.end(out.refit);
  ShortRangeTargets sub = refit;
  sub.bins = &bins;
  sub.min_bin = 1;
  out.sub.assign(input.size(), Vec3d{0, 0, 0});
  solver.begin(moved, p2p, sub);
  solver.end(out.sub);
  return out;
}

Steps rank_steps(const ShortRangeSettings& s, P2PEvaluator& p2p, const Rank& r, const std::vector<Vec3d>& moved,
                 const std::vector<std::uint8_t>& active, bool with_ids) {
  ShortRangeSolver solver(s);
  std::vector<std::uint8_t> own(r.own), own_active(r.own.size());
  for (std::size_t t = 0; t < r.own.size(); ++t) own_active[t] = r.own[t] && active[r.caller[t]];
  ShortRangeTargets targets;
  targets.bins = &own;
  targets.min_bin = 1;
  targets.forest_groups = &r.offsets;
  targets.forest_group_ids = with_ids ? &r.ids : nullptr;
  Steps out;
  out.full.assign(r.positions.size(), Vec3d{0, 0, 0});
  solver.begin(r.positions, p2p, targets);
  solver.end(out.full);
  std::vector<Vec3d> moved_r(r.positions.size());
  for (std::size_t t = 0; t < moved_r.size(); ++t) moved_r[t] = moved[r.caller[t]];
  targets.refit_tree = true;
  out.refit.assign(r.positions.size(), Vec3d{0, 0, 0});
  solver.begin(moved_r, p2p, targets);
  solver.end(out.refit);
  targets.bins = &own_active;
  out.sub.assign(r.positions.size(), Vec3d{0, 0, 0});
  solver.begin(moved_r, p2p, targets);
  solver.end(out.sub);
  return out;
}

// Own particles (and, for `sub`, active ones) whose force is not bitwise the serial one's.
std::size_t differing(const Rank& r, const std::vector<Vec3d>& acc, const std::vector<Vec3d>& serial,
                      const std::vector<std::uint8_t>* active = nullptr) {
  std::size_t n = 0;
  for (std::size_t t = 0; t < r.positions.size(); ++t) {
    if (!r.own[t] || (active && !(*active)[r.caller[t]])) continue;
    const Vec3d& a = acc[t];
    const Vec3d& b = serial[r.caller[t]];
    n += !(a.x == b.x && a.y == b.y && a.z == b.z);
  }
  return n;
}

double worst_relative(const Rank& r, const std::vector<Vec3d>& acc, const std::vector<Vec3d>& serial) {
  double worst = 0;
  for (std::size_t t = 0; t < r.positions.size(); ++t)
    if (r.own[t]) worst = std::max(worst, norm(acc[t] - serial[r.caller[t]]) / norm(serial[r.caller[t]]));
  return worst;
}

std::size_t differing_all(const std::vector<Vec3d>& a, const std::vector<Vec3d>& b) {
  std::size_t n = a.size() == b.size() ? 0 : a.size() + b.size();
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    n += !(a[i].x == b[i].x && a[i].y == b[i].y && a[i].z == b[i].z);
  return n;
}

struct Setup {
  std::vector<Vec3d> input, moved;
  std::vector<std::uint8_t> active;
  int d = 0;
  OrbTree tree, refitted;   // the serial solver's tree of the input, and refitted to `moved`
  Setup() : input(test::clustered_particles(kSide, kBox, 2024)) {
    d = top_levels_for(static_cast<std::int64_t>(input.size()), kNodeParticles, settings_with(0).max_leaf);
    tree.build(input, settings_with(0).max_leaf, 1.0, OrbTree::kParallelMin, d);   // as the solver builds it
    // Moved positions for the refit step: every particle drifts by up to 0.2 Mpc/h.
    moved = input;
    std::mt19937_64 rng(9);
    std::uniform_real_distribution<double> step(-0.2, 0.2);
    for (Vec3d& x : moved)
      for (int k = 0; k < 3; ++k) {
        x[k] += step(rng);
        x[k] = x[k] < 0 ? x[k] + kBox : (x[k] >= kBox ? x[k] - kBox : x[k]);
      }
    refitted = tree;
    refitted.refit(moved);
    active = active_bins(input.size());
  }
};

// The serial tree's depth-d nodes, index (= tree) order.
std::vector<std::int32_t> depth_nodes(const OrbTree& tree, int d) {
  std::vector<std::int32_t> nodes;
  for (std::size_t i = 0; i < tree.nodes().size(); ++i)
    if (tree.nodes()[i].depth == d) nodes.push_back(static_cast<std::int32_t>(i));
  return nodes;
}

std::vector<std::size_t> run_of(std::size_t a, std::size_t b) {
  std::vector<std::size_t> v(b - a);
  std::iota(v.begin(), v.end(), a);
  return v;
}

}  // namespace

TEST_CASE("forces on a rank's forest of depth-d subtrees are bitwise the serial tree's (walk from depth d)") {
  const Setup in;
  REQUIRE(in.d == kDepth);
  const int d = in.d;
  struct Variant {
    const char* name;
    bool p2p_double;
    CpuP2POptions options;
  };
  const Variant variants[] = {{"float, default kernel", false, {}},
                              {"float, generic loop", false, CpuP2POptions{-1, false}},
                              {"double", true, {}}};
  for (const Variant& v : variants) {
    CAPTURE(v.name);
    ShortRangeSettings s = settings_with(d);
    s.p2p_double = v.p2p_double;
    CpuP2PEvaluator p2p(v.options);
    const Steps ref = serial_steps(s, p2p, in.input, in.moved, in.active);
    const std::vector<std::int32_t> nodes = depth_nodes(in.tree, d);
    REQUIRE(nodes.size() == (std::size_t{1} << d));
    // The root walk's forces, to show the rule matters: the same tree, other M2L/P2P splits.
    std::vector<Vec3d> acc_root;
    ShortRangeSolver(settings_with(0)).compute(in.input, p2p, acc_root);

    const std::size_t g = nodes.size();
    struct Split {
      std::vector<std::vector<std::size_t>> ranks;
      Layout layout;
    };
    std::vector<Split> splits = {
        {{run_of(0, g * 2 / 5), run_of(g * 2 / 5, g)}, Layout::increasing},
        {{run_of(0, g * 2 / 7), run_of(g * 2 / 7, g * 5 / 7 + 3), run_of(g * 5 / 7 + 3, g)}, Layout::own_first},
        {{run_of(0, g / 5), run_of(g / 5, g / 3), run_of(g / 3, g / 2 + 1), run_of(g / 2 + 1, g * 4 / 5),
          run_of(g * 4 / 5, g)},
         Layout::reversed}};
    std::vector<std::size_t> two_runs = run_of(g / 8, g / 4);   // a rank of two runs of nodes
    const std::vector<std::size_t> second = run_of(g / 2, g / 2 + g / 8);
    two_runs.insert(two_runs.end(), second.begin(), second.end());
    splits.push_back({{two_runs}, Layout::own_first});
    std::printf("forest vs serial forces (%s), %d^3 clustered, d = %d, r_cut = %.1f Mpc/h\n", v.name, kSide, d,
                s.r_cut);
    for (const Split& split : splits) {
      // The other variants on the layouts with ids only (the test's time on 2 cores).
      if (&v != &variants[0] && split.layout == Layout::increasing) continue;
      for (std::size_t k = 0; k < split.ranks.size(); ++k) {
        const Rank r = make_rank(in.tree, in.refitted, in.input, nodes, split.ranks[k], split.layout, s, 11 + k);
        CAPTURE(split.ranks.size());
        CAPTURE(k);
        CAPTURE(name_of(split.layout));
        const bool ids = split.layout != Layout::increasing;
        const Steps got = rank_steps(s, p2p, r, in.moved, in.active, ids);
        CHECK(r.imported > 0);
        CHECK(r.imported + split.ranks[k].size() < nodes.size());   // not everything: a real subset
        const std::size_t n_full = differing(r, got.full, ref.full), n_refit = differing(r, got.refit, ref.refit),
                          n_sub = differing(r, got.sub, ref.sub, &in.active);
        CHECK(n_full == 0);
        CHECK(n_refit == 0);
        CHECK(n_sub == 0);
        const double err_root = worst_relative(r, got.full, acc_root);
        CHECK(err_root > 1e-7);   // the root walk's split differs by the FMM's error
        std::printf("  %zu ranks, rank %zu (%s): %zu own nodes + %zu imported, %zu particles: %zu / %zu / %zu "
                    "differ (new tree / refit / sub-step); vs the root walk %.2e\n",
                    split.ranks.size(), k, name_of(split.layout), split.ranks[k].size(), r.imported,
                    r.positions.size(), n_full, n_refit, n_sub, err_root);
        if (split.layout == Layout::reversed && k == 0) {
          // The same forest without its ids: the sources are then compared by their forest
          // index, not the serial order, and the sums' order differs.
          const Steps unkeyed = rank_steps(s, p2p, r, in.moved, in.active, false);
          const std::size_t n_unkeyed = differing(r, unkeyed.full, ref.full);
          CHECK(n_unkeyed > 0);
          CHECK(worst_relative(r, unkeyed.full, ref.full) < 1e-5);
          std::printf("    the reversed forest without its ids: %zu differ (max relative %.2e)\n", n_unkeyed,
                      worst_relative(r, unkeyed.full, ref.full));
        }
      }
    }
  }
}

TEST_CASE("the short-range forces are bitwise the same on 1 and 2 threads, serial and on a forest") {
  const Setup in;
  const ShortRangeSettings s = settings_with(in.d);
  const int threads = omp_get_max_threads();
  for (const bool dbl : {false, true}) {
    CAPTURE(dbl);
    ShortRangeSettings sd = s;
    sd.p2p_double = dbl;
    CpuP2PEvaluator p2p;
    omp_set_num_threads(1);
    const Steps one = serial_steps(sd, p2p, in.input, in.moved, in.active);
    omp_set_num_threads(2);
    const Steps two = serial_steps(sd, p2p, in.input, in.moved, in.active);
    CHECK(differing_all(one.full, two.full) == 0);
    CHECK(differing_all(one.refit, two.refit) == 0);
    CHECK(differing_all(one.sub, two.sub) == 0);
    const std::vector<std::int32_t> nodes = depth_nodes(in.tree, in.d);
    const Rank r = make_rank(in.tree, in.refitted, in.input, nodes, run_of(nodes.size() / 3, nodes.size() * 2 / 3),
                             Layout::own_first, sd, 3);
    omp_set_num_threads(1);
    const Steps f1 = rank_steps(sd, p2p, r, in.moved, in.active, true);
    omp_set_num_threads(2);
    const Steps f2 = rank_steps(sd, p2p, r, in.moved, in.active, true);
    CHECK(differing(r, f1.full, one.full) == 0);
    CHECK(differing(r, f2.full, one.full) == 0);
    CHECK(differing(r, f2.refit, one.refit) == 0);
    CHECK(differing(r, f2.sub, one.sub, &in.active) == 0);
  }
  omp_set_num_threads(threads);
}

TEST_CASE("a forest's group ids: one per group, distinct") {
  const Setup in;
  const ShortRangeSettings s = settings_with(in.d);
  CpuP2PEvaluator p2p;
  const std::vector<std::int32_t> nodes = depth_nodes(in.tree, in.d);
  Rank r = make_rank(in.tree, in.refitted, in.input, nodes, run_of(0, nodes.size() / 4), Layout::own_first, s, 1);
  ShortRangeTargets targets;
  targets.forest_groups = &r.offsets;
  std::vector<std::uint32_t> ids(r.ids.begin(), r.ids.end() - 1);   // one short
  targets.forest_group_ids = &ids;
  ShortRangeSolver solver(s);
  CHECK_THROWS_AS(solver.begin(r.positions, p2p, targets), Error);
  ids = r.ids;
  ids[3] = ids[5];   // twice
  ShortRangeSolver solver2(s);
  CHECK_THROWS_AS(solver2.begin(r.positions, p2p, targets), Error);
}
