// ORB tree and multipoles against direct computations on the particles themselves.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "support/clustered_particles.hpp"
#include "tree/multipoles.hpp"
#include "tree/orb_tree.hpp"
#include "tree/split_axis.hpp"

using namespace orbis;

namespace {

// The rule of tree/split_axis.hpp written out again: the lowest axis whose side is at least
// 98% of the longest (above the top depth), the longest side, ties to the lowest (below).
int expected_axis(const TreeNode& n, int top_levels) {
  const double side[3] = {n.hi.x - n.lo.x, n.hi.y - n.lo.y, n.hi.z - n.lo.z};
  const double longest = std::max({side[0], side[1], side[2]});
  for (int a = 0; a < 3; ++a)
    if (n.depth < top_levels ? side[a] >= 0.98 * longest : side[a] == longest) return a;
  return -1;
}

// Structural invariants, each checked against the particles directly (top_levels: the
// build's, for the split axis).
void check_tree(const OrbTree& tree, const std::vector<Vec3d>& input, int max_leaf, int top_levels = 0) {
  const auto& nodes = tree.nodes();
  const auto& pos = tree.positions();
  const auto& order = tree.order();
  REQUIRE(pos.size() == input.size());
  std::vector<char> seen(input.size(), 0);
  for (std::size_t t = 0; t < order.size(); ++t) {
    REQUIRE(order[t] < input.size());
    CHECK(seen[order[t]] == 0);
    seen[order[t]] = 1;
    CHECK(std::memcmp(&pos[t], &input[order[t]], sizeof(Vec3d)) == 0);
  }
  CHECK(nodes[0].first == 0);
  CHECK(nodes[0].count == input.size());
  std::uint32_t next_leaf_first = 0;
  int leaf_count = 0, failures = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const TreeNode& n = nodes[i];
    bool ok = n.count >= 1;
    // Bounding box: contains every member, and is touched by a member on every face.
    Vec3d sum{0, 0, 0};
    double r2max = 0;
    bool touches_lo[3] = {false, false, false}, touches_hi[3] = {false, false, false};
    for (std::uint32_t t = n.first; t < n.first + n.count; ++t) {
      for (int d = 0; d < 3; ++d) {
        ok &= pos[t][d] >= n.lo[d] && pos[t][d] <= n.hi[d];
        touches_lo[d] |= pos[t][d] == n.lo[d];
        touches_hi[d] |= pos[t][d] == n.hi[d];
      }
      sum += pos[t];
    }
    for (int d = 0; d < 3; ++d) ok &= touches_lo[d] && touches_hi[d];
    const Vec3d com = sum * (1.0 / n.count);
    for (std::uint32_t t = n.first; t < n.first + n.count; ++t) r2max = std::max(r2max, norm2(pos[t] - n.centre));
    ok &= norm(com - n.centre) <= 1e-12 * (1 + norm(com));
    ok &= std::fabs(std::sqrt(r2max) - n.radius) <= 1e-12 * (1 + n.radius);
    ok &= n.mass == static_cast<double>(n.count);
    if (n.is_leaf()) {
      ok &= n.count <= static_cast<std::uint32_t>(max_leaf);
      ok &= n.leaf == leaf_count && n.right < 0;
      const Leaf& leaf = tree.leaves()[static_cast<std::size_t>(n.leaf)];
      ok &= leaf.first == n.first && leaf.count == n.count && leaf.first == next_leaf_first;
      ok &= norm(leaf.centre - n.box_centre()) == 0;
      ok &= tree.leaf_node()[static_cast<std::size_t>(n.leaf)] == static_cast<int>(i);
      next_leaf_first += n.count;
      ++leaf_count;
    } else {
      ok &= n.count > static_cast<std::uint32_t>(max_leaf);
      const TreeNode& a = nodes[static_cast<std::size_t>(n.left)];
      const TreeNode& b = nodes[static_cast<std::size_t>(n.right)];
      ok &= a.parent == static_cast<int>(i) && b.parent == static_cast<int>(i);
      ok &= a.depth == n.depth + 1 && b.depth == n.depth + 1;
      ok &= a.first == n.first && b.first == a.first + a.count && a.count + b.count == n.count;
      ok &= a.count == n.count / 2;   // median split
      // Split along the rule's axis of the box: left members never above right members.
      const int axis = expected_axis(n, top_levels);
      ok &= axis >= 0 && a.hi[axis] <= b.lo[axis];
    }
    if (!ok && ++failures < 5) FAIL_CHECK("node " << i << " violates an invariant");
  }
  CHECK(failures == 0);
  CHECK(leaf_count == static_cast<int>(tree.leaves().size()));
  CHECK(next_leaf_first == input.size());
}

}  // namespace

