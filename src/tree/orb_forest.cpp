// OrbTree::assemble_forest and subtree_order (tree/orb_tree.hpp): a rank's tree made of
// whole subtrees of the one global ORB tree, with no partitioning, and the order that
// makes a group of particles such a subtree. The forest's shape (forest_shape) is apart
// from its geometry so that the device forest (gpu/orb_tree_cuda.cuh) takes the same one.
//
// The groups may come in any order, but the forest's nodes and leaves are numbered in it
// (preorder: each group's subtree contiguous, the groups in the order given). Groups in
// increasing global order make that numbering the serial tree's restricted to them, which
// the short-range walk's canonical order (fmm/walk.hpp) relies on for forces bitwise the
// serial tree's; in any other order the caller gives the solver the groups' global numbers
// (ShortRangeTargets::forest_group_ids), which it checks (one per group, distinct) and
// turns into the serial order. The tree itself cannot check it: it knows no global numbers.
#include <algorithm>
#include <cstdint>

#include "core/error.hpp"
#include "tree/orb_tree.hpp"
#include "tree/split_axis.hpp"

namespace orbis {

void OrbTree::check_forest_input(std::size_t n, const std::vector<std::uint32_t>& offsets, int top_depth,
                                 int max_leaf) {
  if (max_leaf < 1) fail("ORB forest: max_leaf = {} must be >= 1", max_leaf);
  if (top_depth < 0 || top_depth > 30) fail("ORB forest: top_depth = {} outside [0, 30]", top_depth);
  if (n == 0) fail("ORB forest: no particles");
  if (n > static_cast<std::size_t>(kMaxParticles))
    fail("ORB forest: {} particles, more than its 32-bit indices hold ({})", n, kMaxParticles);
  if (offsets.empty() || offsets.front() != 0 || offsets.back() != n)
    fail("ORB forest: group offsets must run from 0 to the {} particles (got {} offsets, {} .. {})", n,
         offsets.size(), offsets.empty() ? 0 : offsets.front(), offsets.empty() ? 0 : offsets.back());
  for (std::size_t g = 0; g + 1 < offsets.size(); ++g)
    if (offsets[g + 1] < offsets[g]) fail("ORB forest: group offsets decrease at group {}", g);
}

void OrbTree::forest_shape_nodes(std::size_t n, const std::vector<std::uint32_t>& offsets, int top_depth, int max_leaf,
                                 std::vector<ShapeNode>& nodes) {
  check_forest_input(n, offsets, top_depth, max_leaf);
  std::vector<SubtreeRoot> groups;   // each group's subtree, placed below
  for (std::size_t g = 0; g + 1 < offsets.size(); ++g)
    if (offsets[g + 1] > offsets[g])
      groups.push_back(SubtreeRoot{0, -1, top_depth, 0, offsets[g], offsets[g + 1] - offsets[g]});
  // The artificial top has depth ceil(log2 G): its nodes must stay above top_depth.
  if (groups.size() > (std::size_t{1} << top_depth))
    fail("ORB forest: {} non-empty groups, but at most 2^top_depth = {} fit above depth {}", groups.size(),
         std::size_t{1} << top_depth, top_depth);

  // Preorder layout: an artificial node, then its left part, then its right part; a group is
  // its whole subtree (shape(count) nodes). Serial: at most 2^top_depth groups.
  std::int64_t n_nodes = 0, n_leaves = 0;
  std::vector<std::int32_t> top_nodes;   // artificial nodes, preorder
  struct Part {
    std::size_t a, b;
    std::int32_t parent, depth;
  };
  std::vector<ShapeNode> top_records;
  std::vector<Part> stack{{0, groups.size(), -1, 0}};
  while (!stack.empty()) {
    const Part part = stack.back();
    stack.pop_back();
    const auto index = static_cast<std::int32_t>(n_nodes);
    if (part.b - part.a == 1) {
      SubtreeRoot& g = groups[part.a];
      g.index = index;
      g.parent = part.parent;
      g.leaf_base = static_cast<std::int32_t>(n_leaves);
      n_nodes += subtree_nodes(g.count, max_leaf);
      n_leaves += subtree_leaves(g.count, max_leaf);
    } else {
      top_nodes.push_back(index);
      top_records.push_back(ShapeNode{0, 0, -1, -1, -1, part.depth, part.parent});
      ++n_nodes;
      const std::size_t mid = part.a + (part.b - part.a) / 2;
      stack.push_back(Part{mid, part.b, index, part.depth + 1});   // popped after the left part
      stack.push_back(Part{part.a, mid, index, part.depth + 1});
    }
  }
  nodes.resize(static_cast<std::size_t>(n_nodes));
  for (std::size_t q = 0; q < top_nodes.size(); ++q) nodes[static_cast<std::size_t>(top_nodes[q])] = top_records[q];
  // The groups' subtrees in parallel (a run's groups have as many counts as groups; made one
  // after the other they were most of a forest's host time).
  const auto n_groups = static_cast<std::int64_t>(groups.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t q = 0; q < n_groups; ++q) fill_subtree(nodes.data(), groups[static_cast<std::size_t>(q)], max_leaf);
  // Children: each node's parent link names it; left is the first child met in preorder.
  auto link = [&](std::int32_t parent, std::int32_t child) {
    if (parent < 0) return;
    ShapeNode& p = nodes[static_cast<std::size_t>(parent)];
    (p.left < 0 ? p.left : p.right) = child;
  };
  {
    std::size_t q = 0, g = 0;   // merge the artificial nodes and group roots in index order
    while (q < top_nodes.size() || g < groups.size()) {
      if (g == groups.size() || (q < top_nodes.size() && top_nodes[q] < groups[g].index)) {
        link(nodes[static_cast<std::size_t>(top_nodes[q])].parent, top_nodes[q]);
        ++q;
      } else {
        link(groups[g].parent, groups[g].index);
        ++g;
      }
    }
  }
  for (auto it = top_nodes.rbegin(); it != top_nodes.rend(); ++it) {   // children before parents
    ShapeNode& node = nodes[static_cast<std::size_t>(*it)];
    const ShapeNode& a = nodes[static_cast<std::size_t>(node.left)];
    const ShapeNode& b = nodes[static_cast<std::size_t>(node.right)];
    node.first = std::min(a.first, b.first);
    node.count = a.count + b.count;
  }
}

std::vector<TreeNode> OrbTree::forest_shape(std::size_t n, const std::vector<std::uint32_t>& offsets, int top_depth,
                                            int max_leaf) {
  std::vector<ShapeNode> nodes;
  forest_shape_nodes(n, offsets, top_depth, max_leaf, nodes);
  return tree_nodes(nodes);
}

void OrbTree::assemble_forest(const std::vector<Vec3d>& positions, const std::vector<std::uint32_t>& offsets,
                              int top_depth, int max_leaf, double particle_mass) {
  nodes_ = forest_shape(positions.size(), offsets, top_depth, max_leaf);   // checks the input
  max_leaf_ = max_leaf;
  particle_mass_ = particle_mass;
  // Leaves and their nodes, the groups' roots (depth top_depth) and the artificial nodes
  // above them (shallower: forest_shape's top, in preorder).
  std::int64_t n_leaves = 0;
  std::vector<std::int32_t> roots, top_nodes;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const TreeNode& node = nodes_[i];
    n_leaves += node.is_leaf();
    if (node.depth == top_depth) roots.push_back(static_cast<std::int32_t>(i));
    else if (node.depth < top_depth) top_nodes.push_back(static_cast<std::int32_t>(i));
  }
  leaves_.assign(static_cast<std::size_t>(n_leaves), Leaf{});
  leaf_node_.assign(static_cast<std::size_t>(n_leaves), -1);
  const auto n_nodes = static_cast<std::int64_t>(nodes_.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n_nodes; ++i) {
    TreeNode& node = nodes_[static_cast<std::size_t>(i)];
    node.mass = node.count * particle_mass;
    if (!node.is_leaf()) continue;
    leaves_[static_cast<std::size_t>(node.leaf)] = Leaf{node.first, node.count, Vec3d{}};
    leaf_node_[static_cast<std::size_t>(node.leaf)] = static_cast<std::int32_t>(i);
  }

