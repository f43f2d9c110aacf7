#include "tree/orb_tree.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace orbis {
namespace {

// Subtrees with more particles than this are built as separate OpenMP tasks.
constexpr std::uint32_t kTaskMinCount = 16384;

// Total order on positions, starting with `axis`: ties on one coordinate are broken by the
// others, so the median split never depends on the input order of the particles.
struct PositionLess {
  int axis;
  template <typename Item> bool operator()(const Item& a, const Item& b) const {
    for (int k = 0; k < 3; ++k) {
      const int d = (axis + k) % 3;
      if (a.x[d] != b.x[d]) return a.x[d] < b.x[d];
    }
    return false;
  }
};

}  // namespace

std::int64_t OrbTree::subtree_nodes(std::int64_t n) const {
  if (n <= max_leaf_) return 1;
  return 1 + subtree_nodes(n / 2) + subtree_nodes(n - n / 2);
}

std::int64_t OrbTree::subtree_leaves(std::int64_t n) const {
  if (n <= max_leaf_) return 1;
  return subtree_leaves(n / 2) + subtree_leaves(n - n / 2);
}

void OrbTree::build(const std::vector<Vec3d>& positions, int max_leaf, double particle_mass) {
  if (max_leaf < 1) fail("ORB tree: max_leaf = {} must be >= 1", max_leaf);
  if (positions.empty()) fail("ORB tree: no particles");
  if (positions.size() >= (std::size_t{1} << 31)) fail("ORB tree: {} particles exceed 2^31", positions.size());
  max_leaf_ = max_leaf;
  particle_mass_ = particle_mass;
  const std::size_t n = positions.size();

  items_.resize(n);
  for (std::size_t i = 0; i < n; ++i) items_[i] = {positions[i], static_cast<std::uint32_t>(i)};
  const std::int64_t n_nodes = subtree_nodes(static_cast<std::int64_t>(n));
  const std::int64_t n_leaves = subtree_leaves(static_cast<std::int64_t>(n));
  nodes_.assign(static_cast<std::size_t>(n_nodes), TreeNode{});
  leaves_.assign(static_cast<std::size_t>(n_leaves), Leaf{});
  leaf_node_.assign(static_cast<std::size_t>(n_leaves), -1);

#pragma omp parallel
#pragma omp single
  build_node(0, -1, 0, static_cast<std::uint32_t>(n), 0, 0);

  order_.resize(n);
  pos_.resize(n);
  for (std::size_t t = 0; t < n; ++t) {
    order_[t] = items_[t].index;
    pos_[t] = items_[t].x;
  }
  int max_depth = 0;
  for (const auto& node : nodes_) max_depth = std::max(max_depth, node.depth);
  levels_.assign(static_cast<std::size_t>(max_depth) + 1, {});
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    levels_[static_cast<std::size_t>(nodes_[i].depth)].push_back(static_cast<std::int32_t>(i));
}

void OrbTree::build_node(std::int32_t index, std::int32_t parent, std::uint32_t first,
                         std::uint32_t count, std::int32_t depth, std::int32_t leaf_base) {
  TreeNode& node = nodes_[static_cast<std::size_t>(index)];
  node.first = first;
  node.count = count;
  node.parent = parent;
  node.depth = depth;
  Item* begin = items_.data() + first;
  Item* end = begin + count;

  Vec3d lo = begin->x, hi = begin->x;
  for (const Item* it = begin; it != end; ++it)
    for (int d = 0; d < 3; ++d) {
      lo[d] = std::min(lo[d], it->x[d]);
      hi[d] = std::max(hi[d], it->x[d]);
    }
  node.lo = lo;
  node.hi = hi;
  int axis = 0;
  for (int d = 1; d < 3; ++d)
    if (hi[d] - lo[d] > hi[axis] - lo[axis]) axis = d;

  if (count <= static_cast<std::uint32_t>(max_leaf_)) {
    // Sorting the leaf makes the order inside it (hence P2P summation order) input-independent.
    std::sort(begin, end, PositionLess{axis});
    node.leaf = leaf_base;
    leaves_[static_cast<std::size_t>(leaf_base)] = Leaf{first, count, node.box_centre()};
    leaf_node_[static_cast<std::size_t>(leaf_base)] = index;
  } else {
    const std::uint32_t n_left = count / 2;
    std::nth_element(begin, begin + n_left, end, PositionLess{axis});
    node.left = index + 1;
    node.right = index + 1 + static_cast<std::int32_t>(subtree_nodes(n_left));
    const std::int32_t right_leaf_base = leaf_base + static_cast<std::int32_t>(subtree_leaves(n_left));
    const std::int32_t left = node.left, right = node.right;
    if (count >= kTaskMinCount) {
#pragma omp task firstprivate(left, index, first, n_left, depth, leaf_base)
      build_node(left, index, first, n_left, depth + 1, leaf_base);
#pragma omp task firstprivate(right, index, first, n_left, count, depth, right_leaf_base)
      build_node(right, index, first + n_left, count - n_left, depth + 1, right_leaf_base);
#pragma omp taskwait
    } else {
      build_node(left, index, first, n_left, depth + 1, leaf_base);
      build_node(right, index, first + n_left, count - n_left, depth + 1, right_leaf_base);
    }
  }

  // Centre of mass (equal masses: the mean position, summed in tree order) and the exact
  // radius about it. Internal nodes loop over their members again: O(N log N) in all, and
  // a tight radius lets the opening criterion accept more pairs than a bound would.
  TreeNode& done = nodes_[static_cast<std::size_t>(index)];
  Vec3d sum{0, 0, 0};
  if (done.is_leaf()) {
    for (const Item* it = begin; it != end; ++it) sum += it->x;
    done.centre = sum * (1.0 / count);
  } else {
    const TreeNode& a = nodes_[static_cast<std::size_t>(done.left)];
    const TreeNode& b = nodes_[static_cast<std::size_t>(done.right)];
    done.centre = (static_cast<double>(a.count) * a.centre + static_cast<double>(b.count) * b.centre) *
                  (1.0 / count);
  }
  double r2 = 0;
  for (const Item* it = begin; it != end; ++it) r2 = std::max(r2, norm2(it->x - done.centre));
  done.radius = std::sqrt(r2);
  done.mass = count * particle_mass_;
}

}  // namespace orbis
