#include "gpu/orb_tree_cuda.cuh"

#include <algorithm>
#include <cmath>

#include <cub/block/block_scan.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/tabulate_output_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "core/error.hpp"
#include "gpu/cub_counts.cuh"
#include "tree/split_axis.hpp"

// Compiled with --fmad=false (src/CMakeLists.txt): every double expression below is written
// as the host writes it (Vec3 operators, same operand order), so without contraction into
// FMAs the centres and radii round exactly as on the host.

namespace orbis::gpu {
namespace {

constexpr int kThreads = 256;
unsigned blocks_for(std::size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// Doubles as unsigned integers of the same order (IEEE: flip all bits of negatives, the sign
// of the rest); -0.0 becomes +0.0 first, as PositionLess sees them equal.
__device__ __forceinline__ std::uint64_t order_key(double v) {
  const auto b = static_cast<std::uint64_t>(__double_as_longlong(v + 0.0));
  return (b >> 63) ? ~b : (b | (std::uint64_t{1} << 63));
}

__global__ void make_keys(const double* c, const std::uint32_t* idx, std::uint32_t n, std::uint64_t* keys,
                          std::uint32_t* vals) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const std::uint32_t j = idx ? idx[i] : i;
  keys[i] = order_key(c[j]);
  vals[i] = j;
}

__global__ void find_ties(const std::uint64_t* keys, std::uint32_t n, int* tie) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x + 1;
  if (i < n && keys[i] == keys[i - 1]) *tie = 1;   // every writer writes 1: no race to lose
}

__device__ __forceinline__ double coord_of(const double* x, const double* y, const double* z, int d,
                                           std::uint32_t j) {
  return d == 0 ? x[j] : (d == 1 ? y[j] : z[j]);
}

// Box and split axis of the nodes of one depth: the box from the ends of the node's segment
// in each sorted list, the axis by split_axis, the host build's function (tree/split_axis.hpp).
__global__ void node_boxes(const std::int32_t* level, std::uint32_t n_level, const ShapeNode* nodes,
                           const std::uint32_t* lists, std::uint32_t n, const double* x, const double* y,
                           const double* z, int top_levels, DeviceNodeGeometry* geom, std::uint8_t* axis) {
  const std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n_level) return;
  const std::int32_t node = level[t];
  const ShapeNode nd = nodes[node];
  DeviceNodeGeometry& g = geom[node];
  Vec3d lo, hi;
  for (int d = 0; d < 3; ++d) {
    const std::uint32_t* list = lists + static_cast<std::size_t>(d) * n;
    lo[d] = coord_of(x, y, z, d, list[nd.first]);
    hi[d] = coord_of(x, y, z, d, list[nd.first + nd.count - 1]);
    g.lo[d] = lo[d];
    g.hi[d] = hi[d];
  }
  axis[node] = static_cast<std::uint8_t>(split_axis(lo, hi, nd.depth, top_levels));
}

// The child of `node` holding tree position p (node itself when it is a leaf), in a built
// tree's shape (OrbTree::shape: the left child holds count / 2).
__device__ __forceinline__ std::int32_t descend(const ShapeNode* nodes, std::int32_t node, std::uint32_t p) {
  const ShapeNode nd = nodes[node];
  if (nd.left < 0) return node;
  return p - nd.first < nd.count / 2 ? nd.left : nd.right;
}

// node_of[p] moves one level down (to the node of this depth holding p, or stays on an
// earlier leaf); the particles of internal nodes are flagged left (1) or right (0) by their
// rank in the split axis' segment. A particle whose node has just become a leaf gets flag 0,
// which it keeps (no later level writes it): the scan then counts the left particles of this
// depth's internal nodes only, which makes its value at each position known up to the
// particle's rank in its segment (ScatterSplit below).
__global__ void flag_level(std::uint32_t n, bool root, const ShapeNode* nodes, const std::uint8_t* axis,
                           std::int32_t* node_of, const std::uint32_t* lists, std::uint8_t* flag) {
  const std::uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= n) return;
  const std::int32_t above = root ? -1 : node_of[p];
  const std::int32_t node = root ? 0 : descend(nodes, above, p);
  node_of[p] = node;
  const ShapeNode nd = nodes[node];
  const bool leaf = nd.left < 0;
  if (leaf && node == above) return;   // an earlier leaf: its flag is 0 already
  const std::uint32_t j = lists[static_cast<std::size_t>(axis[node]) * n + p];
  flag[j] = !leaf && p - nd.first < nd.count / 2;
}

