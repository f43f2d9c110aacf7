// OrbTree::subtree_order_by_group (tree/orb_tree.hpp) on the device (issue #29): a rank's
// particles grouped by their top-tree group and each group put in the order OrbTree::build
// of the group alone gives, the same permutation as the host's, for all groups at once.
//
// Method: DeviceOrbTree's (gpu/orb_tree_cuda.cuh) over a forest of one subtree per group.
// Each axis' list is sorted group-major (by the coordinate keys, lexicographic where the axis
// has ties, then stably by group), so every group is one segment of each list, and so is
// every node of its subtree: the shape's nodes split their range at count / 2, so a particle
// at list position p finds its node from its group's range alone, and no node table is
// needed. Each level, every particle of a node of more than max_leaf reads the node's box
// off the segment ends, takes the longest side (split_axis below the top: the host's
// order_node) and flags itself left or right by its rank in that axis' segment; all three
// lists are then stably partitioned inside their nodes. A leaf's order is its longest axis'
// segment. The levels are those of the largest group's subtree.
//
// The host order is a function of the positions but where two particles of a group have
// exactly equal positions (its std::nth_element and std::sort order equal keys as they
// happen to); here such particles keep their order in the input.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "gpu/cub_counts.cuh"

namespace orbis::gpu {

// x, y, z: n positions on the device (Mpc/h); group_of: n group indices on the device, each
// in [0, n_groups). Writes order[k] (device, n): the input index of the particle at place k,
// as OrbTree::subtree_order_by_group(the positions, group_of, n_groups, max_leaf) returns
// it, and group_offsets (host, n_groups + 1): where each group begins. Queued on `stream`,
// which is waited for once (the groups' sizes, needed on the host for the levels); the
// working arrays (~70 bytes a particle) come from the device pool and go back to it, queued
// on `stream`. Throws as the host does for max_leaf < 1 or a group index out of range.
// max_cub_items: a test hook (gpu/cub_counts.cuh), the most items per CUB call.
void subtree_order_by_group_cuda(const double* x, const double* y, const double* z, const std::int32_t* group_of,
                                 std::size_t n, std::int32_t n_groups, int max_leaf, std::uint32_t* order,
                                 std::vector<std::uint32_t>& group_offsets, cudaStream_t stream,
                                 std::size_t max_cub_items = kCubMaxItems);

}  // namespace orbis::gpu
