// Counting test of the dual-tree walk: with a dummy "kernel" that only
// counts, every ordered particle pair (i, j) within r_cut (minimal image) must be covered
// exactly once, by a P2P task (i in the target leaf, j in the source leaf, within r_cut in
// the task's image) or by an M2L task between a target ancestor-or-self of i and a source
// ancestor-or-self of j in the minimal image; pairs beyond r_cut are never covered twice.
// References: brute-force minimal-image distances of all N^2 pairs.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "fmm/walk.hpp"
#include "support/clustered_particles.hpp"
#include "tree/orb_tree.hpp"

using namespace orbis;

namespace {

struct Coverage {
  long within_once = 0, within_missing = 0, within_multiple = 0, within_wrong_image = 0;
  long beyond_multiple = 0, m2l_beyond_cut = 0, self_m2l = 0;
  long m2l_pairs = 0, p2p_pairs = 0;
};

Coverage count(const OrbTree& tree, const TaskLists& lists, double box, double r_cut) {
  const auto& pos = tree.positions();
  const std::size_t n = pos.size();
  std::vector<unsigned char> hits(n * n, 0);
  std::vector<unsigned char> bad_image(n * n, 0);
  Coverage c;
  auto sep = [&](std::uint32_t i, std::uint32_t j, const std::int8_t image[3]) {
    Vec3d d = pos[j] - pos[i];
    for (int k = 0; k < 3; ++k) d[k] += image[k] * box;
    return d;
  };
  auto minimal = [&](std::uint32_t i, std::uint32_t j) {
    Vec3d d = pos[j] - pos[i];
    for (int k = 0; k < 3; ++k) d[k] = periodic_wrap_delta(d[k], box);
    return d;
  };
  for (const auto& task : lists.p2p) {
    const Leaf& t = tree.leaves()[task.target];
    const Leaf& s = tree.leaves()[task.source];
    for (std::uint32_t i = t.first; i < t.first + t.count; ++i)
      for (std::uint32_t j = s.first; j < s.first + s.count; ++j) {
        if (i == j) continue;
        ++c.p2p_pairs;
        if (norm(sep(i, j, task.image)) < r_cut) ++hits[i * n + j];
      }
  }
  for (const auto& task : lists.m2l) {
    const TreeNode& t = tree.nodes()[task.target];
    const TreeNode& s = tree.nodes()[task.source];
    for (std::uint32_t i = t.first; i < t.first + t.count; ++i)
      for (std::uint32_t j = s.first; j < s.first + s.count; ++j) {
        if (i == j) {
          ++c.self_m2l;
          continue;
        }
        ++c.m2l_pairs;
        ++hits[i * n + j];
        const Vec3d d = sep(i, j, task.image);
        if (norm(d - minimal(i, j)) > 1e-9 * box) bad_image[i * n + j] = 1;
        // Design property of this walk: M2L only for node pairs entirely inside r_cut.
        if (norm(d) > r_cut * (1 + 1e-12)) ++c.m2l_beyond_cut;
      }
  }
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      const bool within = norm(minimal(static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j))) < r_cut;
      const unsigned h = hits[i * n + j];
      if (within) {
        if (h == 1) ++c.within_once;
        if (h == 0) ++c.within_missing;
        if (h > 1) ++c.within_multiple;
        if (bad_image[i * n + j]) ++c.within_wrong_image;
      } else if (h > 1) {
        ++c.beyond_multiple;
      }
    }
  return c;
}

void check_grouped(const std::vector<InteractionTask>& tasks) {
  bool sorted = true;
  for (std::size_t q = 1; q < tasks.size(); ++q) sorted &= tasks[q - 1].target <= tasks[q].target;
  CHECK(sorted);
}