// The left flag at position i of the three lists (i < 3n: a 64-bit index).
struct FlagOf {
  const std::uint32_t* lists;
  const std::uint8_t* flag;
  __host__ __device__ std::uint32_t operator()(std::size_t i) const { return flag[lists[i]]; }
};
using FlagIter = thrust::transform_iterator<FlagOf, thrust::counting_iterator<std::size_t>>;

// The scan's output: given before = left particles in the three lists before position i
// (exclusive scan of FlagOf), moves the particle at i to its place in the other list buffer,
// which makes the stable partition of each list inside every internal node's segment (the
// left particles keep their order at the front, the right ones theirs behind); a leaf's
// particles stay where they are. No scan array and no second pass over the lists: the scan
// value of the segment's start, which a separate partition would read, follows from the
// shape alone. With i = b n + p (list b, position p in node `node` of segment [s, s + c)):
//   before = b L + left_before_node[node] + (left particles of list b in [s, p)),
// because only the particles of this depth's internal nodes are flagged (a leaf's, also an
// earlier leaf's, are 0: flag_level) and each internal node holds exactly c / 2 left
// particles in every list (the split is a rank in its axis' list; the other lists hold the
// same particles): L, the left particles of one list at this depth, is the sum of c / 2 over
// the depth's internal nodes, left_before_node[node] the sum over those that start before s
// (upload_shape). All 32-bit: n < 2^31 (OrbTree::kMaxParticles) keeps the whole sum below
// 3 (n / 2) < 2^32, and the subtraction, modular, would stay exact even if it wrapped.
struct ScatterSplit {
  std::uint32_t n;
  std::uint32_t left_per_list;               // L of this depth
  const std::uint32_t* left_before_node;     // per node
  const ShapeNode* nodes;
  const std::int32_t* node_of;
  const std::uint32_t* in;
  const std::uint8_t* flag;
  std::uint32_t* out;
  __device__ void operator()(std::ptrdiff_t index, std::uint32_t before) const {
    const auto i = static_cast<std::size_t>(index);
    const std::uint32_t b = i < n ? 0u : (i < 2 * std::size_t{n} ? 1u : 2u);   // no 64-bit division
    const std::size_t base = static_cast<std::size_t>(b) * n;
    const auto p = static_cast<std::uint32_t>(i - base);
    const std::uint32_t v = in[i];
    const std::int32_t node = node_of[p];
    const ShapeNode nd = nodes[node];
    if (nd.left < 0) {
      out[i] = v;
      return;
    }
    const std::uint32_t s = nd.first;
    const std::uint32_t left_before = before - b * left_per_list - left_before_node[node];
    const std::uint32_t dst = flag[v] ? s + left_before : s + nd.count / 2 + (p - s - left_before);
    out[base + dst] = v;
  }
};
using ScatterIter = thrust::tabulate_output_iterator<ScatterSplit>;

// The levels below subtree_depth_, one thread block per subtree: the same boxes, axes, flags
// and stable partitions as node_boxes, flag_level and ScatterSplit, on the subtree's
// segment of the three lists in shared memory. Its particles get local ids (their places in
// list 0's segment, mapped through `local_of`, scratch of n entries), so that the lists,
// the left flags and each position's node stay in shared memory or registers, and a level
// costs a block scan per list instead of a scan over all 3n positions (the bottom levels of
// a 10^6 build took ~75 us each, most of the splits' time). Thread t holds positions
// [kSubtreeItems t, kSubtreeItems (t + 1)) of the segment throughout. At the end the lists
// go back to global memory (particle indices) and node_of holds each position's leaf, as
// leaf_order reads them.
constexpr int kSubtreeThreads = 512;
constexpr int kSubtreeItems = 4;
constexpr std::uint32_t kSubtreeCap = kSubtreeThreads * kSubtreeItems;   // local ids fit 16 bits
static_assert(kSubtreeCap <= 65536, "local ids are 16-bit");