  const auto n = static_cast<std::int64_t>(positions.size());
  pos_.resize(positions.size());
  order_.resize(positions.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t t = 0; t < n; ++t) {
    pos_[static_cast<std::size_t>(t)] = positions[static_cast<std::size_t>(t)];
    order_[static_cast<std::size_t>(t)] = static_cast<std::uint32_t>(t);
  }
  // The geometry as refit() computes it (build()'s bits on the same order).
  const auto n_groups = static_cast<std::int64_t>(roots.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t q = 0; q < n_groups; ++q) refit_subtree(roots[static_cast<std::size_t>(q)]);
  for (auto it = top_nodes.rbegin(); it != top_nodes.rend(); ++it) refit_node(*it);   // children before parents
  derive_levels();
}

namespace {

// The order OrbTree::build (top_levels 0) gives a group, without the tree: each node of
// more than max_leaf members split at its count/2-th member in the total order along the
// longest side of its tight box (ties to the lowest axis: split_axis below the top depth),
// a leaf sorted in that order. The same total order as OrbTree::build's (coordinate A, then
// (A+1)%3, then (A+2)%3; tree/orb_tree.cpp), so the same order of positions, whatever
// partition finds the split: no boxes kept, no centres or radii (the forest's refit makes
// those), nothing allocated but the thread's item buffer.
struct OrderItem {
  Vec3d x;
  std::uint32_t index;
};
template <int A>
struct OrderLess {
  static constexpr int B = (A + 1) % 3, C = (A + 2) % 3;
  bool operator()(const OrderItem& a, const OrderItem& b) const {
    if (a.x[A] != b.x[A]) return a.x[A] < b.x[A];
    if (a.x[B] != b.x[B]) return a.x[B] < b.x[B];
    return a.x[C] < b.x[C];
  }
};
template <typename F>
void with_order_axis(int axis, F&& f) {
  switch (axis) {
    case 0: f(OrderLess<0>{}); break;
    case 1: f(OrderLess<1>{}); break;
    default: f(OrderLess<2>{}); break;
  }
}

void order_node(OrderItem* begin, std::uint32_t count, int max_leaf) {
  Vec3d lo = begin->x, hi = begin->x;   // OrbTree's bounding_box, in its order of min/max
  for (std::uint32_t i = 0; i < count; ++i) {
    const Vec3d& x = begin[i].x;
    lo.x = std::min(lo.x, x.x); lo.y = std::min(lo.y, x.y); lo.z = std::min(lo.z, x.z);
    hi.x = std::max(hi.x, x.x); hi.y = std::max(hi.y, x.y); hi.z = std::max(hi.z, x.z);
  }
  const int axis = longest_axis(lo, hi);   // split_axis(lo, hi, depth, 0)
  if (count <= static_cast<std::uint32_t>(max_leaf)) {
    with_order_axis(axis, [&](auto less) { std::sort(begin, begin + count, less); });
    return;
  }
  const std::uint32_t n_left = count / 2;
  with_order_axis(axis, [&](auto less) { std::nth_element(begin, begin + n_left, begin + count, less); });
  order_node(begin, n_left, max_leaf);
  order_node(begin + n_left, count - n_left, max_leaf);
}

// out[first .. end) = the indices of group [first, end) in subtree order, each group by one
// thread. index(k): the particle at grouped place k (its position positions[index(k)]).
template <typename Index>
void order_groups(const std::vector<Vec3d>& positions, const std::vector<std::uint32_t>& offsets, int max_leaf,
                  Index index, std::vector<std::uint32_t>& out) {
  const auto n_groups = static_cast<std::int64_t>(offsets.size()) - 1;
#pragma omp parallel
  {
    std::vector<OrderItem> items;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t g = 0; g < n_groups; ++g) {
      const std::uint32_t first = offsets[static_cast<std::size_t>(g)], end = offsets[static_cast<std::size_t>(g) + 1];
      if (end == first) continue;
      items.resize(end - first);
      for (std::uint32_t k = first; k < end; ++k) {
        const std::uint32_t i = index(k);
        items[k - first] = OrderItem{positions[i], i};
      }
      order_node(items.data(), end - first, max_leaf);
      for (std::uint32_t t = 0; t < end - first; ++t) out[first + t] = items[t].index;
    }
  }
}

}  // namespace

