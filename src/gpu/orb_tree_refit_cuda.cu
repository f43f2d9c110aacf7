// DeviceOrbTree::refit (orb_tree_cuda.cuh): the last build's tree over moved particles.
// Membership and order stay; positions are gathered into tree order, every box is the
// tight box of its members (a leaf's from its particles, an internal node's the union of
// its children's), and centres, radii and leaf records follow as in build()
// (DeviceOrbTree::finish_geometry, orb_tree_cuda.cu, does all of it).
//
// DeviceOrbTree::assemble_forest: a forest's shape (OrbTree::forest_shape) with the
// identity order, then the same refit: OrbTree::assemble_forest's arithmetic, which is
// OrbTree::refit's.
#include <algorithm>

#include "core/error.hpp"
#include "gpu/orb_tree_cuda.cuh"

namespace orbis::gpu {
namespace {

constexpr int kThreads = 256;
unsigned blocks_for(std::size_t n) { return static_cast<unsigned>(std::max<std::size_t>(1, (n + kThreads - 1) / kThreads)); }

__global__ void identity_order(std::size_t n, std::uint32_t* order) {
  const std::size_t p = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (p < n) order[p] = static_cast<std::uint32_t>(p);
}

}  // namespace

void DeviceOrbTree::refit(const double* x, const double* y, const double* z, cudaStream_t stream) {
  if (shape_.empty()) fail("device ORB tree: refit() before build()");
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[0], stream));
  finish_geometry(stream, x, y, z);   // records events 1 and 2 between its parts
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[3], stream));
}

void DeviceOrbTree::assemble_forest(const double* x, const double* y, const double* z, std::size_t n,
                                    const std::vector<std::uint32_t>& group_offsets, int top_depth, int max_leaf,
                                    double particle_mass, cudaStream_t stream) {
  const bool same_shape = forest_ && n == n_ && max_leaf == max_leaf_ && top_depth == forest_top_ &&
                          group_offsets == forest_offsets_;
  if (!same_shape) {
    shape_ = OrbTree::forest_shape(n, group_offsets, top_depth, max_leaf);   // checks the input
    n_ = n;
    max_leaf_ = max_leaf;
    forest_ = true;
    forest_top_ = top_depth;
    forest_offsets_ = group_offsets;
    upload_shape();
  }
  particle_mass_ = particle_mass;
  AllocationStream on_stream(stream);
  ensure_tree_arrays(n);
  identity_order<<<blocks_for(n), kThreads, 0, stream>>>(n, order_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  refit(x, y, z, stream);
}

}  // namespace orbis::gpu