__global__ void __launch_bounds__(kSubtreeThreads, 2)
    split_subtrees(const std::int32_t* roots, const ShapeNode* nodes, std::uint32_t* lists,
                   std::uint32_t* local_of, std::uint32_t n, const double* x, const double* y, const double* z,
                   int top_levels, DeviceNodeGeometry* geom, std::uint8_t* axis, std::int32_t* node_of) {
  using Scan = cub::BlockScan<std::uint32_t, kSubtreeThreads>;
  __shared__ typename Scan::TempStorage scan_temp;
  __shared__ std::uint32_t id[kSubtreeCap];            // local id -> particle index
  __shared__ std::uint16_t list[3][kSubtreeCap];       // the segment's lists, local ids
  __shared__ std::uint16_t moved[kSubtreeCap];         // one list's partition
  __shared__ std::uint16_t before[kSubtreeCap];        // the flags' exclusive scan (<= 2048)
  __shared__ std::uint8_t left[kSubtreeCap];           // by local id: goes to the left child
  const std::int32_t root = roots[blockIdx.x];
  const std::uint32_t s0 = nodes[root].first, c = nodes[root].count;
  const std::uint32_t q0 = threadIdx.x * kSubtreeItems;
  for (std::uint32_t q = threadIdx.x; q < c; q += kSubtreeThreads) {
    const std::uint32_t j = lists[s0 + q];
    id[q] = j;
    local_of[j] = q;
    list[0][q] = static_cast<std::uint16_t>(q);
  }
  __syncthreads();   // local_of's writes are visible to the block
  for (int b = 1; b < 3; ++b)
    for (std::uint32_t q = threadIdx.x; q < c; q += kSubtreeThreads)
      list[b][q] = static_cast<std::uint16_t>(local_of[lists[b * std::size_t{n} + s0 + q]]);
  // Each held position's node of the current depth, and whether it is new at this depth
  // (not a leaf reached before).
  std::int32_t node_at[kSubtreeItems];
  bool fresh[kSubtreeItems];
#pragma unroll
  for (int k = 0; k < kSubtreeItems; ++k) {
    node_at[k] = root;
    fresh[k] = true;
  }
  __syncthreads();
  for (int d = nodes[root].depth;; ++d) {
    ShapeNode nd[kSubtreeItems];
    bool splits = false;
#pragma unroll
    for (int k = 0; k < kSubtreeItems; ++k) {
      const std::uint32_t q = q0 + k;
      if (q >= c) continue;
      nd[k] = nodes[node_at[k]];
      if (!fresh[k] || nd[k].first != s0 + q) continue;
      // The node's box and axis, by the thread holding its first position.
      DeviceNodeGeometry& g = geom[node_at[k]];
      Vec3d lo, hi;
      for (int a = 0; a < 3; ++a) {
        lo[a] = coord_of(x, y, z, a, id[list[a][q]]);
        hi[a] = coord_of(x, y, z, a, id[list[a][q + nd[k].count - 1]]);
        g.lo[a] = lo[a];
        g.hi[a] = hi[a];
      }
      axis[node_at[k]] = static_cast<std::uint8_t>(split_axis(lo, hi, d, top_levels));
      splits = splits || nd[k].left >= 0;
    }
    if (!__syncthreads_or(splits)) break;   // also: the axes are visible to the block
    bool inner[kSubtreeItems];
#pragma unroll
    for (int k = 0; k < kSubtreeItems; ++k) {
      const std::uint32_t q = q0 + k;
      inner[k] = q < c && nd[k].left >= 0;
      if (inner[k]) left[list[axis[node_at[k]]][q]] = s0 + q - nd[k].first < nd[k].count / 2;
    }
    __syncthreads();
    for (int b = 0; b < 3; ++b) {
      std::uint32_t f[kSubtreeItems];
#pragma unroll
      for (int k = 0; k < kSubtreeItems; ++k) f[k] = inner[k] ? left[list[b][q0 + k]] : 0u;
      Scan(scan_temp).ExclusiveSum(f, f);
#pragma unroll
      for (int k = 0; k < kSubtreeItems; ++k)
        if (q0 + k < c) before[q0 + k] = static_cast<std::uint16_t>(f[k]);
      __syncthreads();
#pragma unroll
      for (int k = 0; k < kSubtreeItems; ++k) {
        const std::uint32_t q = q0 + k;
        if (q >= c) continue;
        const std::uint16_t v = list[b][q];
        std::uint32_t dst = q;
        if (inner[k]) {
          const std::uint32_t s = nd[k].first - s0;
          const std::uint32_t left_before = before[q] - before[s];
          dst = left[v] ? s + left_before : s + nd[k].count / 2 + (q - s - left_before);
        }
        moved[dst] = v;
      }
      __syncthreads();
#pragma unroll
      for (int k = 0; k < kSubtreeItems; ++k)
        if (q0 + k < c) list[b][q0 + k] = moved[q0 + k];
      __syncthreads();   // also: scan_temp and before are free for the next list
    }
#pragma unroll
    for (int k = 0; k < kSubtreeItems; ++k) {
      fresh[k] = inner[k];
      if (inner[k]) node_at[k] = s0 + q0 + k - nd[k].first < nd[k].count / 2 ? nd[k].left : nd[k].right;
    }
  }
#pragma unroll
  for (int k = 0; k < kSubtreeItems; ++k)
    if (q0 + k < c) node_of[s0 + q0 + k] = node_at[k];
  for (int b = 0; b < 3; ++b)
    for (std::uint32_t q = threadIdx.x; q < c; q += kSubtreeThreads) lists[b * std::size_t{n} + s0 + q] = id[list[b][q]];
}