// Returns the M2L task count.
std::size_t run_case(const std::vector<Vec3d>& positions, double box, double r_cut, double theta, int max_leaf,
                     bool expect_m2l, int top_levels = 0) {
  OrbTree tree;
  tree.build(positions, max_leaf);
  DualTreeWalk walk;
  TaskLists lists;
  walk.run(tree, WalkSettings{box, r_cut, theta, top_levels}, lists);
  check_grouped(lists.p2p);
  check_grouped(lists.m2l);
  CHECK(lists.p2l.empty());   // leaf-cell pairs are for vacuum boundaries only
  CHECK(lists.m2p.empty());
  REQUIRE(walk.m2l_offsets().size() == tree.nodes().size() + 1);
  for (std::size_t t = 0; t < tree.nodes().size(); ++t)
    for (std::size_t q = walk.m2l_offsets()[t]; q < walk.m2l_offsets()[t + 1]; ++q)
      CHECK(lists.m2l[q].target == t);
  REQUIRE(walk.p2p_offsets().size() == tree.leaves().size() + 1);
  for (std::size_t l = 0; l < tree.leaves().size(); ++l)
    for (std::size_t q = walk.p2p_offsets()[l]; q < walk.p2p_offsets()[l + 1]; ++q)
      CHECK(lists.p2p[q].target == l);
  // The spans (walk order) sorted by (target, source, image) are the P2P list: each target's
  // tasks in the canonical order (walk.hpp); likewise the M2L list, which has no spans.
  const auto canonical = [](const InteractionTask& a, const InteractionTask& b) {
    return std::make_tuple(a.target, a.source, a.image[0], a.image[1], a.image[2]) <
           std::make_tuple(b.target, b.source, b.image[0], b.image[1], b.image[2]);
  };
  std::vector<InteractionTask> from_spans;
  for (const TaskSpan& span : walk.p2p_spans()) from_spans.insert(from_spans.end(), span.data, span.data + span.size);
  std::sort(from_spans.begin(), from_spans.end(), canonical);
  CHECK(std::is_sorted(lists.m2l.begin(), lists.m2l.end(), canonical));
  REQUIRE(from_spans.size() == lists.p2p.size());
  CHECK(std::memcmp(from_spans.data(), lists.p2p.data(), from_spans.size() * sizeof(InteractionTask)) == 0);
  CHECK(walk.p2p_count() == lists.p2p.size());
  // Half mode: each mutual pair one flagged task; expanded (task, then its reverse) it is
  // the walk-order list of the full mode, task for task.
  std::vector<InteractionTask> walk_order;
  for (const TaskSpan& span : walk.p2p_spans()) walk_order.insert(walk_order.end(), span.data, span.data + span.size);
  DualTreeWalk half_walk;
  TaskLists half_lists;
  half_walk.run(tree, WalkSettings{box, r_cut, theta, top_levels}, half_lists, DualTreeWalk::P2POutput::kHalfSpans);
  CHECK(half_lists.p2p.empty());
  CHECK(half_lists.m2l.size() == lists.m2l.size());
  std::vector<InteractionTask> expanded;
  std::size_t flagged = 0;
  for (const TaskSpan& span : half_walk.p2p_spans())
    for (std::size_t q = 0; q < span.size; ++q) {
      InteractionTask t = span.data[q];
      const bool mutual = t.flags & kMutualTask;
      t.flags = 0;
      expanded.push_back(t);
      if (mutual) {
        ++flagged;
        expanded.push_back(InteractionTask{t.source, t.target,
                                           {static_cast<std::int8_t>(-t.image[0]), static_cast<std::int8_t>(-t.image[1]),
                                            static_cast<std::int8_t>(-t.image[2])}, 0});
      }
    }
  if (tree.leaves().size() > 1) CHECK(flagged > 0);
  CHECK(half_walk.p2p_count() == expanded.size());
  REQUIRE(expanded.size() == walk_order.size());
  CHECK(std::memcmp(expanded.data(), walk_order.data(), expanded.size() * sizeof(InteractionTask)) == 0);
  CHECK(walk.p2p_count() == lists.p2p.size());
  const Coverage c = count(tree, lists, box, r_cut);
  MESSAGE("N = " << positions.size() << ", r_cut/L = " << r_cut / box << ", theta = " << theta
                 << ": pairs within r_cut " << c.within_once + c.within_missing + c.within_multiple
                 << ", P2P tasks " << lists.p2p.size() << " (" << c.p2p_pairs << " pairs), M2L tasks "
                 << lists.m2l.size() << " (" << c.m2l_pairs << " pairs)");
  CHECK(c.within_once > 0);
  CHECK(c.within_missing == 0);
  CHECK(c.within_multiple == 0);
  CHECK(c.within_wrong_image == 0);
  CHECK(c.beyond_multiple == 0);
  CHECK(c.m2l_beyond_cut == 0);
  CHECK(c.self_m2l == 0);
  if (expect_m2l) CHECK(c.m2l_pairs > 0);
  // No task touches a top node (not a leaf, depth < top_levels): those are only split.
  std::size_t on_top = 0;
  for (const auto& task : lists.m2l)
    for (std::uint32_t node : {task.target, task.source}) {
      const TreeNode& x = tree.nodes()[node];
      on_top += !x.is_leaf() && x.depth < top_levels;
    }
  CHECK(on_top == 0);

  // The same lists for any thread count.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  TaskLists serial;
  DualTreeWalk walk1;
  walk1.run(tree, WalkSettings{box, r_cut, theta, top_levels}, serial);
  omp_set_num_threads(threads);
  REQUIRE(serial.p2p.size() == lists.p2p.size());
  REQUIRE(serial.m2l.size() == lists.m2l.size());
  CHECK(std::memcmp(serial.p2p.data(), lists.p2p.data(), lists.p2p.size() * sizeof(InteractionTask)) == 0);
  CHECK(std::memcmp(serial.m2l.data(), lists.m2l.data(), lists.m2l.size() * sizeof(InteractionTask)) == 0);
  return lists.m2l.size();
}

}  // namespace