TEST_CASE("ORB tree: structure on clustered and degenerate sets") {
  const double box = 100.0;
  for (int max_leaf : {1, 8, 32}) {
    auto pos = test::clustered_particles(12, box, 7);
    OrbTree tree;
    tree.build(pos, max_leaf);
    check_tree(tree, pos, max_leaf);
  }
  // Many identical positions and a plane of equal x: the total order must still split.
  auto pos = test::uniform_particles(3000, box, 3);
  for (std::size_t i = 0; i < 600; ++i) pos[i] = Vec3d{50, 50, 50};
  for (std::size_t i = 600; i < 1200; ++i) pos[i].x = 25;
  OrbTree tree;
  tree.build(pos, 16);
  check_tree(tree, pos, 16);
  // Reuse of the buffers with a different size.
  auto small = test::uniform_particles(5, box, 4);
  tree.build(small, 16);
  check_tree(tree, small, 16);
  CHECK(tree.nodes().size() == 1);
}

TEST_CASE("ORB tree: independent of the input order") {
  auto pos = test::clustered_particles(14, 50.0, 11);
  for (std::size_t i = 0; i < 100; ++i) pos[i + 100] = pos[i];   // duplicates too
  OrbTree a, b;
  a.build(pos, 12);
  std::vector<std::size_t> perm(pos.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(5));
  std::vector<Vec3d> shuffled(pos.size());
  for (std::size_t i = 0; i < pos.size(); ++i) shuffled[i] = pos[perm[i]];
  b.build(shuffled, 12);
  REQUIRE(a.nodes().size() == b.nodes().size());
  CHECK(std::memcmp(a.positions().data(), b.positions().data(), pos.size() * sizeof(Vec3d)) == 0);
  bool same = true;
  for (std::size_t i = 0; i < a.nodes().size(); ++i) {
    const auto &x = a.nodes()[i], &y = b.nodes()[i];
    same &= x.first == y.first && x.count == y.count && x.left == y.left &&
            std::memcmp(&x.centre, &y.centre, sizeof(Vec3d)) == 0 && x.radius == y.radius &&
            std::memcmp(&x.lo, &y.lo, sizeof(Vec3d)) == 0 && std::memcmp(&x.hi, &y.hi, sizeof(Vec3d)) == 0;
  }
  CHECK(same);
}

TEST_CASE("Multipoles: P2M + M2M equal the direct moments of every node") {
  auto pos = test::clustered_particles(10, 10.0, 21);
  OrbTree tree;
  tree.build(pos, 6);
  for (int p = 1; p <= 6; ++p) {
    Multipoles mp;
    mp.compute(tree, p);
    const MultiIndexSet& set = mp.set();
    REQUIRE(set.size() == (p + 1) * (p + 2) * (p + 3) / 6);
    double worst = 0;
    for (std::size_t i = 0; i < tree.nodes().size(); ++i) {
      const TreeNode& n = tree.nodes()[i];
      for (int q = 0; q < set.size(); ++q) {
        const auto& e = set[q];
        // Direct: sum (x - z)^n / n! with pow and tgamma, independent of the recurrences.
        long double direct = 0;
        for (std::uint32_t t = n.first; t < n.first + n.count; ++t) {
          const Vec3d s = tree.positions()[t] - n.centre;
          direct += std::pow(static_cast<long double>(s.x), e[0]) * std::pow(static_cast<long double>(s.y), e[1]) *
                    std::pow(static_cast<long double>(s.z), e[2]);
        }
        direct /= std::tgamma(e[0] + 1.0) * std::tgamma(e[1] + 1.0) * std::tgamma(e[2] + 1.0);
        const double scale = n.count * std::pow(n.radius, set.degree(q)) + 1e-300;
        worst = std::max(worst, std::fabs(static_cast<double>(direct) - mp.of(static_cast<int>(i))[q]) / scale);
      }
      // Dipole about the centre of mass vanishes.
      CHECK(std::fabs(mp.of(static_cast<int>(i))[1]) <= 1e-12 * n.count * (n.radius + 1e-300));
    }
    INFO("p = " << p);
    CHECK(worst < 1e-12);
  }
}

TEST_CASE("Multipoles: only the needed nodes and their subtrees, bitwise as when all are computed") {
  auto pos = test::clustered_particles(16, 10.0, 5);
  OrbTree tree;
  tree.build(pos, 8);
  Multipoles all, some;
  all.compute(tree, 4);
  std::vector<unsigned char> needed(tree.nodes().size(), 0);
  for (std::size_t i = 3; i < needed.size(); i += 97) needed[i] = 1;
  some.compute(tree, 4, &needed);
  std::size_t checked = 0;
  bool same = true;
  for (std::size_t i = 0; i < needed.size(); ++i) {
    bool wanted = false;   // needed, or below a needed node
    for (int a = static_cast<int>(i); a >= 0; a = tree.nodes()[static_cast<std::size_t>(a)].parent)
      wanted = wanted || needed[static_cast<std::size_t>(a)];
    if (!wanted) continue;
    ++checked;
    same &= std::memcmp(all.of(static_cast<int>(i)), some.of(static_cast<int>(i)), sizeof(double) * all.stride()) == 0;
  }
  CHECK(checked > needed.size() / 20);
  CHECK(same);
}

