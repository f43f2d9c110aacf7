// What the device keeps of the ORB tree, shared by the tree build (orb_tree_cuda) and the
// dual-tree walk (walk_cuda): plain structs, copied between host and device as they are.
// The node shape (first, count, children, leaf index) depends only on N and max_leaf
// (tree/orb_tree.hpp), so only the geometry is computed per step.
#pragma once
#include <cstdint>

#include "core/hostdevice.hpp"

namespace orbis::gpu {

// A node's geometry, as TreeNode's lo, hi, centre (centre of mass) and radius, Mpc/h.
struct DeviceNodeGeometry {
  double lo[3], hi[3], centre[3], radius;
};

// What the walk's pair test reads, as DualTreeWalk's WalkNode: box centre 0.5 (lo + hi),
// half width 0.5 (hi - lo), centre of mass, radius, children (-1 for a leaf), leaf index
// (-1 for an internal node).
struct DeviceWalkNode {
  double box_centre[3], half_width[3], centre[3], radius;
  std::int32_t left, right, leaf, pad;
};
static_assert(sizeof(DeviceWalkNode) == 96, "DeviceWalkNode is 96 bytes");

// The walk's record of a node, on the host (from a TreeNode, for tests) and on the device
// (from the device build): the same arithmetic as TreeNode::box_centre and half_width.
ORBIS_HD DeviceWalkNode make_walk_node(const DeviceNodeGeometry& g, std::int32_t left, std::int32_t right,
                                     std::int32_t leaf) {
  DeviceWalkNode w;
  for (int d = 0; d < 3; ++d) {
    w.box_centre[d] = 0.5 * (g.lo[d] + g.hi[d]);
    w.half_width[d] = 0.5 * (g.hi[d] - g.lo[d]);
    w.centre[d] = g.centre[d];
  }
  w.radius = g.radius;
  w.left = left;
  w.right = right;
  w.leaf = leaf;
  w.pad = 0;
  return w;
}

}  // namespace orbis::gpu