TEST_CASE("walk: every pair within r_cut covered exactly once (clustered, periodic)") {
  const double box = 10.0;
  // 16^3 clustered set with haloes across the box corner; small leaves so M2L is common.
  const auto pos = test::clustered_particles(16, box, 99);
  run_case(pos, box, 0.2 * box, 0.6, 4, true);
  run_case(pos, box, 0.12 * box, 0.5, 2, true);
}

TEST_CASE("walk from the top nodes (top_levels): every pair within r_cut covered exactly once") {
  const double box = 10.0;
  const auto pos = test::clustered_particles(16, box, 99);
  // 4096 particles, nodes of 128 at depth 5.
  const int d = top_levels_for(static_cast<std::int64_t>(pos.size()), 128, 4);
  CHECK(d == 5);
  const std::size_t root = run_case(pos, box, 0.2 * box, 0.6, 4, true, 0);
  run_case(pos, box, 0.2 * box, 0.6, 4, true, d);
  run_case(pos, box, 0.12 * box, 0.5, 2, true, 3);
  // Deeper than the tree's shortest branch (leaves above depth d are not top): still exact,
  // and other tasks than the root walk's (it took M2L pairs above depth 12 in the haloes).
  const std::size_t deep = run_case(pos, box, 0.2 * box, 0.6, 4, true, 12);
  CHECK(deep != root);
}

TEST_CASE("top_levels_for: 2^d nodes of at least node_particles, all of them in the tree") {
  CHECK(top_levels_for(0, 4096, 32) == 0);
  CHECK(top_levels_for(8191, 4096, 32) == 0);
  CHECK(top_levels_for(8192, 4096, 32) == 1);
  CHECK(top_levels_for(int64_t{256} * 256 * 256, 4096, 32) == 12);
  CHECK(top_levels_for(int64_t{128} * 128 * 128, 4096, 16) == 9);
  // Capped where the shape's nodes stop: 100 particles in leaves of 8 split to depth 4 only
  // (nodes of 6 or 7 at depth 4, leaves).
  CHECK(top_levels_for(100, 1, 8) == 4);
  CHECK(top_levels_for(100, 1, 200) == 0);
  for (std::int64_t n : {1000, 4097, 65536, 100003}) {
    const int d = top_levels_for(n, 64, 16);
    std::vector<int> at_depth(64, 0);
    bool leaf_above = false;
    for (const TreeNode& node : OrbTree::shape(static_cast<std::size_t>(n), 16)) {
      ++at_depth[static_cast<std::size_t>(node.depth)];
      leaf_above |= node.is_leaf() && node.depth < d;
    }
    CAPTURE(n);
    CHECK(at_depth[static_cast<std::size_t>(d)] == (1 << d));
    CHECK(!leaf_above);
    CHECK((std::int64_t{1} << d) * 64 <= n);
    CHECK(((std::int64_t{2} << d) * 64 > n || at_depth[static_cast<std::size_t>(d) + 1] < (2 << d)));
  }
  CHECK_THROWS_AS(top_levels_for(100, 0, 8), Error);
}

TEST_CASE("walk: big leaves where several images reach within r_cut") {
  const double box = 1.0;
  // Leaves spanning most of the box: the pair's image is not unique and P2P tasks are
  // emitted per image; the cut in each task must still count each pair once.
  const auto pos = test::uniform_particles(400, box, 8);
  run_case(pos, box, 0.45 * box, 0.5, 100, false);
  run_case(pos, box, 0.3 * box, 0.7, 400, false);
}