TEST_CASE("ORB tree: the parallel build equals the serial one") {
  // Uniform, clustered, and degenerate (many identical positions, a plane of equal x) sets;
  // parallel_min from 1 (every node above a leaf split by all threads: sampled median,
  // three-way partition, its fallback) to the default, each against a serial build.
  auto degenerate = test::uniform_particles(20000, 1.0, 3);
  for (std::size_t i = 0; i < 4000; ++i) degenerate[i] = Vec3d{0.5, 0.5, 0.5};
  for (std::size_t i = 4000; i < 8000; ++i) degenerate[i].x = 0.25;
  // 30003 particles: with parallel_min 7501, one node of depth 2 (7500 particles) stops
  // while its three siblings (7501) are split from one buffer into the other.
  const std::vector<std::vector<Vec3d>> sets{test::uniform_particles(60000, 1.0, 31),
                                             test::uniform_particles(30003, 1.0, 32),
                                             test::clustered_particles(30, 1.0, 9), degenerate};
  // top_levels 0 (the longest side everywhere) and 7 (split_axis' stable rule above depth 7,
  // in the data-parallel splits, the per-thread ones and the serial subtrees alike).
  const int threads = omp_get_max_threads();
  for (const auto& pos : sets)
  for (int top_levels : {0, 7}) {
    omp_set_num_threads(1);
    OrbTree serial;
    serial.build(pos, 32, 1.0, UINT32_MAX, top_levels);
    for (std::uint32_t parallel_min : {1u, 100u, 5000u, 7501u, OrbTree::kParallelMin})
    for (int build_threads : {3, 5}) {   // 2 or 3 levels split by all threads (buffers swap)
      omp_set_num_threads(build_threads);
      OrbTree parallel;
      parallel.build(pos, 32, 1.0, parallel_min, top_levels);
      omp_set_num_threads(threads);
      INFO("N = " << pos.size() << ", parallel_min = " << parallel_min << ", threads = " << build_threads
                  << ", top_levels = " << top_levels);
      check_tree(parallel, pos, 32, top_levels);
      REQUIRE(serial.nodes().size() == parallel.nodes().size());
      // Identical positions may trade places (the total order ties them): compare positions
      // always, the caller's indices where no two positions are equal.
      CHECK(std::memcmp(serial.positions().data(), parallel.positions().data(), pos.size() * sizeof(Vec3d)) == 0);
      if (&pos != &sets.back())
        CHECK(std::memcmp(serial.order().data(), parallel.order().data(), pos.size() * sizeof(std::uint32_t)) == 0);
      bool same = true;
      for (std::size_t i = 0; i < serial.nodes().size(); ++i) {
        const TreeNode &x = serial.nodes()[i], &y = parallel.nodes()[i];
        same &= std::memcmp(&x.centre, &y.centre, sizeof(Vec3d)) == 0 && x.radius == y.radius &&
                x.count == y.count && x.first == y.first && x.left == y.left && x.right == y.right &&
                x.leaf == y.leaf && std::memcmp(&x.lo, &y.lo, sizeof(Vec3d)) == 0 &&
                std::memcmp(&x.hi, &y.hi, sizeof(Vec3d)) == 0;
      }
      CHECK(same);
    }
  }
}

namespace {

// Each particle's depth-d node (caller index -> node index).
std::vector<std::int32_t> depth_d_node(const OrbTree& tree, int d) {
  std::vector<std::int32_t> node_of(tree.size(), -1);
  for (std::size_t i = 0; i < tree.nodes().size(); ++i) {
    const TreeNode& n = tree.nodes()[i];
    if (n.depth != d) continue;
    for (std::uint32_t t = n.first; t < n.first + n.count; ++t) node_of[tree.order()[t]] = static_cast<std::int32_t>(i);
  }
  return node_of;
}

std::size_t moved_between(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b) {
  std::size_t moved = 0;
  for (std::size_t i = 0; i < a.size(); ++i) moved += a[i] != b[i];
  return moved;
}

}  // namespace

