// The ORB tree built on the device, node for node and bit for bit the tree OrbTree::build
// makes on the host (tree/orb_tree.hpp): the same shape (a function of N and max_leaf), the
// same splits (split_axis of the tight box, median under the total order on positions),
// the same order inside each leaf, the same lo, hi, centre and radius.
//
// Method: the particles are sorted once per axis a by (x_a, x_a+1, x_a+2) (the three axes at
// once, on three streams); a node is then one segment in each of the three lists, its box is
// read off the segment ends, and its split is a rank (n/2 of its split axis' segment). Each
// level flags the left half and stably partitions all three lists within their segments
// (one scan, which scatters as it writes), so the lists stay sorted inside every node; a
// leaf's order is its own split axis' segment.
// Every level of the tree is a handful of launches over all particles; the level shapes
// are known on the host in advance, so nothing waits for the device between levels.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "core/vec3.hpp"
#include "fmm/walk_pair.hpp"
#include "gpu/cub_counts.cuh"
#include "gpu/device_buffer.cuh"
#include "gpu/device_tree.cuh"
#include "gpu/p2p_cuda_kernel.cuh"
#include "tree/orb_tree.hpp"

namespace orbis::gpu {

class DeviceOrbTree {
 public:
  DeviceOrbTree() = default;
  DeviceOrbTree(const DeviceOrbTree&) = delete;
  DeviceOrbTree& operator=(const DeviceOrbTree&) = delete;
  ~DeviceOrbTree();

  // Builds on `stream` from n positions on the device (x, y, z: double, caller order,
  // Mpc/h). Synchronises the stream once, after the per-axis sorts, to learn whether any
  // axis has equal coordinates (only then are the lexicographic tie-break sorts run).
  // Buffers are reused across builds; a new (n, max_leaf) also uploads the shape.
  // top_levels: the walk's top depth d, as OrbTree::build's (nodes above it split along
  // split_axis' stable rule; 0: the longest side everywhere).
  void build(const double* x, const double* y, const double* z, std::size_t n, int max_leaf,
             double particle_mass, cudaStream_t stream, int top_levels = 0);

  // Keeps the last build's membership and order and recomputes the geometry from new
  // positions of the same particles (orb_tree_geometry_cuda.cu): tree-order positions, boxes,
  // centres of mass, radii, leaf records; no sort, no host wait. Siblings may then
  // overlap, which the walk allows (its tests use each node's own box and radius); with
  // unchanged positions the result is build()'s bit for bit.
  void refit(const double* x, const double* y, const double* z, cudaStream_t stream);

  // A forest instead of a build (OrbTree::assemble_forest on the device, a rank's tree over
  // ranks): the n positions (device, caller order) are groups [group_offsets[g],
  // group_offsets[g+1]), each already in its subtree order, so the tree order is the
  // identity; the shape is OrbTree::forest_shape's (made on the host and uploaded when the
  // groups or top_depth change) and the geometry refit()'s arithmetic, which is
  // assemble_forest's: the result equals the host forest bit for bit. No sort, no host wait
  // (but the shape's upload). refit() then moves it as after build(); a build() after it
  // makes a tree of its own shape again.
  void assemble_forest(const double* x, const double* y, const double* z, std::size_t n,
                       const std::vector<std::uint32_t>& group_offsets, int top_depth, int max_leaf,
                       double particle_mass, cudaStream_t stream);
  // Whether the last tree is a forest, and its groups.
  bool is_forest() const { return forest_; }
  const std::vector<std::uint32_t>& forest_offsets() const { return forest_offsets_; }

  // Test hook: at most this many items per CUB call (gpu/cub_counts.cuh), so that a small
  // tree takes the split paths of a tree of more than 2^31 / 3 particles.
  void set_max_cub_items(std::size_t items) { max_cub_items_ = items; }

  std::size_t size() const { return n_; }
  std::size_t n_nodes() const { return shape_.size(); }
  std::size_t n_leaves() const { return n_leaves_; }

  // Device arrays, valid until the next build. The tree-order positions are the tree's own
  // after build(); a forest's tree order is the identity, so its are the caller's positions
  // given to assemble_forest() or the last refit() (no copy: 24 bytes a particle and a
  // forest's ghosts less), valid while those are.
  const std::uint32_t* order() const { return order_.data(); }   // tree position -> caller index
  const double* tree_x() const { return pos_[0]; }
  const double* tree_y() const { return pos_[1]; }
  const double* tree_z() const { return pos_[2]; }
  const DeviceNodeGeometry* geometry() const { return geom_.data(); }
  const DeviceLeaf* leaves() const { return leaves_.data(); }   // centre: box centre

  // Fills out[n_nodes] (device) with the walk's node records, on `stream`; nodes above
  // depth top_levels that are not leaves are flagged top (WalkSettings::top_levels).
  void walk_nodes(WalkNode* out, int top_levels, cudaStream_t stream) const;

  // Host shape (first, count, left, right, parent, leaf, depth), as OrbTree::shape.
  const std::vector<ShapeNode>& shape() const { return shape_; }
  // The device shape, nodes by depth (host offsets) and the node of each leaf.
  const ShapeNode* shape_nodes() const { return nodes_.data(); }
  const std::int32_t* level_nodes() const { return level_nodes_.data(); }
  const std::vector<std::size_t>& level_offsets() const { return level_offset_; }
  const std::int32_t* leaf_nodes() const { return leaf_node_.data(); }
  // The deepest node's depth (a forest's depths jump from its top to top_depth, so its
  // levels between may be empty; no root-to-leaf path is longer than this).
  int max_depth() const { return static_cast<int>(level_offset_.size()) - 2; }

