// What the device keeps of the ORB tree per node, besides the walk's records (WalkNode,
// fmm/walk_pair.hpp): a plain struct, copied between host and device as it is.
// The node shape (first, count, children, leaf index) depends only on N and max_leaf
// (tree/orb_tree.hpp), so only the geometry is computed per step.
#pragma once
#include <cstddef>
#include <cstdint>

namespace orbis::gpu {

// A node's geometry, as TreeNode's lo, hi, centre (centre of mass) and radius, Mpc/h.
struct DeviceNodeGeometry {
  double lo[3], hi[3], centre[3], radius;
};
// Vacuum's M2L reads centre and radius as two 16-byte words (fmm_cuda_vacuum.cu).
static_assert(sizeof(DeviceNodeGeometry) % 16 == 0 && offsetof(DeviceNodeGeometry, centre) % 16 == 0 &&
                  offsetof(DeviceNodeGeometry, radius) == offsetof(DeviceNodeGeometry, centre) + 24,
              "centre and radius in two aligned 16-byte words");

}  // namespace orbis::gpu
