// Which targets share their leaf only with other targets: the device P2P packs the active
// particles of a leaf (gpu/p2p_cuda_kernel.cuh), so a target's sum is bitwise the full
// computation's exactly when every particle of its leaf is a target. For the GPU tests of
// active subsets.
#pragma once
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpu/orb_tree_cuda.cuh"

namespace orbis::test {

// target[i] != 0 marks the caller's particle i; the result marks, by caller index, the
// targets whose leaf of `tree` holds targets only.
inline std::vector<std::uint8_t> whole_leaf_targets(const gpu::DeviceOrbTree& tree,
                                                    const std::vector<std::uint8_t>& target) {
  const std::size_t n = tree.size(), n_leaves = tree.n_leaves();
  REQUIRE(target.size() == n);
  std::vector<std::uint32_t> order(n);
  std::vector<gpu::DeviceLeaf> leaves(n_leaves);
  REQUIRE(cudaMemcpy(order.data(), tree.order(), n * sizeof(std::uint32_t), cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(leaves.data(), tree.leaves(), n_leaves * sizeof(gpu::DeviceLeaf), cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  std::vector<std::uint8_t> whole(n, 0);
  for (const gpu::DeviceLeaf& leaf : leaves) {
    bool all = true;
    for (std::uint32_t q = leaf.first; q < leaf.first + leaf.count; ++q) all = all && target[order[q]] != 0;
    for (std::uint32_t q = leaf.first; q < leaf.first + leaf.count; ++q) whole[order[q]] = all;
  }
  return whole;
}

}  // namespace orbis::test
