// OrbTree::assemble_forest and subtree_order against a serial OrbTree::build: a tree made
// of the serial tree's depth-d subtrees (each group's particles put in its subtree order by
// subtree_order from a shuffled order) must hold those subtrees bit for bit (counts, links,
// depths, boxes, centres, radii, leaves), all 2^d of them or any subset, and so must a
// refit of both to moved positions.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "support/clustered_particles.hpp"
#include "tree/orb_tree.hpp"

using namespace orbis;

namespace {

bool same_bits(const Vec3d& a, const Vec3d& b) { return std::memcmp(&a, &b, sizeof(Vec3d)) == 0; }
bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

// Node a of tree A and node b of tree B, in subtrees rooted at ra and rb: the same node
// (links relative to the roots, leaf indices relative to lb_a / lb_b, geometry bitwise).
bool same_node(const OrbTree& A, std::int32_t a, std::int32_t ra, std::int32_t la, std::uint32_t fa, const OrbTree& B,
               std::int32_t b, std::int32_t rb, std::int32_t lb, std::uint32_t fb) {
  const TreeNode& x = A.nodes()[static_cast<std::size_t>(a)];
  const TreeNode& y = B.nodes()[static_cast<std::size_t>(b)];
  bool ok = x.count == y.count && x.first - fa == y.first - fb && x.depth == y.depth && x.is_leaf() == y.is_leaf();
  ok = ok && same_bits(x.lo, y.lo) && same_bits(x.hi, y.hi) && same_bits(x.centre, y.centre) &&
       same_bits(x.radius, y.radius) && same_bits(x.mass, y.mass);
  if (a != ra) ok = ok && x.parent - ra == y.parent - rb;
  if (!x.is_leaf()) {
    ok = ok && x.left - ra == y.left - rb && x.right - ra == y.right - rb;
  } else {
    ok = ok && x.leaf - la == y.leaf - lb;
    const Leaf& p = A.leaves()[static_cast<std::size_t>(x.leaf)];
    const Leaf& q = B.leaves()[static_cast<std::size_t>(y.leaf)];
    ok = ok && p.count == q.count && p.first - fa == q.first - fb && same_bits(p.centre, q.centre) &&
         A.leaf_node()[static_cast<std::size_t>(x.leaf)] - ra == B.leaf_node()[static_cast<std::size_t>(y.leaf)] - rb;
  }
  return ok;
}

// The first leaf index in the subtree of node r (its leftmost descent).
std::int32_t first_leaf(const OrbTree& t, std::int32_t r) {
  while (!t.nodes()[static_cast<std::size_t>(r)].is_leaf()) r = t.nodes()[static_cast<std::size_t>(r)].left;
  return t.nodes()[static_cast<std::size_t>(r)].leaf;
}

struct Forest {
  std::vector<Vec3d> positions;          // forest order
  std::vector<std::uint32_t> offsets;    // per group in the list
  std::vector<std::uint32_t> caller;     // caller index of each forest position
  std::vector<std::int32_t> serial_root; // per group in the list: its serial depth-d node (-1: empty group)
};

// The groups `which` (serial depth-d nodes, -1 for an empty group), each gathered in a
// shuffled order and put in subtree order by subtree_order.
Forest make_forest(const OrbTree& serial, const std::vector<Vec3d>& input, const std::vector<std::int32_t>& which,
                   int max_leaf, std::uint64_t seed) {
  Forest f;
  f.offsets.push_back(0);
  std::mt19937_64 rng(seed);
  std::vector<std::uint32_t> gathered;
  for (std::int32_t node : which) {
    if (node >= 0) {
      const TreeNode& n = serial.nodes()[static_cast<std::size_t>(node)];
      std::vector<std::uint32_t> members(serial.order().begin() + n.first, serial.order().begin() + n.first + n.count);
      std::shuffle(members.begin(), members.end(), rng);
      gathered.insert(gathered.end(), members.begin(), members.end());
    }
    f.offsets.push_back(static_cast<std::uint32_t>(gathered.size()));
    f.serial_root.push_back(node);
  }
  std::vector<Vec3d> pos(gathered.size());
  for (std::size_t i = 0; i < gathered.size(); ++i) pos[i] = input[gathered[i]];
  const std::vector<std::uint32_t> perm = OrbTree::subtree_order(pos, f.offsets, max_leaf);
  for (std::uint32_t t : perm) {
    f.positions.push_back(pos[t]);
    f.caller.push_back(gathered[t]);
  }
  return f;
}

// Every group's subtree in the forest equals the serial one; returns the mismatched nodes.
std::size_t compare_subtrees(const OrbTree& serial, const OrbTree& forest, const Forest& f, int d) {
  std::size_t bad = 0, groups_seen = 0;
  for (std::size_t i = 0; i < forest.nodes().size(); ++i) {
    const TreeNode& x = forest.nodes()[i];
    if (x.depth != d) continue;   // a group root
    // Which group: the one whose range holds the node's first particle.
    const auto g = static_cast<std::size_t>(std::upper_bound(f.offsets.begin(), f.offsets.end(), x.first) -
                                            f.offsets.begin()) - 1;
    REQUIRE(g < f.serial_root.size());
    const std::int32_t r = f.serial_root[g];
    REQUIRE(r >= 0);
    ++groups_seen;
    const TreeNode& y = serial.nodes()[static_cast<std::size_t>(r)];
    CHECK(x.count == y.count);
    const std::int32_t lf = first_leaf(forest, static_cast<std::int32_t>(i)), ls = first_leaf(serial, r);
    // Preorder: a subtree is the node and the next (size - 1) indices; both have shape(count).
    const auto size = static_cast<std::int32_t>(OrbTree::shape(y.count, serial.max_leaf()).size());
    for (std::int32_t k = 0; k < size; ++k)
      bad += !same_node(forest, static_cast<std::int32_t>(i) + k, static_cast<std::int32_t>(i), lf, x.first, serial,
                        r + k, r, ls, y.first);
  }
  std::size_t non_empty = 0;
  for (std::int32_t r : f.serial_root) non_empty += r >= 0;
  CHECK(groups_seen == non_empty);
  return bad;
}

}  // namespace