// Tree order: a leaf's particles in its split axis' list (sorted by the total order, as the
// host sorts a leaf), and the positions gathered into tree order.
__global__ void leaf_order(std::uint32_t n, bool root_is_leaf, const ShapeNode* nodes,
                           const std::uint8_t* axis, const std::int32_t* node_of, const std::uint32_t* lists,
                           const double* x, const double* y, const double* z, std::uint32_t* order,
                           double* tx, double* ty, double* tz) {
  const std::uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= n) return;
  const std::int32_t leaf = root_is_leaf ? 0 : descend(nodes, node_of[p], p);
  const std::uint32_t j = lists[static_cast<std::size_t>(axis[leaf]) * n + p];
  order[p] = j;
  tx[p] = x[j];
  ty[p] = y[j];
  tz[p] = z[j];
}

__global__ void make_walk_nodes(std::uint32_t n_nodes, const ShapeNode* nodes, const DeviceNodeGeometry* geom,
                                int top_levels, WalkNode* out) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_nodes) return;
  const ShapeNode nd = nodes[i];
  const DeviceNodeGeometry g = geom[i];
  out[i] = make_walk_node(g.lo, g.hi, g.centre, g.radius, nd.left, nd.right, nd.leaf,
                          is_top_node(nd.depth, nd.left, top_levels));
}

}  // namespace

DeviceOrbTree::~DeviceOrbTree() {
  for (cudaEvent_t& e : events_)
    if (e) cudaEventDestroy(e);
  for (cudaEvent_t& e : joins_)
    if (e) cudaEventDestroy(e);
  if (fork_) cudaEventDestroy(fork_);
  for (cudaStream_t& s : axis_streams_)
    if (s) cudaStreamDestroy(s);
}

void DeviceOrbTree::set_shape(std::size_t n, int max_leaf) {
  if (n == n_ && max_leaf == max_leaf_ && !shape_.empty() && !forest_) return;
  OrbTree::shape_nodes(n, max_leaf, shape_);
  n_ = n;
  max_leaf_ = max_leaf;
  forest_ = false;
  forest_offsets_.clear();
  upload_shape();
}

