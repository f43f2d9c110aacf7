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

using namespace orbis;

namespace {

// Structural invariants, each checked against the particles directly.
void check_tree(const OrbTree& tree, const std::vector<Vec3d>& input, int max_leaf) {
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
      // Split along the longest axis of the box: left members never above right members.
      int axis = 0;
      for (int d = 1; d < 3; ++d)
        if (n.hi[d] - n.lo[d] > n.hi[axis] - n.lo[axis]) axis = d;
      ok &= a.hi[axis] <= b.lo[axis];
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
  const int threads = omp_get_max_threads();
  for (const auto& pos : sets) {
    omp_set_num_threads(1);
    OrbTree serial;
    serial.build(pos, 32, 1.0, UINT32_MAX);
    for (std::uint32_t parallel_min : {1u, 100u, 5000u, 7501u, OrbTree::kParallelMin})
    for (int build_threads : {3, 5}) {   // 2 or 3 levels split by all threads (buffers swap)
      omp_set_num_threads(build_threads);
      OrbTree parallel;
      parallel.build(pos, 32, 1.0, parallel_min);
      omp_set_num_threads(threads);
      INFO("N = " << pos.size() << ", parallel_min = " << parallel_min << ", threads = " << build_threads);
      check_tree(parallel, pos, 32);
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