TEST_CASE("split_axis: the lowest axis within 2% of the longest above the top depth, the longest below") {
  const Vec3d o{0, 0, 0};
  CHECK(split_axis(o, Vec3d{99.5, 100, 50}, 0, 0) == 1);   // below the top depth: the longest
  CHECK(split_axis(o, Vec3d{99.5, 100, 50}, 3, 3) == 1);
  CHECK(split_axis(o, Vec3d{99.5, 100, 50}, 2, 3) == 0);   // above: x is within 2%
  CHECK(split_axis(o, Vec3d{95, 99.5, 100}, 0, 1) == 1);   // x is 5% short, y within 2%
  CHECK(split_axis(o, Vec3d{97.9, 90, 100}, 0, 1) == 2);   // x 2.1% short: only z
  CHECK(split_axis(o, Vec3d{100, 100, 100}, 0, 1) == 0);
  CHECK(split_axis(o, Vec3d{0, 0, 0}, 0, 1) == 0);         // one position: as longest_axis
  CHECK(split_axis(Vec3d{-3, 1, 2}, Vec3d{1, 5.05, 5}, 0, 1) == 0);   // sides 4, 4.05, 3
}

TEST_CASE("ORB tree: a sub-percent change of one coordinate moves the depth-d nodes' members with the longest "
          "side, not with the stable top rule") {
  // A near-cubic uniform set, sides ~99.9 : ~100 : ~99.8: the root's longest side is y. Its
  // particle of largest x moves out by ~0.3% of the coordinate, making x the longest: the
  // longest-side rule turns the root's split (and the whole partition below it) from y to
  // x; the stable rule (the lowest axis within 2%) split x before and after.
  const int max_leaf = 8;
  std::vector<Vec3d> pos = test::uniform_particles(32768, 100.0, 41);
  for (Vec3d& x : pos) x = Vec3d{x.x * 0.999, x.y, x.z * 0.998};
  const int d = top_levels_for(static_cast<std::int64_t>(pos.size()), 512, max_leaf);
  REQUIRE(d == 6);
  std::vector<Vec3d> moved = pos;
  std::size_t far = 0;
  Vec3d lo = pos[0], hi = pos[0];
  for (std::size_t i = 0; i < pos.size(); ++i) {
    if (pos[i].x > pos[far].x) far = i;
    for (int a = 0; a < 3; ++a) lo[a] = std::min(lo[a], pos[i][a]), hi[a] = std::max(hi[a], pos[i][a]);
  }
  REQUIRE(hi.y - lo.y > hi.x - lo.x);
  moved[far].x = lo.x + 1.002 * (hi.y - lo.y);   // x now 0.2% longer than y
  const double change = (moved[far].x - pos[far].x) / pos[far].x;
  CAPTURE(change);
  REQUIRE(change < 0.01);

  OrbTree a, b;
  a.build(pos, max_leaf);
  b.build(moved, max_leaf);
  CHECK(a.nodes()[0].hi.y - a.nodes()[0].lo.y > a.nodes()[0].hi.x - a.nodes()[0].lo.x);
  const std::size_t flipped = moved_between(depth_d_node(a, d), depth_d_node(b, d));
  a.build(pos, max_leaf, 1.0, OrbTree::kParallelMin, d);
  b.build(moved, max_leaf, 1.0, OrbTree::kParallelMin, d);
  const std::size_t stable = moved_between(depth_d_node(a, d), depth_d_node(b, d));
  MESSAGE("particles changing depth-" << d << " node: longest side " << flipped << ", stable top rule " << stable
                                      << " (of " << pos.size() << ")");
  CHECK(flipped > pos.size() / 4);
  CHECK(stable <= 1);   // at most the moved particle itself

  // Every split of the stable trees against the rule written out again: above d the
  // children are separated along the expected axis; the nodes below d are those of the
  // longest-side rule, so a plain build's subtrees of equal members are the same.
  for (const OrbTree* t : {&a, &b}) {
    int wrong = 0;
    for (const TreeNode& n : t->nodes()) {
      if (n.is_leaf()) continue;
      const int axis = expected_axis(n, d);
      const TreeNode& l = t->nodes()[static_cast<std::size_t>(n.left)];
      const TreeNode& r = t->nodes()[static_cast<std::size_t>(n.right)];
      wrong += axis < 0 || l.hi[axis] > r.lo[axis];
    }
    CHECK(wrong == 0);
  }
  // Below d nothing changes: each depth-d node's subtree is a plain build of its members.
  int differ = 0;
  for (std::size_t i = 0; i < a.nodes().size(); ++i) {
    const TreeNode& n = a.nodes()[i];
    if (n.depth != d || i % 7 != 0) continue;   // a sample of the 64 nodes
    std::vector<Vec3d> members(a.positions().begin() + n.first, a.positions().begin() + n.first + n.count);
    OrbTree sub;
    sub.build(members, max_leaf);
    differ += std::memcmp(sub.positions().data(), members.data(), members.size() * sizeof(Vec3d)) != 0;
  }
  CHECK(differ == 0);
}