// The shape's host tables, made by the threads (a forest's are new at every build): per
// thread's block of nodes its count per depth, then each block writes its nodes of a depth
// after the earlier blocks' (so by index inside a depth, as a serial counting sort).
void DeviceOrbTree::upload_shape() {
  const std::size_t n_nodes = shape_.size();
  const auto nn = static_cast<std::int64_t>(n_nodes);
  int max_depth = 0;
  std::int64_t leaves = 0;
#pragma omp parallel for schedule(static) reduction(max : max_depth) reduction(+ : leaves)
  for (std::int64_t i = 0; i < nn; ++i) {
    max_depth = std::max(max_depth, shape_[static_cast<std::size_t>(i)].depth);
    leaves += shape_[static_cast<std::size_t>(i)].left < 0;
  }
  n_leaves_ = static_cast<std::size_t>(leaves);
  const auto depths = static_cast<std::size_t>(max_depth) + 1;
  constexpr std::int64_t kBlock = 1 << 16;
  const std::int64_t n_blocks = (nn + kBlock - 1) / kBlock;
  std::vector<std::size_t> cursor(static_cast<std::size_t>(n_blocks) * depths, 0);   // [block][depth]
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < n_blocks; ++b) {
    std::size_t* c = cursor.data() + static_cast<std::size_t>(b) * depths;
    for (std::int64_t i = b * kBlock; i < std::min(nn, (b + 1) * kBlock); ++i)
      ++c[static_cast<std::size_t>(shape_[static_cast<std::size_t>(i)].depth)];
  }
  // Nodes by depth (increasing index inside a depth), leaves by index.
  level_offset_.assign(depths + 1, 0);
  std::size_t at = 0;
  for (std::size_t d = 0; d < depths; ++d) {
    level_offset_[d] = at;
    for (std::int64_t b = 0; b < n_blocks; ++b) {
      std::size_t& c = cursor[static_cast<std::size_t>(b) * depths + d];
      const std::size_t count = c;
      c = at;
      at += count;
    }
  }
  level_offset_[depths] = at;
  std::vector<std::int32_t> by_depth(n_nodes), leaf_node(n_leaves_);
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < n_blocks; ++b) {
    std::size_t* c = cursor.data() + static_cast<std::size_t>(b) * depths;
    for (std::int64_t i = b * kBlock; i < std::min(nn, (b + 1) * kBlock); ++i) {
      const ShapeNode& s = shape_[static_cast<std::size_t>(i)];
      by_depth[c[static_cast<std::size_t>(s.depth)]++] = static_cast<std::int32_t>(i);
      if (s.left < 0) leaf_node[static_cast<std::size_t>(s.leaf)] = static_cast<std::int32_t>(i);
    }
  }
  // The build's scan terms (ScatterSplit): per node the left particles (count / 2 of each
  // internal node) of the internal nodes of its depth that start before it, per depth their
  // sum. Preorder numbering (OrbTree::shape_nodes, forest_shape_nodes) lists a depth's nodes in
  // position order, which the check keeps honest. (A forest gets them too, unused: it is not
  // split.) The depths apart, one per thread.
  std::vector<std::uint32_t> left_before_node(n_nodes, 0);
  level_left_.assign(depths, 0);
  std::vector<std::uint8_t> whole(depths, 0);   // the depth's nodes hold every particle, each <= kSubtreeCap
  std::int64_t unordered = -1;
#pragma omp parallel for schedule(dynamic, 1) reduction(max : unordered)
  for (std::int64_t d = 0; d < static_cast<std::int64_t>(depths); ++d) {
    std::uint32_t left = 0, end = 0;
    std::size_t held = 0;
    bool fits = true;
    for (std::size_t k = level_offset_[static_cast<std::size_t>(d)]; k < level_offset_[static_cast<std::size_t>(d) + 1];
         ++k) {
      const auto i = static_cast<std::size_t>(by_depth[k]);
      const ShapeNode& s = shape_[i];
      if (s.first < end) unordered = std::max(unordered, static_cast<std::int64_t>(i));
      end = s.first + s.count;
      left_before_node[i] = left;
      if (s.left >= 0) left += s.count / 2;
      held += s.count;
      fits = fits && s.count <= kSubtreeCap;
    }
    level_left_[static_cast<std::size_t>(d)] = left;
    whole[static_cast<std::size_t>(d)] = fits && held == n_;
  }
  if (unordered >= 0) fail("internal: device ORB tree: a depth not in position order at node {}", unordered);
  subtree_depth_ = -1;
  for (std::size_t d = 0; d < depths && subtree_depth_ < 0; ++d)
    if (whole[d]) subtree_depth_ = static_cast<int>(d);
  nodes_.ensure(n_nodes);
  level_nodes_.ensure(n_nodes);
  leaf_node_.ensure(n_leaves_);
  left_before_node_.ensure(n_nodes);
  // Uploads that wait: once per (n, max_leaf), i.e. once per run. On the allocation stream
  // (upload()): a plain cudaMemcpy here raced with the PM kernels still queued on the step's
  // stream whose mesh memory the pool had just handed to these arrays (garbage node tables:
  // NaN forces, seen on an H200; compute-sanitizer's initcheck flagged the reads).
  ancestors_ready_ = false;
  nodes_.upload(shape_.data(), n_nodes);
  level_nodes_.upload(by_depth.data(), n_nodes);
  leaf_node_.upload(leaf_node.data(), n_leaves_);
  left_before_node_.upload(left_before_node.data(), n_nodes);
}