std::vector<std::uint32_t> OrbTree::subtree_order(const std::vector<Vec3d>& positions,
                                                  const std::vector<std::uint32_t>& offsets, int max_leaf) {
  if (max_leaf < 1) fail("ORB subtree order: max_leaf = {} must be >= 1", max_leaf);
  if (offsets.empty() || offsets.front() != 0 || offsets.back() != positions.size())
    fail("ORB subtree order: group offsets must run from 0 to the {} particles", positions.size());
  for (std::size_t g = 0; g + 1 < offsets.size(); ++g)
    if (offsets[g + 1] < offsets[g]) fail("ORB subtree order: group offsets decrease at group {}", g);
  std::vector<std::uint32_t> out(positions.size());
  order_groups(positions, offsets, max_leaf, [](std::uint32_t k) { return k; }, out);
  return out;
}

std::vector<std::uint32_t> OrbTree::subtree_order_by_group(const std::vector<Vec3d>& positions,
                                                           const std::vector<std::int32_t>& group_of,
                                                           std::int32_t n_groups, int max_leaf,
                                                           std::vector<std::uint32_t>& group_offsets) {
  if (max_leaf < 1) fail("ORB subtree order: max_leaf = {} must be >= 1", max_leaf);
  if (group_of.size() != positions.size())
    fail("ORB subtree order: {} group indices for {} particles", group_of.size(), positions.size());
  if (n_groups < 0) fail("ORB subtree order: {} groups", n_groups);
  const std::size_t n = group_of.size(), groups = static_cast<std::size_t>(n_groups);
  // Grouped stably by a counting sort over fixed blocks: each block's count per group, the
  // places group-major then block by block, each block scattered by one thread.
  constexpr std::size_t kBlock = std::size_t{1} << 16;
  const std::size_t n_blocks = (n + kBlock - 1) / kBlock;
  std::vector<std::uint32_t> place(n_blocks * groups, 0);   // [b * groups + g]
  std::int64_t bad = -1;
#pragma omp parallel for schedule(static) reduction(max : bad)
  for (std::ptrdiff_t b = 0; b < static_cast<std::ptrdiff_t>(n_blocks); ++b) {
    std::uint32_t* count = place.data() + static_cast<std::size_t>(b) * groups;
    const std::size_t end = std::min(n, (static_cast<std::size_t>(b) + 1) * kBlock);
    for (std::size_t i = static_cast<std::size_t>(b) * kBlock; i < end; ++i) {
      const std::int32_t g = group_of[i];
      if (g < 0 || g >= n_groups) {
        bad = std::max(bad, static_cast<std::int64_t>(i));
        continue;
      }
      ++count[static_cast<std::size_t>(g)];
    }
  }
  if (bad >= 0)
    fail("ORB subtree order: particle {} in group {}, outside [0, {})", bad, group_of[static_cast<std::size_t>(bad)],
         n_groups);
  group_offsets.assign(groups + 1, 0);
  std::uint32_t at = 0;
  for (std::size_t g = 0; g < groups; ++g) {
    group_offsets[g] = at;
    for (std::size_t b = 0; b < n_blocks; ++b) {
      const std::uint32_t c = place[b * groups + g];
      place[b * groups + g] = at;
      at += c;
    }
  }
  group_offsets[groups] = at;
  std::vector<std::uint32_t> grouped(n);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t b = 0; b < static_cast<std::ptrdiff_t>(n_blocks); ++b) {
    std::uint32_t* cursor = place.data() + static_cast<std::size_t>(b) * groups;
    const std::size_t end = std::min(n, (static_cast<std::size_t>(b) + 1) * kBlock);
    for (std::size_t i = static_cast<std::size_t>(b) * kBlock; i < end; ++i)
      grouped[cursor[static_cast<std::size_t>(group_of[i])]++] = static_cast<std::uint32_t>(i);
  }
  // Then each group in its subtree order, read through `grouped` (no copy of the positions).
  std::vector<std::uint32_t> out(n);
  order_groups(positions, group_offsets, max_leaf, [&grouped](std::uint32_t k) { return grouped[k]; }, out);
  return out;
}

}  // namespace orbis