TEST_CASE("walk: r_cut must be below BoxSize/2") {
  const auto pos = test::uniform_particles(100, 1.0, 9);
  OrbTree tree;
  tree.build(pos, 8);
  DualTreeWalk walk;
  TaskLists lists;
  CHECK_THROWS_AS(walk.run(tree, WalkSettings{1.0, 0.5, 0.5}, lists), Error);
  CHECK_THROWS_AS(walk.run(tree, WalkSettings{1.0, 0.7, 0.5}, lists), Error);
}

namespace {
struct VacuumCase {
  std::size_t m2l_tasks = 0, p2l_tasks = 0;
  long p2p_pairs = 0;
};

// Vacuum boundaries: every ordered pair (i, j), i != j, covered exactly once by P2P, by an
// M2L between ancestors, or (leaf_cell) by a P2L (source leaf holding j, target ancestor of
// i) or an M2P (target leaf holding i, source ancestor of j), with image 0 everywhere, every
// M2L pair well separated by the opening angle alone (r_T + r_S < theta |z_T - z_S|) and
// every leaf-cell pair's node compact against its distance from the leaf's particles
// (r_C < theta d_min, d_min from z_C to the leaf's sphere or box), each leaf-cell pair emitted in
// both directions.
VacuumCase run_vacuum_case(const std::vector<Vec3d>& positions, double theta, int max_leaf, int top_levels,
                           bool leaf_cell = true) {
  OrbTree tree;
  tree.build(positions, max_leaf, 1.0, OrbTree::kParallelMin, top_levels);
  WalkSettings ws{0.0, 0.0, theta, top_levels};   // box and r_cut are not read
  ws.periodic = false;
  ws.leaf_cell = leaf_cell;
  DualTreeWalk walk;
  TaskLists lists;
  walk.run(tree, ws, lists);
  const std::size_t n = positions.size();
  std::vector<unsigned char> hits(n * n, 0);
  long images = 0, unseparated = 0, p2p_pairs = 0, not_compact = 0;
  const auto leaf_cell_covers = [&](const std::vector<InteractionTask>& list, bool leaf_is_source) {
    for (const auto& task : list) {
      images += task.image[0] != 0 || task.image[1] != 0 || task.image[2] != 0;
      const TreeNode& leaf = tree.nodes()[tree.leaf_node()[leaf_is_source ? task.source : task.target]];
      const TreeNode& cell = tree.nodes()[leaf_is_source ? task.target : task.source];
      CHECK(!cell.is_leaf());
      // The distance from the node's centre to the leaf's particles, bounded below by the
      // distance to the leaf's sphere or to its box.
      Vec3d gap{0, 0, 0};
      for (int d = 0; d < 3; ++d)
        gap[d] = std::max({0.0, leaf.lo[d] - cell.centre[d], cell.centre[d] - leaf.hi[d]});
      const double d_min = std::max(norm(cell.centre - leaf.centre) - leaf.radius, norm(gap));
      not_compact += !(cell.radius < theta * d_min * (1 + 1e-12));
      const TreeNode& t = leaf_is_source ? cell : leaf;
      const TreeNode& s = leaf_is_source ? leaf : cell;
      for (std::uint32_t i = t.first; i < t.first + t.count; ++i)
        for (std::uint32_t j = s.first; j < s.first + s.count; ++j) ++hits[i * n + j];
    }
  };
  leaf_cell_covers(lists.p2l, true);
  leaf_cell_covers(lists.m2p, false);
  // Mutual: the M2P tasks are the P2L tasks reversed.
  REQUIRE(lists.m2p.size() == lists.p2l.size());
  {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> a, b;
    const auto& node_of = tree.leaf_node();
    for (const auto& task : lists.p2l) a.emplace_back(static_cast<std::uint32_t>(node_of[task.source]), task.target);
    for (const auto& task : lists.m2p) b.emplace_back(static_cast<std::uint32_t>(node_of[task.target]), task.source);
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    CHECK(a == b);
  }
  if (!leaf_cell || theta == 0) CHECK(lists.p2l.empty());
  // Grouped by target: P2L per node, M2P per leaf.
  if (!lists.p2l.empty()) {
    REQUIRE(walk.p2l_offsets().size() == tree.nodes().size() + 1);
    REQUIRE(walk.m2p_offsets().size() == tree.leaves().size() + 1);
    for (std::size_t t = 0; t < tree.nodes().size(); ++t)
      for (std::size_t q = walk.p2l_offsets()[t]; q < walk.p2l_offsets()[t + 1]; ++q)
        CHECK(lists.p2l[q].target == t);
    for (std::size_t l = 0; l < tree.leaves().size(); ++l)
      for (std::size_t q = walk.m2p_offsets()[l]; q < walk.m2p_offsets()[l + 1]; ++q)
        CHECK(lists.m2p[q].target == l);
  }
  for (const auto& task : lists.p2p) {
    images += task.image[0] != 0 || task.image[1] != 0 || task.image[2] != 0;
    const Leaf& t = tree.leaves()[task.target];
    const Leaf& s = tree.leaves()[task.source];
    p2p_pairs += static_cast<long>(t.count) * s.count;
    for (std::uint32_t i = t.first; i < t.first + t.count; ++i)
      for (std::uint32_t j = s.first; j < s.first + s.count; ++j) ++hits[i * n + j];
  }
  for (const auto& task : lists.m2l) {
    images += task.image[0] != 0 || task.image[1] != 0 || task.image[2] != 0;
    const TreeNode& t = tree.nodes()[task.target];
    const TreeNode& s = tree.nodes()[task.source];
    unseparated += !(t.radius + s.radius < theta * norm(t.centre - s.centre));
    for (std::uint32_t i = t.first; i < t.first + t.count; ++i)
      for (std::uint32_t j = s.first; j < s.first + s.count; ++j) ++hits[i * n + j];
  }
  long once = 0, wrong = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      if (i != j) (hits[i * n + j] == 1 ? once : wrong) += 1;
  MESSAGE("vacuum, N = " << n << ", theta = " << theta << ", top_levels " << top_levels << ", leaf-cell "
                         << leaf_cell << ": P2P tasks " << lists.p2p.size() << " (" << p2p_pairs
                         << " pairs), M2L tasks " << lists.m2l.size() << ", P2L/M2P pairs " << lists.p2l.size());
  CHECK(once == static_cast<long>(n * (n - 1)));
  CHECK(wrong == 0);
  CHECK(images == 0);
  CHECK(unseparated == 0);
  CHECK(not_compact == 0);
  if (theta == 0) {   // direct summation: every pair in P2P, the particles with themselves too
    CHECK(lists.m2l.empty());
    CHECK(p2p_pairs == static_cast<long>(n * n));
  }
  // The same lists for any thread count.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  TaskLists serial;
  DualTreeWalk walk1;
  walk1.run(tree, ws, serial);
  omp_set_num_threads(threads);
  REQUIRE(serial.p2p.size() == lists.p2p.size());
  REQUIRE(serial.m2l.size() == lists.m2l.size());
  CHECK(std::memcmp(serial.p2p.data(), lists.p2p.data(), lists.p2p.size() * sizeof(InteractionTask)) == 0);
  CHECK(std::memcmp(serial.m2l.data(), lists.m2l.data(), lists.m2l.size() * sizeof(InteractionTask)) == 0);
  REQUIRE(serial.p2l.size() == lists.p2l.size());
  REQUIRE(serial.m2p.size() == lists.m2p.size());
  CHECK(std::memcmp(serial.p2l.data(), lists.p2l.data(), lists.p2l.size() * sizeof(InteractionTask)) == 0);
  CHECK(std::memcmp(serial.m2p.data(), lists.m2p.data(), lists.m2p.size() * sizeof(InteractionTask)) == 0);
  return VacuumCase{lists.m2l.size(), lists.p2l.size(), p2p_pairs};
}
}  // namespace

TEST_CASE("walk, vacuum boundaries: every pair covered once, by the opening angle alone; theta = 0 is direct") {
  // A clustered set moved off the unit box into negative coordinates: nothing wraps.
  std::vector<Vec3d> pos = test::clustered_particles(12, 1.0, 5);
  for (Vec3d& x : pos) x += Vec3d{-3.0, 0.25, -0.5};
  CHECK(run_vacuum_case(pos, 0.5, 8, 0).m2l_tasks > 0);
  CHECK(run_vacuum_case(pos, 0.8, 4, 3).m2l_tasks > 0);
  run_vacuum_case(pos, 0.0, 16, 0);
  // Without leaf-cell pairs (the walk of phase A): the same coverage, more P2P.
  const VacuumCase plain = run_vacuum_case(pos, 0.5, 16, 0, false);
  const VacuumCase hybrid = run_vacuum_case(pos, 0.5, 16, 0, true);
  CHECK(hybrid.p2l_tasks > 0);
  CHECK(hybrid.p2p_pairs < plain.p2p_pairs);
  WalkSettings bad{0.0, 0.0, 1.5, 0};
  bad.periodic = false;
  CHECK_THROWS_AS(check_walk_settings(bad), Error);
}