void DeviceOrbTree::ensure_tree_arrays(std::size_t n, bool own_positions) {
  const std::size_t n_nodes = shape_.size();
  order_.ensure_exact(n);
  for (DeviceArray<double>* a : {&tx_, &ty_, &tz_}) {
    if (own_positions) a->ensure_exact(n);
    else a->release();
  }
  if (own_positions) {
    pos_[0] = tx_.data();
    pos_[1] = ty_.data();
    pos_[2] = tz_.data();
  }
  r2_.ensure(n_nodes);
  arrivals_.ensure(n_nodes);
  geom_.ensure(n_nodes);
  leaves_.ensure(n_leaves_);
  for (cudaEvent_t& e : events_)
    if (!e) ORBIS_CUDA_CHECK(cudaEventCreate(&e));
}

void DeviceOrbTree::ensure_buffers(std::size_t n) {
  const std::size_t n_nodes = shape_.size();
  // Kept from build to build (the refits', the walk's and P2P's), then the build's own
  // arrays, which release_build_arrays() gives back to the pool when the build is queued.
  ensure_tree_arrays(n, true);
  for (auto& l : lists_) l.ensure_exact(3 * n);
  for (AxisSort& a : sort_) {
    for (auto& v : a.vals) v.ensure_exact(n);
    for (auto& k : a.keys) k.ensure_exact(n);
  }
  node_of_.ensure_exact(n);
  flag_.ensure_exact(n);
  axis_.ensure(n_nodes);
  ties_.ensure(3);
  dev_ties_.ensure(3);
  const std::size_t sort_bytes = radix_sort_pairs_bytes<std::uint64_t, std::uint32_t>(n, 0, 64, max_cub_items_);
  for (AxisSort& a : sort_) a.temp.ensure_exact(sort_bytes);
  const FlagIter flags(thrust::counting_iterator<std::size_t>(0), FlagOf{nullptr, nullptr});
  const ScatterIter scatter(ScatterSplit{});
  temp_.ensure_exact(exclusive_sum_bytes(flags, scatter, 3 * n, max_cub_items_));
  if (!fork_) {
    ORBIS_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
    for (cudaEvent_t& e : joins_) ORBIS_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    for (cudaStream_t& st : axis_streams_) ORBIS_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  }
}

void DeviceOrbTree::release_build_arrays() {
  for (auto& l : lists_) l.release();
  for (AxisSort& a : sort_) {
    for (auto& v : a.vals) v.release();
    for (auto& k : a.keys) k.release();
    a.temp.release();
  }
  node_of_.release();
  flag_.release();
  temp_.release();
}

