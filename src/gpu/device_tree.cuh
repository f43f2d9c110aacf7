// What the device keeps of the ORB tree, shared by the tree build (orb_tree_cuda) and the
// dual-tree walk (walk_cuda): plain structs, copied between host and device as they are.
// The node shape (first, count, children, leaf index) depends only on N and max_leaf
// (tree/orb_tree.hpp), so only the geometry is computed per step.
#pragma once
#include <cstdint>

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

}  // namespace orbis::gpu
