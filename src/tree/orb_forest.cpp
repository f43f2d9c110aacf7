// OrbTree::assemble_forest and subtree_order (tree/orb_tree.hpp): a rank's tree made of
// whole subtrees of the one global ORB tree, with no partitioning, and the order that
// makes a group of particles such a subtree.
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
#include <map>

#include "core/error.hpp"
#include "tree/orb_tree.hpp"

namespace orbis {

void OrbTree::check_forest_input(const std::vector<Vec3d>& positions, const std::vector<std::uint32_t>& offsets,
                                 int top_depth, int max_leaf) const {
  if (max_leaf < 1) fail("ORB forest: max_leaf = {} must be >= 1", max_leaf);
  if (top_depth < 0 || top_depth > 30) fail("ORB forest: top_depth = {} outside [0, 30]", top_depth);
  if (positions.empty()) fail("ORB forest: no particles");
  if (positions.size() > static_cast<std::size_t>(kMaxParticles))
    fail("ORB forest: {} particles, more than its 32-bit indices hold ({})", positions.size(), kMaxParticles);
  if (offsets.empty() || offsets.front() != 0 || offsets.back() != positions.size())
    fail("ORB forest: group offsets must run from 0 to the {} particles (got {} offsets, {} .. {})",
         positions.size(), offsets.size(), offsets.empty() ? 0 : offsets.front(), offsets.empty() ? 0 : offsets.back());
  for (std::size_t g = 0; g + 1 < offsets.size(); ++g)
    if (offsets[g + 1] < offsets[g]) fail("ORB forest: group offsets decrease at group {}", g);
}

void OrbTree::assemble_forest(const std::vector<Vec3d>& positions, const std::vector<std::uint32_t>& offsets,
                              int top_depth, int max_leaf, double particle_mass) {
  check_forest_input(positions, offsets, top_depth, max_leaf);
  struct Group {
    std::uint32_t first, count;
    std::int32_t root = 0, parent = -1, leaf_base = 0;
  };
  std::vector<Group> groups;
  for (std::size_t g = 0; g + 1 < offsets.size(); ++g)
    if (offsets[g + 1] > offsets[g]) groups.push_back(Group{offsets[g], offsets[g + 1] - offsets[g]});
  // The artificial top has depth ceil(log2 G): its nodes must stay above top_depth.
  if (groups.size() > (std::size_t{1} << top_depth))
    fail("ORB forest: {} non-empty groups, but at most 2^top_depth = {} fit above depth {}", groups.size(),
         std::size_t{1} << top_depth, top_depth);
  max_leaf_ = max_leaf;
  particle_mass_ = particle_mass;

  // Preorder layout: an artificial node, then its left part, then its right part; a group is
  // its whole subtree (shape(count) nodes). Serial: at most 2^top_depth groups.
  std::int64_t n_nodes = 0, n_leaves = 0;
  std::vector<std::int32_t> top_nodes;   // artificial nodes, preorder
  struct Part {
    std::size_t a, b;
    std::int32_t parent, depth;
  };
  std::vector<TreeNode> top_records;
  std::vector<Part> stack{{0, groups.size(), -1, 0}};
  while (!stack.empty()) {
    const Part part = stack.back();
    stack.pop_back();
    const auto index = static_cast<std::int32_t>(n_nodes);
    if (part.b - part.a == 1) {
      Group& g = groups[part.a];
      g.root = index;
      g.parent = part.parent;
      g.leaf_base = static_cast<std::int32_t>(n_leaves);
      n_nodes += subtree_nodes(g.count, max_leaf);
      n_leaves += subtree_leaves(g.count, max_leaf);
    } else {
      TreeNode node;
      node.parent = part.parent;
      node.depth = part.depth;
      top_nodes.push_back(index);
      top_records.push_back(node);
      ++n_nodes;
      const std::size_t mid = part.a + (part.b - part.a) / 2;
      stack.push_back(Part{mid, part.b, index, part.depth + 1});   // popped after the left part
      stack.push_back(Part{part.a, mid, index, part.depth + 1});
    }
  }
  nodes_.assign(static_cast<std::size_t>(n_nodes), TreeNode{});
  leaves_.assign(static_cast<std::size_t>(n_leaves), Leaf{});
  leaf_node_.assign(static_cast<std::size_t>(n_leaves), -1);
  for (std::size_t q = 0; q < top_nodes.size(); ++q) nodes_[static_cast<std::size_t>(top_nodes[q])] = top_records[q];
  // Children: each node's parent link names it; left is the first child met in preorder.
  auto link = [&](std::int32_t parent, std::int32_t child) {
    if (parent < 0) return;
    TreeNode& p = nodes_[static_cast<std::size_t>(parent)];
    (p.left < 0 ? p.left : p.right) = child;
  };
  {
    std::size_t q = 0, g = 0;   // merge the artificial nodes and group roots in index order
    while (q < top_nodes.size() || g < groups.size()) {
      if (g == groups.size() || (q < top_nodes.size() && top_nodes[q] < groups[g].root)) {
        link(nodes_[static_cast<std::size_t>(top_nodes[q])].parent, top_nodes[q]);
        ++q;
      } else {
        link(groups[g].parent, groups[g].root);
        ++g;
      }
    }
  }

  // The groups' subtrees from their shapes (one per distinct count), shifted into place.
  std::map<std::uint32_t, std::vector<TreeNode>> shapes;
  for (const Group& g : groups)
    if (!shapes.count(g.count)) shapes.emplace(g.count, shape(g.count, max_leaf));
  const auto n_groups = static_cast<std::int64_t>(groups.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t q = 0; q < n_groups; ++q) {
    const Group& g = groups[static_cast<std::size_t>(q)];
    const std::vector<TreeNode>& sh = shapes.at(g.count);
    for (std::size_t k = 0; k < sh.size(); ++k) {
      TreeNode node = sh[k];
      const auto index = g.root + static_cast<std::int32_t>(k);
      node.first += g.first;
      node.depth += top_depth;
      node.parent = k == 0 ? g.parent : node.parent + g.root;
      if (node.left >= 0) {
        node.left += g.root;
        node.right += g.root;
      } else {
        node.leaf += g.leaf_base;
        leaves_[static_cast<std::size_t>(node.leaf)] = Leaf{node.first, node.count, Vec3d{}};
        leaf_node_[static_cast<std::size_t>(node.leaf)] = index;
      }
      nodes_[static_cast<std::size_t>(index)] = node;
    }
  }
  for (auto it = top_nodes.rbegin(); it != top_nodes.rend(); ++it) {   // children before parents
    TreeNode& node = nodes_[static_cast<std::size_t>(*it)];
    const TreeNode& a = nodes_[static_cast<std::size_t>(node.left)];
    const TreeNode& b = nodes_[static_cast<std::size_t>(node.right)];
    node.first = std::min(a.first, b.first);
    node.count = a.count + b.count;
  }
  for (TreeNode& node : nodes_) node.mass = node.count * particle_mass;

  const auto n = static_cast<std::int64_t>(positions.size());
  pos_.resize(positions.size());
  order_.resize(positions.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t t = 0; t < n; ++t) {
    pos_[static_cast<std::size_t>(t)] = positions[static_cast<std::size_t>(t)];
    order_[static_cast<std::size_t>(t)] = static_cast<std::uint32_t>(t);
  }
  // The geometry as refit() computes it (build()'s bits on the same order).
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t q = 0; q < n_groups; ++q) refit_subtree(groups[static_cast<std::size_t>(q)].root);
  for (auto it = top_nodes.rbegin(); it != top_nodes.rend(); ++it) refit_node(*it);
  derive_levels();
}