void DeviceOrbTree::sort_indices(const double* c, const std::uint32_t* idx, std::uint32_t* out, int* tie,
                                 AxisSort& with, cudaStream_t stream) {
  const auto n = static_cast<std::uint32_t>(n_);
  make_keys<<<blocks_for(n), kThreads, 0, stream>>>(c, idx, n, with.keys[0].data(), with.vals[0].data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  cub::DoubleBuffer<std::uint64_t> keys(with.keys[0].data(), with.keys[1].data());
  cub::DoubleBuffer<std::uint32_t> vals(with.vals[0].data(), with.vals[1].data());
  radix_sort_pairs(with.temp.data(), with.temp.capacity(), keys, vals, n_, 0, 64, stream, max_cub_items_);
  if (tie) {
    find_ties<<<blocks_for(n), kThreads, 0, stream>>>(keys.Current(), n, tie);
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(out, vals.Current(), n * sizeof(std::uint32_t), cudaMemcpyDeviceToDevice, stream));
}

void DeviceOrbTree::build(const double* x, const double* y, const double* z, std::size_t n, int max_leaf,
                          double particle_mass, cudaStream_t stream, int top_levels) {
  if (top_levels < 0) fail("device ORB tree: top_levels = {} must be >= 0", top_levels);
  set_shape(n, max_leaf);   // checks n and max_leaf as OrbTree does
  AllocationStream on_stream(stream);   // the build's arrays come from the pool and go back to it
  ensure_buffers(n);
  particle_mass_ = particle_mass;
  const auto nn = static_cast<std::uint32_t>(n);
  const double* c[3] = {x, y, z};
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[0], stream));

  // Sorted lists: by x_a alone first; an axis with equal x_a somewhere is redone as three
  // stable sorts (x_a+2, then x_a+1, then x_a) to break the ties lexicographically.
  std::uint32_t* lists = lists_[0].data();
  int* ties = ties_.data();
  int* dev_ties = dev_ties_.data();
  ORBIS_CUDA_CHECK(cudaMemsetAsync(dev_ties, 0, 3 * sizeof(int), stream));
  // The three sorts at once: axes 1 and 2 on their own streams, after what the build's
  // stream queued (the positions, the arrays' allocations), and the build's stream then
  // waits for them.
  ORBIS_CUDA_CHECK(cudaEventRecord(fork_, stream));
  for (int a = 0; a < 3; ++a) {
    cudaStream_t on = a == 0 ? stream : axis_streams_[a - 1];
    if (a > 0) ORBIS_CUDA_CHECK(cudaStreamWaitEvent(on, fork_, 0));
    sort_indices(c[a], nullptr, lists + a * n, dev_ties + a, sort_[a], on);
    if (a > 0) ORBIS_CUDA_CHECK(cudaEventRecord(joins_[a - 1], on));
  }
  for (cudaEvent_t& e : joins_) ORBIS_CUDA_CHECK(cudaStreamWaitEvent(stream, e, 0));
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(ties, dev_ties, 3 * sizeof(int), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));   // the one host wait of the build
  for (int a = 0; a < 3; ++a) {
    if (!ties[a]) continue;
    std::uint32_t* out = lists + a * n;
    sort_indices(c[(a + 2) % 3], nullptr, out, nullptr, sort_[0], stream);
    sort_indices(c[(a + 1) % 3], out, out, nullptr, sort_[0], stream);
    sort_indices(c[a], out, out, nullptr, sort_[0], stream);
  }
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[1], stream));

  // Level by level: boxes and axes of depth d, then (if any node there splits) flags and
  // the stable partition into the other list buffer, made by the flags' scan as it writes.
  const int max_depth = static_cast<int>(level_offset_.size()) - 2;
  int cur = 0;
  for (int d = 0; d <= max_depth; ++d) {
    const std::int32_t* level = level_nodes_.data() + level_offset_[static_cast<std::size_t>(d)];
    const auto n_level = static_cast<std::uint32_t>(level_offset_[static_cast<std::size_t>(d) + 1] -
                                                    level_offset_[static_cast<std::size_t>(d)]);
    if (d == subtree_depth_) {   // this depth and all below, a block a subtree, in place
      split_subtrees<<<n_level, kSubtreeThreads, 0, stream>>>(level, nodes_.data(), lists_[cur].data(),
                                                              lists_[1 - cur].data(), nn, x, y, z, top_levels,
                                                              geom_.data(), axis_.data(), node_of_.data());
      ORBIS_CUDA_CHECK(cudaGetLastError());
      break;
    }
    const std::uint32_t* in = lists_[cur].data();
    node_boxes<<<blocks_for(n_level), kThreads, 0, stream>>>(level, n_level, nodes_.data(), in, nn, x, y, z,
                                                              top_levels, geom_.data(), axis_.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    if (d == max_depth) break;
    flag_level<<<blocks_for(n), kThreads, 0, stream>>>(nn, d == 0, nodes_.data(), axis_.data(), node_of_.data(), in,
                                                       flag_.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    const FlagIter flags(thrust::counting_iterator<std::size_t>(0), FlagOf{in, flag_.data()});
    const ScatterIter scatter(ScatterSplit{nn, level_left_[static_cast<std::size_t>(d)], left_before_node_.data(),
                                           nodes_.data(), node_of_.data(), in, flag_.data(),
                                           lists_[1 - cur].data()});
    exclusive_sum(temp_.data(), temp_.capacity(), flags, scatter, 3 * n, stream, max_cub_items_);
    cur = 1 - cur;
  }
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[2], stream));

  leaf_order<<<blocks_for(n), kThreads, 0, stream>>>(nn, max_depth == 0, nodes_.data(), axis_.data(), node_of_.data(),
                                                     lists_[cur].data(), x, y, z, order_.data(), tx_.data(),
                                                     ty_.data(), tz_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  finish_geometry(stream);
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[3], stream));
  release_build_arrays();
}

