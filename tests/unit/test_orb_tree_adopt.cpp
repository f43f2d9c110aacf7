// OrbTree::shape (and its compact records) and OrbTree::begin_adopt/finish_adopt, the two
// doors the device build comes in by: the shape must be build()'s node for node, and
// adopting a tree's own data must give that tree back.
#include <doctest/doctest.h>

#include <algorithm>

#include <cstring>

#include "support/clustered_particles.hpp"
#include "tree/orb_tree.hpp"

using namespace orbis;

namespace {

bool same_bits(const Vec3d& a, const Vec3d& b) { return std::memcmp(&a, &b, sizeof(Vec3d)) == 0; }

void check_same_shape(const TreeNode& a, const TreeNode& b) {
  CHECK(a.first == b.first);
  CHECK(a.count == b.count);
  CHECK(a.left == b.left);
  CHECK(a.right == b.right);
  CHECK(a.parent == b.parent);
  CHECK(a.leaf == b.leaf);
  CHECK(a.depth == b.depth);
}

// The compact records against whole nodes, node for node.
void check_same_shapes(const std::vector<ShapeNode>& records, const std::vector<TreeNode>& nodes) {
  REQUIRE(records.size() == nodes.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    const ShapeNode& r = records[i];
    TreeNode t;
    t.first = r.first, t.count = r.count, t.left = r.left, t.right = r.right;
    t.parent = r.parent, t.leaf = r.leaf, t.depth = r.depth;
    check_same_shape(t, nodes[i]);
  }
}

}  // namespace

TEST_CASE("shape() is build()'s shape") {
  for (const std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{33}, std::size_t{1000},
                              std::size_t{100003}}) {
    for (const int max_leaf : {1, 7, 32}) {
      CAPTURE(n);
      CAPTURE(max_leaf);
      OrbTree tree;
      tree.build(test::uniform_particles(n, 100.0, 5), max_leaf);
      const auto shape = OrbTree::shape(n, max_leaf);
      REQUIRE(shape.size() == tree.nodes().size());
      for (std::size_t i = 0; i < shape.size(); ++i) check_same_shape(shape[i], tree.nodes()[i]);
    }
  }
}

TEST_CASE("shape_nodes and forest_shape_nodes rewrite a reused vector whole") {
  // The device tree keeps its shape's storage from build to build: every node must be
  // written, whatever the vector held before (larger, smaller, garbage).
  const std::vector<std::uint32_t> offsets{0, 40, 40, 1000, 1031, 5000};
  for (const std::size_t before : {std::size_t{0}, std::size_t{10}, std::size_t{100000}}) {
    CAPTURE(before);
    std::vector<ShapeNode> nodes(before);
    for (ShapeNode& s : nodes) std::memset(&s, 0x5a, sizeof s);
    OrbTree::shape_nodes(100003, 7, nodes);
    check_same_shapes(nodes, OrbTree::shape(100003, 7));
    for (ShapeNode& s : nodes) std::memset(&s, 0x5a, sizeof s);
    OrbTree::forest_shape_nodes(5000, offsets, 4, 32, nodes);
    check_same_shapes(nodes, OrbTree::forest_shape(5000, offsets, 4, 32));
  }
}

TEST_CASE("begin_adopt + finish_adopt of a tree's own data reproduces the tree") {
  const auto pos = test::clustered_particles(24, 50.0, 11);
  OrbTree tree;
  tree.build(pos, 9, 2.5);
  OrbTree copy;
  const OrbTree::AdoptArrays into = copy.begin_adopt(tree.size(), tree.nodes().size(), tree.max_leaf());
  std::copy(tree.nodes().begin(), tree.nodes().end(), into.nodes);
  std::copy(tree.order().begin(), tree.order().end(), into.order);
  std::copy(tree.positions().begin(), tree.positions().end(), into.positions);
  copy.finish_adopt();
  REQUIRE(copy.nodes().size() == tree.nodes().size());
  for (std::size_t i = 0; i < tree.nodes().size(); ++i) {
    const TreeNode& a = copy.nodes()[i];
    const TreeNode& b = tree.nodes()[i];
    check_same_shape(a, b);
    CHECK(same_bits(a.lo, b.lo));
    CHECK(same_bits(a.hi, b.hi));
    CHECK(same_bits(a.centre, b.centre));
    CHECK(a.radius == b.radius);
    CHECK(a.mass == b.mass);
  }
  CHECK(copy.order() == tree.order());
  CHECK(copy.leaf_node() == tree.leaf_node());
  CHECK(copy.levels() == tree.levels());
  CHECK(copy.max_leaf() == tree.max_leaf());
  REQUIRE(copy.leaves().size() == tree.leaves().size());
  for (std::size_t l = 0; l < tree.leaves().size(); ++l) {
    CHECK(copy.leaves()[l].first == tree.leaves()[l].first);
    CHECK(copy.leaves()[l].count == tree.leaves()[l].count);
    CHECK(same_bits(copy.leaves()[l].centre, tree.leaves()[l].centre));
  }
  REQUIRE(copy.positions().size() == tree.positions().size());
  CHECK(std::memcmp(copy.positions().data(), tree.positions().data(), pos.size() * sizeof(Vec3d)) == 0);
}
