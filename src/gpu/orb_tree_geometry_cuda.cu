// The device ORB tree's geometry from its tree order (orb_tree_cuda.cuh):
//
// DeviceOrbTree::finish_geometry: leaf records, centres and radii, the internal nodes'
// centres and radii, after a build (positions in tree order, boxes made by the splits) or a
// refit (positions gathered and boxes made here too). Every value is the host's
// (OrbTree::build and OrbTree::refit) to the bit.
//
// DeviceOrbTree::refit: the last build's tree over moved particles. Membership and order
// stay; positions are gathered into tree order, every box is the tight box of its members (a
// leaf's from its particles, an internal node's the union of its children's), and centres,
// radii and leaf records follow as in build().
//
// DeviceOrbTree::assemble_forest: a forest's shape (OrbTree::forest_shape) with the
// identity order, then the same refit: OrbTree::assemble_forest's arithmetic, which is
// OrbTree::refit's. With the identity order the caller's positions are the tree-order ones:
// a forest's refit reads them in place instead of gathering a copy.
#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "gpu/orb_tree_cuda.cuh"

namespace orbis::gpu {
namespace {

constexpr int kThreads = 256;
unsigned blocks_for(std::size_t n) { return static_cast<unsigned>(std::max<std::size_t>(1, (n + kThreads - 1) / kThreads)); }

// One warp per leaf (gather: its positions gathered into tree order first): the box (boxes:
// a refit's; a build's are the sorted lists' ends), the centre (the mean of the members, summed
// in tree order by one lane as the host sums them), the squared radius about it (a max:
// exact in any order) and the leaf record the P2P kernels read (centre: the box centre).
// A warp reads its leaf's positions together; one thread per leaf, each reading its own
// 32 in a row, took 3x longer at 256^3 (strided loads).
constexpr int kWarps = kThreads / 32;
unsigned warp_blocks_for(std::size_t n) { return static_cast<unsigned>((n + kWarps - 1) / kWarps); }

__device__ __forceinline__ double warp_min(double v) {
  for (int off = 16; off > 0; off >>= 1) v = fmin(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ __forceinline__ double warp_max(double v) {
  for (int off = 16; off > 0; off >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

__global__ void leaf_pass(std::uint32_t n_leaves, const std::int32_t* leaf_node, const ShapeNode* nodes, bool boxes,
                          const std::uint32_t* gather, const double* x, const double* y, const double* z, double* tx,
                          double* ty, double* tz, DeviceNodeGeometry* geom, DeviceLeaf* leaves,
                          unsigned long long* r2) {
  __shared__ double staged[kWarps][3][32];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const std::uint32_t l = blockIdx.x * kWarps + w;
  if (l >= n_leaves) return;   // the whole warp
  const std::int32_t node = leaf_node[l];
  const ShapeNode nd = nodes[node];
  const std::uint32_t end = nd.first + nd.count;
  DeviceNodeGeometry& g = geom[node];
  double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
  Vec3d sum{0, 0, 0};
  for (std::uint32_t base = nd.first; base < end; base += 32) {
    const std::uint32_t t = base + lane;
    if (t < end) {
      double v[3];
      if (gather) {
        const std::uint32_t j = gather[t];
        v[0] = x[j];
        v[1] = y[j];
        v[2] = z[j];
        tx[t] = v[0];
        ty[t] = v[1];
        tz[t] = v[2];
      } else {
        v[0] = tx[t];
        v[1] = ty[t];
        v[2] = tz[t];
      }
      for (int d = 0; d < 3; ++d) {
        staged[w][d][lane] = v[d];
        lo[d] = fmin(lo[d], v[d]);
        hi[d] = fmax(hi[d], v[d]);
      }
    }
    __syncwarp();
    if (lane == 0) {
      const std::uint32_t m = min(32u, end - base);
      for (std::uint32_t k = 0; k < m; ++k) sum += Vec3d{staged[w][0][k], staged[w][1][k], staged[w][2][k]};
    }
    __syncwarp();
  }
  const Vec3d mean = sum * (1.0 / nd.count);
  const Vec3d c{__shfl_sync(0xffffffffu, mean.x, 0), __shfl_sync(0xffffffffu, mean.y, 0),
                __shfl_sync(0xffffffffu, mean.z, 0)};
  unsigned long long m2 = 0;
  for (std::uint32_t t = nd.first + lane; t < end; t += 32) {
    const unsigned long long v =
        static_cast<unsigned long long>(__double_as_longlong(norm2(Vec3d{tx[t], ty[t], tz[t]} - c)));
    m2 = max(m2, v);
  }
  for (int off = 16; off > 0; off >>= 1) m2 = max(m2, __shfl_xor_sync(0xffffffffu, m2, off));
  if (boxes)
    for (int d = 0; d < 3; ++d) {
      lo[d] = warp_min(lo[d]);
      hi[d] = warp_max(hi[d]);
    }
  if (lane != 0) return;
  if (boxes)
    for (int d = 0; d < 3; ++d) {
      g.lo[d] = lo[d];
      g.hi[d] = hi[d];
    }
  g.centre[0] = c.x;
  g.centre[1] = c.y;
  g.centre[2] = c.z;
  r2[node] = m2;
  const Vec3d box = 0.5 * (Vec3d{g.lo[0], g.lo[1], g.lo[2]} + Vec3d{g.hi[0], g.hi[1], g.hi[2]});
  leaves[l] = DeviceLeaf{nd.first, nd.count, box.x, box.y, box.z};
}

// Internal nodes from their children, bottom-up in one launch (a thread per leaf climbs
// while it is the second child of its parent to arrive, as in Karras 2012): the centre
// (count-weighted mean of the children's, the host's arithmetic) and on a refit the box
// (the union of theirs). Level by level, one launch a depth, it took 0.34 ms at 256^3 on an
// H200 (19 launches). Children written on other SMs are read from L2 (__ldcg: L1 is not
// coherent), after the fences that order each child's writes before its arrival count.
__device__ __forceinline__ Vec3d centre_from_l2(const DeviceNodeGeometry& g) {
  return Vec3d{__ldcg(&g.centre[0]), __ldcg(&g.centre[1]), __ldcg(&g.centre[2])};
}

__global__ void internal_pass(std::uint32_t n_leaves, const std::int32_t* leaf_node, const ShapeNode* nodes,
                              bool boxes, DeviceNodeGeometry* geom, unsigned* arrivals) {
  const std::uint32_t l = blockIdx.x * blockDim.x + threadIdx.x;
  if (l >= n_leaves) return;
  std::int32_t node = leaf_node[l];
  for (;;) {
    const std::int32_t up = nodes[node].parent;
    if (up < 0) return;   // the root is done
    __threadfence();      // this node's geometry before its arrival
    if (atomicAdd(arrivals + up, 1u) == 0) return;   // the sibling finishes the parent
    __threadfence();
    const ShapeNode nd = nodes[up];
    const ShapeNode a = nodes[nd.left], b = nodes[nd.right];
    const DeviceNodeGeometry& ga = geom[nd.left];
    const DeviceNodeGeometry& gb = geom[nd.right];
    const Vec3d ca = centre_from_l2(ga), cb = centre_from_l2(gb);
    const Vec3d c = (static_cast<double>(a.count) * ca + static_cast<double>(b.count) * cb) * (1.0 / nd.count);
    DeviceNodeGeometry& g = geom[up];
    if (boxes)
      for (int d = 0; d < 3; ++d) {
        g.lo[d] = fmin(__ldcg(&ga.lo[d]), __ldcg(&gb.lo[d]));
        g.hi[d] = fmax(__ldcg(&ga.hi[d]), __ldcg(&gb.hi[d]));
      }
    g.centre[0] = c.x;
    g.centre[1] = c.y;
    g.centre[2] = c.z;
    node = up;
  }
}

// Each leaf's ancestors, root first (row l of `stride` entries; -1 after the last), from
// the parent links: made once per shape (finish_geometry), read by radius_pass.
__global__ void leaf_ancestors(std::uint32_t n_leaves, const std::int32_t* leaf_node, const ShapeNode* nodes,
                               int stride, std::int32_t* out) {
  const std::uint32_t l = blockIdx.x * blockDim.x + threadIdx.x;
  if (l >= n_leaves) return;
  std::int32_t* row = out + static_cast<std::size_t>(l) * stride;
  int count = 0;
  for (std::int32_t a = nodes[leaf_node[l]].parent; a >= 0; a = nodes[a].parent) ++count;
  int k = count;
  for (std::int32_t a = nodes[leaf_node[l]].parent; a >= 0; a = nodes[a].parent) row[--k] = a;
  for (k = count; k < stride; ++k) row[k] = -1;
}

// Squared radii of the internal nodes (the leaves': leaf_pass), exact: a node's is the max
// over its particles p of norm2(p - centre) (non-negative doubles order like their bits, so
// an integer atomicMax on the bits is the exact max in any order of arrival). As the host's
// refit, a branch and bound: a leaf l below node N holds no particle farther from N's centre
// c than |c - c_l| + r_l, so only the leaves whose bound reaches a distance already found (a
// distance of one of N's particles, hence a lower bound of N's radius) need measuring. One
// warp per leaf, a lane per ancestor (all loads at once; walking the path from the root, a
// chain of dependent loads per level, took longer than measuring every particle), two passes:
//   seeds (pass 0): N's 32-63 sample particles, spread over its range, each measured with
//     its whole leaf (a node of 32 leaves or fewer has nearly every leaf measured here);
//   the rest (pass 1): the leaves not measured in pass 0 whose bound reaches r2[N].
// Every particle met every ancestor before (19 levels at 256^3): 1.5 ms a refit on an H200.
__device__ __forceinline__ std::uint64_t distance_bits(const Vec3d& p, const Vec3d& c) {
  return static_cast<std::uint64_t>(__double_as_longlong(norm2(p - c)));
}

// Whether the leaf [first, first + count) holds one of node a's sample positions: the
// multiples of a power of two 2^s from a.first, with s such that there are 32 to 63 of them
// (all of a's positions in a node of fewer than 64 particles). Shifts, not a division: a
// 64-bit division per lane and ancestor made the radii 3x slower.
__device__ __forceinline__ bool holds_sample(const ShapeNode& a, std::uint32_t first, std::uint32_t count) {
  const std::uint32_t off = first - a.first;
  if (off == 0) return true;
  const int s = 31 - __clz(max(1u, a.count >> 5));
  return ((off + count - 1) >> s) != ((off - 1) >> s);
}

__global__ void radius_pass(int pass, std::uint32_t n_leaves, const std::int32_t* leaf_node, int stride,
                            const std::int32_t* ancestors, const ShapeNode* nodes, const DeviceNodeGeometry* geom,
                            const double* tx, const double* ty, const double* tz, unsigned long long* r2) {
  const unsigned lane = threadIdx.x & 31;
  const std::uint32_t l = blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (l >= n_leaves) return;   // the whole warp
  const std::int32_t leaf = leaf_node[l];
  const ShapeNode nd = nodes[leaf];
  const bool one_chunk = nd.count <= 32;
  const Vec3d mine = lane < nd.count ? Vec3d{tx[nd.first + lane], ty[nd.first + lane], tz[nd.first + lane]}
                                     : Vec3d{0, 0, 0};
  Vec3d cl{0, 0, 0};
  double rl = 0;
  if (pass == 1) {
    const DeviceNodeGeometry& gl = geom[leaf];
    cl = Vec3d{gl.centre[0], gl.centre[1], gl.centre[2]};
    rl = sqrt(__longlong_as_double(static_cast<long long>(r2[leaf])));
  }
  const std::int32_t* row = ancestors + static_cast<std::size_t>(l) * stride;
  for (int k0 = 0; k0 < stride; k0 += 32) {
    const std::int32_t a = k0 + static_cast<int>(lane) < stride ? row[k0 + lane] : -1;
    bool measure = false;
    Vec3d c{0, 0, 0};
    if (a >= 0) {
      const DeviceNodeGeometry& g = geom[a];
      c = Vec3d{g.centre[0], g.centre[1], g.centre[2]};
      const bool sampled = holds_sample(nodes[a], nd.first, nd.count);
      if (pass == 0) {
        measure = sampled;
      } else if (!sampled) {
        // The bound, rounded up generously (1e-9 relative: far above the few ulps of its
        // own arithmetic), against the largest distance found so far.
        const double bound = sqrt(norm2(cl - c)) + rl;
        measure = bound * bound * (1 + 1e-9) >= __longlong_as_double(static_cast<long long>(r2[a]));
      }
    }
    for (unsigned todo = __ballot_sync(0xffffffffu, measure); todo != 0; todo &= todo - 1) {
      const int src = __ffs(todo) - 1;
      const Vec3d ca{__shfl_sync(0xffffffffu, c.x, src), __shfl_sync(0xffffffffu, c.y, src),
                     __shfl_sync(0xffffffffu, c.z, src)};
      const std::int32_t node = __shfl_sync(0xffffffffu, a, src);
      std::uint64_t m = 0;
      if (one_chunk) {
        if (lane < nd.count) m = distance_bits(mine, ca);
      } else {
        for (std::uint32_t t = nd.first + lane; t < nd.first + nd.count; t += 32)
          m = max(m, distance_bits(Vec3d{tx[t], ty[t], tz[t]}, ca));
      }
      for (int off = 16; off > 0; off >>= 1)
        m = max(m, static_cast<std::uint64_t>(__shfl_xor_sync(0xffffffffu, m, off)));
      if (lane == 0) atomicMax(r2 + node, static_cast<unsigned long long>(m));
    }
  }
}

__global__ void set_radii(std::uint32_t n_nodes, const unsigned long long* r2, DeviceNodeGeometry* geom) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n_nodes) geom[i].radius = sqrt(__longlong_as_double(static_cast<long long>(r2[i])));
}

__global__ void identity_order(std::size_t n, std::uint32_t* order) {
  const std::size_t p = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (p < n) order[p] = static_cast<std::uint32_t>(p);
}

}  // namespace

// Leaf records, centres and radii (leaf_pass), the internal nodes' centres bottom-up
// (internal_pass) and their radii (radius_pass), from the tree-order positions and (build)
// the boxes in geom_. A refit (x, y, z not null) gathers the tree-order positions from its
// caller's order first (a forest's are its caller's) and makes the boxes too; its three parts are timed apart (events 1
// and 2).
void DeviceOrbTree::finish_geometry(cudaStream_t stream, const double* x, const double* y, const double* z) {
  const bool refit = x != nullptr;
  const int max_depth = static_cast<int>(level_offset_.size()) - 2;
  const auto n_nodes = static_cast<std::uint32_t>(shape_.size());
  // Every internal node's radius is an atomicMax into r2_ (the leaves' are written).
  ORBIS_CUDA_CHECK(cudaMemsetAsync(r2_.data(), 0, n_nodes * sizeof(std::uint64_t), stream));
  // A forest reads its caller's positions in place (pos_): leaf_pass writes tree-order
  // positions only when it gathers them, which a forest never does.
  const bool gather = refit && !forest_;
  double* t[3] = {const_cast<double*>(pos_[0]), const_cast<double*>(pos_[1]), const_cast<double*>(pos_[2])};
  leaf_pass<<<warp_blocks_for(n_leaves_), kThreads, 0, stream>>>(
      static_cast<std::uint32_t>(n_leaves_), leaf_node_.data(), nodes_.data(), refit, gather ? order_.data() : nullptr,
      x, y, z, t[0], t[1], t[2], geom_.data(), leaves_.data(), reinterpret_cast<unsigned long long*>(r2_.data()));
  ORBIS_CUDA_CHECK(cudaGetLastError());
  if (refit) ORBIS_CUDA_CHECK(cudaEventRecord(events_[1], stream));
  if (max_depth > 0) {
    ORBIS_CUDA_CHECK(cudaMemsetAsync(arrivals_.data(), 0, n_nodes * sizeof(unsigned), stream));
    internal_pass<<<blocks_for(n_leaves_), kThreads, 0, stream>>>(static_cast<std::uint32_t>(n_leaves_),
                                                                  leaf_node_.data(), nodes_.data(), refit,
                                                                  geom_.data(), arrivals_.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  if (refit) ORBIS_CUDA_CHECK(cudaEventRecord(events_[2], stream));
  if (max_depth > 0) {
    auto* r2 = reinterpret_cast<unsigned long long*>(r2_.data());
    const auto nl = static_cast<std::uint32_t>(n_leaves_);
    if (!ancestors_ready_) {   // a new shape: no leaf has more than max_depth ancestors
      ancestors_.ensure(static_cast<std::size_t>(n_leaves_) * static_cast<std::size_t>(max_depth));
      leaf_ancestors<<<blocks_for(nl), kThreads, 0, stream>>>(nl, leaf_node_.data(), nodes_.data(), max_depth,
                                                              ancestors_.data());
      ORBIS_CUDA_CHECK(cudaGetLastError());
      ancestors_ready_ = true;
    }
    for (int pass = 0; pass < 2; ++pass) {
      radius_pass<<<warp_blocks_for(nl), kThreads, 0, stream>>>(pass, nl, leaf_node_.data(), max_depth,
                                                                ancestors_.data(), nodes_.data(), geom_.data(),
                                                                pos_[0], pos_[1], pos_[2], r2);
      ORBIS_CUDA_CHECK(cudaGetLastError());
    }
  }
  set_radii<<<blocks_for(n_nodes), kThreads, 0, stream>>>(
      n_nodes, reinterpret_cast<const unsigned long long*>(r2_.data()), geom_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

void DeviceOrbTree::refit(const double* x, const double* y, const double* z, cudaStream_t stream) {
  if (shape_.empty()) fail("device ORB tree: refit() before build()");
  if (forest_) {   // the identity order: the positions are the tree-order ones
    pos_[0] = x;
    pos_[1] = y;
    pos_[2] = z;
  }
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
    OrbTree::forest_shape_nodes(n, group_offsets, top_depth, max_leaf, shape_);   // checks the input
    n_ = n;
    max_leaf_ = max_leaf;
    forest_ = true;
    forest_top_ = top_depth;
    forest_offsets_ = group_offsets;
    upload_shape();
  }
  particle_mass_ = particle_mass;
  AllocationStream on_stream(stream);
  ensure_tree_arrays(n, false);
  identity_order<<<blocks_for(n), kThreads, 0, stream>>>(n, order_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  refit(x, y, z, stream);
}

}  // namespace orbis::gpu