DeviceOrbTree::Times DeviceOrbTree::times() const {
  Times t;
  if (!events_[3]) return t;
  ORBIS_CUDA_CHECK(cudaEventSynchronize(events_[3]));
  float ms = 0;
  ORBIS_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[0], events_[3]));
  t.total_ms = ms;
  ORBIS_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[0], events_[1]));
  t.sort_ms = ms;
  ORBIS_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[1], events_[2]));
  t.split_ms = ms;
  ORBIS_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[2], events_[3]));
  t.finish_ms = ms;
  return t;
}

void DeviceOrbTree::walk_nodes(WalkNode* out, int top_levels, cudaStream_t stream) const {
  const auto n_nodes = static_cast<std::uint32_t>(shape_.size());
  make_walk_nodes<<<blocks_for(n_nodes), kThreads, 0, stream>>>(n_nodes, nodes_.data(), geom_.data(), top_levels,
                                                                out);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

void DeviceOrbTree::download(OrbTree& out, const std::vector<Vec3d>& positions, cudaStream_t stream) const {
  if (positions.size() != n_) fail("device ORB tree: download with {} positions for {} particles", positions.size(), n_);
  const std::size_t nn = shape_.size();
  host_order_.ensure(n_);
  host_geom_.ensure(nn);
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(host_order_.data(), order_.data(), n_ * sizeof(std::uint32_t),
                                   cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(host_geom_.data(), geom_.data(), nn * sizeof(DeviceNodeGeometry),
                                   cudaMemcpyDeviceToHost, stream));
  // Sized while the copies run (a no-op from the second step of a run on).
  const OrbTree::AdoptArrays into = out.begin_adopt(n_, nn, max_leaf_);
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  const DeviceNodeGeometry* geom = host_geom_.data();
  const std::uint32_t* order = host_order_.data();
#pragma omp parallel
  {
#pragma omp for schedule(static) nowait
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(nn); ++i) {
      TreeNode& node = into.nodes[i];
      const DeviceNodeGeometry& g = geom[i];
      const ShapeNode& s = shape_[static_cast<std::size_t>(i)];
      node.first = s.first;
      node.count = s.count;
      node.left = s.left;
      node.right = s.right;
      node.leaf = s.leaf;
      node.depth = s.depth;
      node.parent = s.parent;
      node.lo = Vec3d{g.lo[0], g.lo[1], g.lo[2]};
      node.hi = Vec3d{g.hi[0], g.hi[1], g.hi[2]};
      node.centre = Vec3d{g.centre[0], g.centre[1], g.centre[2]};
      node.radius = g.radius;
      node.mass = node.count * particle_mass_;
    }
#pragma omp for schedule(static)
    for (std::int64_t t = 0; t < static_cast<std::int64_t>(n_); ++t) {
      into.order[t] = order[t];
      into.positions[t] = positions[order[t]];
    }
  }
  out.finish_adopt();
}

}  // namespace orbis::gpu
