// DeviceOrbTree::refit (orb_tree_cuda.cuh): the last build's tree over moved particles.
// Membership and order stay; positions are gathered into tree order, every box is the
// tight box of its members (a leaf's from its particles, an internal node's the union of
// its children's), and centres, radii and leaf records follow as in build().
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

__global__ void gather_tree_order(const std::uint32_t* order, std::size_t n, const double* x, const double* y,
                                  const double* z, double* tx, double* ty, double* tz) {
  const std::size_t p = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (p >= n) return;
  const std::uint32_t j = order[p];
  tx[p] = x[j];
  ty[p] = y[j];
  tz[p] = z[j];
}

__global__ void identity_order(std::size_t n, std::uint32_t* order) {
  const std::size_t p = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (p < n) order[p] = static_cast<std::uint32_t>(p);
}

__global__ void leaf_boxes(const std::int32_t* leaf_node, std::size_t n_leaves, const DeviceShapeNode* nodes,
                           const double* tx, const double* ty, const double* tz, DeviceNodeGeometry* geom) {
  const std::size_t l = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (l >= n_leaves) return;
  const std::int32_t node = leaf_node[l];
  const DeviceShapeNode nd = nodes[node];
  double lo[3] = {tx[nd.first], ty[nd.first], tz[nd.first]};
  double hi[3] = {lo[0], lo[1], lo[2]};
  for (std::uint32_t p = nd.first + 1; p < nd.first + nd.count; ++p) {
    const double v[3] = {tx[p], ty[p], tz[p]};
    for (int d = 0; d < 3; ++d) {
      lo[d] = fmin(lo[d], v[d]);
      hi[d] = fmax(hi[d], v[d]);
    }
  }
  DeviceNodeGeometry& g = geom[node];
  for (int d = 0; d < 3; ++d) {
    g.lo[d] = lo[d];
    g.hi[d] = hi[d];
  }
}

__global__ void internal_boxes(const std::int32_t* level, std::size_t n_level, const DeviceShapeNode* nodes,
                               DeviceNodeGeometry* geom) {
  const std::size_t t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (t >= n_level) return;
  const std::int32_t node = level[t];
  const DeviceShapeNode nd = nodes[node];
  if (nd.left < 0) return;
  const DeviceNodeGeometry& a = geom[nd.left];
  const DeviceNodeGeometry& b = geom[nd.right];
  DeviceNodeGeometry& g = geom[node];
  for (int d = 0; d < 3; ++d) {
    g.lo[d] = fmin(a.lo[d], b.lo[d]);
    g.hi[d] = fmax(a.hi[d], b.hi[d]);
  }
}

}  // namespace

void DeviceOrbTree::refit(const double* x, const double* y, const double* z, cudaStream_t stream) {
  if (shape_.empty()) fail("device ORB tree: refit() before build()");
  const std::size_t n = n_;
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[0], stream));
  gather_tree_order<<<blocks_for(n), kThreads, 0, stream>>>(order_.data(), n, x, y, z, tx_.data(), ty_.data(),
                                                            tz_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[1], stream));
  leaf_boxes<<<blocks_for(n_leaves_), kThreads, 0, stream>>>(leaf_node_.data(), n_leaves_, nodes_.data(), tx_.data(),
                                                             ty_.data(), tz_.data(), geom_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  for (int d = max_depth() - 1; d >= 0; --d) {
    const std::size_t begin = level_offset_[static_cast<std::size_t>(d)];
    const std::size_t count = level_offset_[static_cast<std::size_t>(d) + 1] - begin;
    if (count == 0) continue;   // a forest's levels between its top and its subtrees
    internal_boxes<<<blocks_for(count), kThreads, 0, stream>>>(level_nodes_.data() + begin, count, nodes_.data(),
                                                               geom_.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[2], stream));
  finish_geometry(stream);
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