TEST_CASE("assemble_forest of the serial tree's depth-d subtrees is that tree, bit for bit") {
  const double box = 100.0;
  const int max_leaf = 8;
  const std::vector<Vec3d> input = test::clustered_particles(24, box, 77);
  const int d = top_levels_for(static_cast<std::int64_t>(input.size()), 128, max_leaf);
  REQUIRE(d == 6);
  OrbTree serial;   // split above depth d as the ranks' top tree and the solver split it
  serial.build(input, max_leaf, 1.0, OrbTree::kParallelMin, d);
  std::vector<std::int32_t> depth_d;
  for (std::size_t i = 0; i < serial.nodes().size(); ++i)
    if (serial.nodes()[i].depth == d) depth_d.push_back(static_cast<std::int32_t>(i));
  REQUIRE(depth_d.size() == (std::size_t{1} << d));

  SUBCASE("all 2^d groups: the whole tree, the artificial top included (both halve evenly)") {
    const Forest f = make_forest(serial, input, depth_d, max_leaf, 1);
    // subtree_order of each shuffled group is the serial tree's order there.
    REQUIRE(f.positions.size() == serial.positions().size());
    CHECK(std::memcmp(f.positions.data(), serial.positions().data(), f.positions.size() * sizeof(Vec3d)) == 0);
    CHECK(f.caller == serial.order());
    OrbTree forest;
    forest.assemble_forest(f.positions, f.offsets, d, max_leaf);
    REQUIRE(forest.nodes().size() == serial.nodes().size());
    REQUIRE(forest.leaves().size() == serial.leaves().size());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < serial.nodes().size(); ++i)
      bad += !same_node(forest, static_cast<std::int32_t>(i), 0, 0, 0, serial, static_cast<std::int32_t>(i), 0, 0, 0);
    CHECK(bad == 0);
    for (std::size_t t = 0; t < forest.order().size(); ++t) CHECK(forest.order()[t] == t);

    // A refit of both to moved positions (the forest's in its own order) stays equal.
    std::vector<Vec3d> moved = input;
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> step(-0.3, 0.3);
    for (Vec3d& x : moved)
      for (int k = 0; k < 3; ++k) x[k] = std::clamp(x[k] + step(rng), 0.0, std::nextafter(box, 0.0));
    std::vector<Vec3d> moved_forest(moved.size());
    for (std::size_t t = 0; t < moved.size(); ++t) moved_forest[t] = moved[f.caller[t]];
    serial.refit(moved);
    forest.refit(moved_forest);
    bad = 0;
    for (std::size_t i = 0; i < serial.nodes().size(); ++i)
      bad += !same_node(forest, static_cast<std::int32_t>(i), 0, 0, 0, serial, static_cast<std::int32_t>(i), 0, 0, 0);
    CHECK(bad == 0);
  }

  SUBCASE("a subset of groups, an empty group among them, not a power of two") {
    std::vector<std::int32_t> which;
    for (std::size_t g = 5; g < 26; ++g) which.push_back(depth_d[g]);
    which.insert(which.begin() + 7, -1);
    which.push_back(depth_d[40]);
    which.push_back(depth_d[63]);
    const Forest f = make_forest(serial, input, which, max_leaf, 2);
    OrbTree forest;
    forest.assemble_forest(f.positions, f.offsets, d, max_leaf, 2.5);
    // Masses scale with particle_mass; compare to a serial tree of the same mass.
    OrbTree serial_mass;
    serial_mass.build(input, max_leaf, 2.5, OrbTree::kParallelMin, d);
    CHECK(compare_subtrees(serial_mass, forest, f, d) == 0);
    // The artificial top stays above depth d; the forest's own invariants.
    for (const TreeNode& n : forest.nodes()) {
      if (n.depth < d) CHECK(!n.is_leaf());
      if (!n.is_leaf()) {
        CHECK(forest.nodes()[static_cast<std::size_t>(n.left)].first == n.first);
        CHECK(forest.nodes()[static_cast<std::size_t>(n.left)].count +
                  forest.nodes()[static_cast<std::size_t>(n.right)].count == n.count);
      }
    }
    CHECK(forest.nodes()[0].count == f.positions.size());

    // Refit of the subset to moved positions: each subtree equals the serial tree refitted.
    std::vector<Vec3d> moved = input;
    for (Vec3d& x : moved) x.y = std::min(x.y * 1.001, std::nextafter(box, 0.0));
    std::vector<Vec3d> moved_forest(f.positions.size());
    for (std::size_t t = 0; t < moved_forest.size(); ++t) moved_forest[t] = moved[f.caller[t]];
    serial_mass.refit(moved);
    forest.refit(moved_forest);
    CHECK(compare_subtrees(serial_mass, forest, f, d) == 0);
  }

  SUBCASE("subtree_order_by_group: the groups in index order, each in its subtree order") {
    std::vector<std::int32_t> group_of(input.size());
    for (std::size_t g = 0; g < depth_d.size(); ++g) {
      const TreeNode& n = serial.nodes()[static_cast<std::size_t>(depth_d[g])];
      for (std::uint32_t t = n.first; t < n.first + n.count; ++t)
        group_of[serial.order()[t]] = static_cast<std::int32_t>(depth_d.size() - 1 - g);   // reversed
    }
    std::vector<std::uint32_t> offsets;
    const auto order = OrbTree::subtree_order_by_group(input, group_of, static_cast<std::int32_t>(depth_d.size()),
                                                       max_leaf, offsets);
    REQUIRE(offsets.size() == depth_d.size() + 1);
    std::size_t bad = 0;
    for (std::size_t g = 0; g < depth_d.size(); ++g) {
      const TreeNode& n = serial.nodes()[static_cast<std::size_t>(depth_d[depth_d.size() - 1 - g])];
      CHECK(offsets[g + 1] - offsets[g] == n.count);
      for (std::uint32_t k = 0; k < n.count; ++k) bad += order[offsets[g] + k] != serial.order()[n.first + k];
    }
    CHECK(bad == 0);
  }

  SUBCASE("bad input") {
    const Forest f = make_forest(serial, input, depth_d, max_leaf, 3);
    OrbTree forest;
    CHECK_THROWS_AS(forest.assemble_forest(f.positions, f.offsets, d - 1, max_leaf), Error);   // 2^d groups
    std::vector<std::uint32_t> short_offsets(f.offsets.begin(), f.offsets.end() - 1);
    CHECK_THROWS_AS(forest.assemble_forest(f.positions, short_offsets, d, max_leaf), Error);
    CHECK_THROWS_AS(OrbTree::subtree_order(f.positions, short_offsets, max_leaf), Error);
  }
}