  // Copies the tree into `out` (waits for the stream): order and geometry come down through
  // pinned buffers into out's own arrays (OrbTree::begin_adopt), the tree-order positions
  // are gathered from the caller's host `positions`.
  void download(OrbTree& out, const std::vector<Vec3d>& positions, cudaStream_t stream) const;

  // Device time of the last build by phase (waits for it): the per-axis sorts (with the
  // tie check), the level-by-level splits, the centres, radii and leaf records; of the last
  // refit: the leaves (positions gathered, boxes, centres, radii, records), the internal
  // nodes' boxes and centres level by level, their radii.
  struct Times {
    double total_ms = 0, sort_ms = 0, split_ms = 0, finish_ms = 0;
  };
  Times times() const;

 private:
  void set_shape(std::size_t n, int max_leaf);
  // The device tables (nodes, nodes by depth, node of each leaf, each node's left particles
  // before it in its depth) of shape_, uploaded; the left particles per depth on the host.
  void upload_shape();
  // The arrays a tree keeps between steps (order, tree-order positions unless a forest's,
  // geometry, leaf records, radii) and the events; ensure_buffers() adds the build's own.
  void ensure_tree_arrays(std::size_t n, bool own_positions);
  // The geometry from the tree order: a build's (positions in tree order and boxes made), or
  // a refit's (x, y, z: its caller's positions, gathered through the order here but for a
  // forest's, which are its tree-order positions).
  void finish_geometry(cudaStream_t stream, const double* x = nullptr, const double* y = nullptr,
                       const double* z = nullptr);
  void ensure_buffers(std::size_t n);
  // Gives the build's own arrays (sorted lists, the sorts' keys and values, node of each
  // particle, flags, temporaries: ~53 bytes a particle) back to the device pool,
  // queued on the build's stream: they are not live beside the PM or the short-range step.
  void release_build_arrays();
  // One axis' sort: its keys and values (double-buffered) and the sort's temporaries. The
  // three axes sort at once, each on its own stream (a sort of 10^6 keys is a chain of small
  // latency-bound kernels that leaves most of the GPU idle).
  struct AxisSort {
    DeviceArray<std::uint64_t> keys[2];
    DeviceArray<std::uint32_t> vals[2];
    DeviceArray<unsigned char> temp;
  };
  // Stable sort of idx (null: 0..n-1) by coordinate c into out with buffers `with`; flags
  // *tie if two keys are equal (when tie is not null).
  void sort_indices(const double* c, const std::uint32_t* idx, std::uint32_t* out, int* tie, AxisSort& with,
                    cudaStream_t stream);

  std::size_t n_ = 0, n_leaves_ = 0;
  std::size_t max_cub_items_ = kCubMaxItems;
  int max_leaf_ = 0;
  double particle_mass_ = 1.0;
  bool forest_ = false;   // shape_ is forest_shape(n_, forest_offsets_, forest_top_, max_leaf_)
  int forest_top_ = 0;
  std::vector<std::uint32_t> forest_offsets_;
  std::vector<ShapeNode> shape_;
  std::vector<std::size_t> level_offset_;   // nodes of depth d: level_nodes_[offset[d], offset[d+1])
  // The build's scan terms (ScatterSplit in orb_tree_cuda.cu): per depth the left particles
  // of one list (count / 2 summed over its internal nodes), per node those of the internal
  // nodes of its depth that start before it.
  std::vector<std::uint32_t> level_left_;
  // The depth from which each node's subtree is split by one thread block (split_subtrees in
  // orb_tree_cuda.cu): the first depth whose nodes hold every particle and at most the
  // block's capacity each; -1 when there is none (leaves larger than that capacity).
  int subtree_depth_ = -1;

  DeviceArray<ShapeNode> nodes_;
  DeviceArray<std::int32_t> level_nodes_, leaf_node_;
  DeviceArray<std::uint32_t> left_before_node_;
  DeviceArray<std::uint8_t> axis_, flag_;
  DeviceArray<std::uint32_t> lists_[2], order_;
  DeviceArray<std::uint64_t> r2_;
  AxisSort sort_[3];
  cudaStream_t axis_streams_[2] = {nullptr, nullptr};   // axes 1 and 2 (axis 0: the build's stream)
  cudaEvent_t fork_ = nullptr, joins_[2] = {nullptr, nullptr};
  DeviceArray<unsigned> arrivals_;   // finish_geometry: children done per node
  // Each leaf's ancestors (max_depth() entries a leaf, root first, -1 after the last), made
  // by the first finish_geometry of a shape.
  DeviceArray<std::int32_t> ancestors_;
  bool ancestors_ready_ = false;
  DeviceArray<std::int32_t> node_of_;
  DeviceArray<double> tx_, ty_, tz_;   // a build's tree-order positions
  const double* pos_[3] = {nullptr, nullptr, nullptr};   // the tree-order positions (tree_x())
  DeviceArray<DeviceNodeGeometry> geom_;
  DeviceArray<DeviceLeaf> leaves_;
  DeviceArray<unsigned char> temp_;
  DeviceArray<int> dev_ties_;
  PinnedArray<int> ties_;
  // download(): pinned landing buffers.
  mutable PinnedArray<std::uint32_t> host_order_;
  mutable PinnedArray<DeviceNodeGeometry> host_geom_;
  cudaEvent_t events_[4] = {nullptr, nullptr, nullptr, nullptr};
};

}  // namespace orbis::gpu