std::vector<std::uint32_t> OrbTree::subtree_order(const std::vector<Vec3d>& positions,
                                                  const std::vector<std::uint32_t>& offsets, int max_leaf) {
  if (max_leaf < 1) fail("ORB subtree order: max_leaf = {} must be >= 1", max_leaf);
  if (offsets.empty() || offsets.front() != 0 || offsets.back() != positions.size())
    fail("ORB subtree order: group offsets must run from 0 to the {} particles", positions.size());
  for (std::size_t g = 0; g + 1 < offsets.size(); ++g)
    if (offsets[g + 1] < offsets[g]) fail("ORB subtree order: group offsets decrease at group {}", g);
  std::vector<std::uint32_t> out(positions.size());
  const auto n_groups = static_cast<std::int64_t>(offsets.size()) - 1;
  // One group per thread: a build's order depends on its set of positions alone (not on
  // the threads that make it), so this is the order of a serial build of each group.
#pragma omp parallel
  {
    OrbTree tree;
    std::vector<Vec3d> members;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t g = 0; g < n_groups; ++g) {
      const std::uint32_t first = offsets[static_cast<std::size_t>(g)], end = offsets[static_cast<std::size_t>(g) + 1];
      if (end == first) continue;
      members.assign(positions.begin() + first, positions.begin() + end);
      tree.build(members, max_leaf);
      for (std::uint32_t t = 0; t < end - first; ++t) out[first + t] = first + tree.order()[t];
    }
  }
  return out;
}

std::vector<std::uint32_t> OrbTree::subtree_order_by_group(const std::vector<Vec3d>& positions,
                                                           const std::vector<std::int32_t>& group_of,
                                                           std::int32_t n_groups, int max_leaf,
                                                           std::vector<std::uint32_t>& group_offsets) {
  if (group_of.size() != positions.size())
    fail("ORB subtree order: {} group indices for {} particles", group_of.size(), positions.size());
  if (n_groups < 0) fail("ORB subtree order: {} groups", n_groups);
  group_offsets.assign(static_cast<std::size_t>(n_groups) + 1, 0);
  for (std::size_t i = 0; i < group_of.size(); ++i) {
    if (group_of[i] < 0 || group_of[i] >= n_groups)
      fail("ORB subtree order: particle {} in group {}, outside [0, {})", i, group_of[i], n_groups);
    ++group_offsets[static_cast<std::size_t>(group_of[i]) + 1];
  }
  for (std::size_t g = 0; g < static_cast<std::size_t>(n_groups); ++g) group_offsets[g + 1] += group_offsets[g];
  // Grouped (stably), then each group in its subtree order.
  std::vector<std::uint32_t> grouped(positions.size());
  std::vector<std::uint32_t> cursor(group_offsets.begin(), group_offsets.end() - 1);
  for (std::size_t i = 0; i < group_of.size(); ++i)
    grouped[cursor[static_cast<std::size_t>(group_of[i])]++] = static_cast<std::uint32_t>(i);
  std::vector<Vec3d> grouped_pos(positions.size());
  for (std::size_t t = 0; t < grouped.size(); ++t) grouped_pos[t] = positions[grouped[t]];
  const std::vector<std::uint32_t> within = subtree_order(grouped_pos, group_offsets, max_leaf);
  std::vector<std::uint32_t> out(positions.size());
  for (std::size_t t = 0; t < out.size(); ++t) out[t] = grouped[within[t]];
  return out;
}

}  // namespace orbis
