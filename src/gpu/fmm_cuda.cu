#include "gpu/fmm_cuda.cuh"

#include <algorithm>

#include "core/error.hpp"
#include "fmm/kernel_derivatives.hpp"
#include "gpu/cub_counts.cuh"
#include "gpu/orb_tree_cuda.cuh"
#include "tree/multi_index.hpp"

namespace orbis::gpu {
namespace {

constexpr int kWarps = 4;   // per block: one item (leaf, node) per warp
constexpr int kThreads = 32 * kWarps;
constexpr int kMaxNm = MultiIndexSet::count(6);   // multipoles of the highest order
constexpr int kMaxNl = MultiIndexSet::count(7);   // its local expansion
constexpr int kMaxPerLane = (kMaxNl + 31) / 32;

// The index tables, as device pointers into one array (DeviceFmm::tables_).
struct Tables {
  const int* mi;          // (a, b, c) of each local-set index (the multipole set is its prefix)
  const int* m2m_start;   // M2M: terms of multipole n at [start[n], start[n + 1]) ...
  const int* m2m_terms;   // ... as (k, n - k): M_n += M_k(child) d^(n-k)/(n-k)!, host order
  const int* l2l_start;   // L2L: terms of local k ...
  const int* l2l_terms;   // ... as (n, n - k): L_k += L_n(parent) d^(n-k)/(n-k)!, host order
  const int* m2l_count;   // M2L: multipoles n < count[k] reach local k ...
  const int* m2l_kn;      // ... at D_(n+k), index kn[k * nm + n]
  const int* steps;       // D recurrence of index i: (axis, i - e, i - 2e or -1, n_axis - 1)
  const int* plus_e;      // L2P: local index of gradient term i + e_d at [d * nm + i]
};

// s^n / n! for n = (a, b, c) by the chain of scaled_monomials (tree/multi_index.hpp): z
// first, then y, then x, one rounded multiply and divide per step, as the host does.
__device__ __forceinline__ double scaled_monomial(const int* n, double sx, double sy, double sz) {
  double v = 1.0;
  for (int k = 1; k <= n[2]; ++k) v = __dmul_rn(v, sz) / k;
  for (int k = 1; k <= n[1]; ++k) v = __dmul_rn(v, sy) / k;
  for (int k = 1; k <= n[0]; ++k) v = __dmul_rn(v, sx) / k;
  return v;
}

__device__ __forceinline__ Vec3d centre_of(const DeviceNodeGeometry& g) { return Vec3d{g.centre[0], g.centre[1], g.centre[2]}; }

// P2M: a warp per leaf, lane n sums (x_j - z)^n / n! over the leaf's particles in tree order.
__global__ void p2m_kernel(Tables tb, int nm, FmmTreeView t, const std::uint8_t* wanted, double* m) {
  const std::size_t leaf = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (leaf >= t.n_leaves) return;
  const std::int32_t node = t.leaf_node[leaf];
  if (!wanted[node]) return;
  const DeviceShapeNode nd = t.nodes[node];
  const Vec3d c = centre_of(t.geometry[node]);
  for (int n = lane; n < nm; n += 32) {
    const int* mi = tb.mi + 3 * n;
    double sum = 0;
    for (std::uint32_t p = nd.first; p < nd.first + nd.count; ++p)
      sum = __dadd_rn(sum, scaled_monomial(mi, t.x[p] - c.x, t.y[p] - c.y, t.z[p] - c.z));
    m[static_cast<std::size_t>(node) * nm + n] = sum;
  }
}

// M2M for the nodes of one depth: a warp per internal node, its children (left, then right)
// shifted to its centre term by term in the host's order.
__global__ void m2m_kernel(Tables tb, int nm, FmmTreeView t, const std::int32_t* level, std::uint32_t n_level,
                           const std::uint8_t* wanted, double* m) {
  __shared__ double mono[kWarps][kMaxNm];
  const std::uint32_t item = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
  if (item >= n_level) return;   // warp-uniform
  const std::int32_t node = level[item];
  const DeviceShapeNode nd = t.nodes[node];
  if (nd.left < 0 || !wanted[node]) return;
  double sum[3] = {0, 0, 0};   // n = lane + 32 j (nm <= 84)
  const std::int32_t children[2] = {nd.left, nd.right};
  for (const std::int32_t child : children) {
    const Vec3d d = centre_of(t.geometry[child]) - centre_of(t.geometry[node]);
    for (int i = lane; i < nm; i += 32) mono[w][i] = scaled_monomial(tb.mi + 3 * i, d.x, d.y, d.z);
    __syncwarp();
    const double* mc = m + static_cast<std::size_t>(child) * nm;
    for (int j = 0; j < 3; ++j) {
      const int n = lane + 32 * j;
      if (n >= nm) break;
      for (int q = tb.m2m_start[n]; q < tb.m2m_start[n + 1]; ++q)
        sum[j] = __dadd_rn(sum[j], __dmul_rn(mc[tb.m2m_terms[2 * q]], mono[w][tb.m2m_terms[2 * q + 1]]));
    }
    __syncwarp();   // mono is rewritten for the other child
  }
  for (int j = 0; j < 3; ++j)
    if (lane + 32 * j < nm) m[static_cast<std::size_t>(node) * nm + lane + 32 * j] = sum[j];
}

// D_n(R) for |n| <= q_order into lev[0] (the warp's two level buffers): the radial
// factors (every lane), then the recurrence a level per step, lanes over its entries; every
// lane returns the pointer, after the warp's last write. cut_shift: the truncated kernel's
// shifted cut (fmm/kernel_derivatives.hpp).
__device__ const double* derivative_tensor(const Tables& tb, KernelKind kernel, double r_s, int q_order,
                                           const Vec3d& R, double (*lev)[kMaxNl], int lane, double cut_shift = 0) {
  double g[9];
  radial_derivatives(kernel, sqrt(norm2(R)), r_s, q_order, g, cut_shift);
  for (int mm = q_order; mm >= 0; --mm) {
    double* cur = lev[mm & 1];
    const double* up = lev[(mm + 1) & 1];
    const int count = MultiIndexSet::count(q_order - mm);
    for (int i = lane; i < count; i += 32) {
      if (i == 0) {
        cur[0] = g[mm];
      } else {
        const int* s = tb.steps + 4 * i;
        double v = R[s[0]] * up[s[1]];
        if (s[2] >= 0) v += s[3] * up[s[2]];
        cur[i] = v;
      }
    }
    __syncwarp();
  }
  return lev[0];
}

// M2L of tasks [begin, end) of one target node (centre zt) added to the warp's local
// expansion acc (lane k holds entries k + 32 j), in list order.
__device__ void m2l_tasks(const Tables& tb, int order, int nm, int nl, KernelKind kernel, double r_s, double cut_shift,
                          const FmmTreeView& t, const InteractionTask* tasks, std::uint64_t begin, std::uint64_t end,
                          const Vec3d& zt, double box, const double* m, double* sm, double (*lev)[kMaxNl],
                          double* acc) {
  const int lane = threadIdx.x & 31;
  const int q_order = order + 1;   // D to p + 1
  for (std::uint64_t q = begin; q < end; ++q) {
    const InteractionTask task = tasks[q];
    const Vec3d shift{task.image[0] * box, task.image[1] * box, task.image[2] * box};
    const Vec3d R = (zt - centre_of(t.geometry[task.source])) - shift;   // as the host
    const double* D = derivative_tensor(tb, kernel, r_s, q_order, R, lev, lane, cut_shift);
    const double* ms = m + static_cast<std::size_t>(task.source) * nm;
    for (int n = lane; n < nm; n += 32) {
      const int* mi = tb.mi + 3 * n;
      sm[n] = ((mi[0] + mi[1] + mi[2]) & 1) ? -ms[n] : ms[n];
    }
    __syncwarp();
    for (int j = 0; j < kMaxPerLane; ++j) {
      const int k = lane + 32 * j;
      if (k >= nl) break;
      const int* kn = tb.m2l_kn + k * nm;
      double s = 0;
      for (int n = 0; n < tb.m2l_count[k]; ++n) s += sm[n] * D[kn[n]];
      acc[j] += s;
    }
    __syncwarp();   // sm and lev are rewritten by the next task
  }
}

// A node's M2L tasks are split into chunks of `chunk` tasks when it has more than that (the
// few nodes with thousands of tasks would otherwise keep one warp busy while the GPU idles:
// a sub-step with few active targets, or the core of an isolated system). chunks[node]: its
// chunk count (0: done in one piece by m2l_kernel).
__global__ void m2l_chunk_counts(const std::uint64_t* offsets, std::size_t n_nodes, std::uint64_t chunk,
                                 std::uint32_t* chunks) {
  const std::size_t node = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (node > n_nodes) return;
  if (node == n_nodes) {
    chunks[n_nodes] = 0;   // the exclusive scan's entry n_nodes is then the total
    return;
  }
  const std::uint64_t n = offsets[node + 1] - offsets[node];
  chunks[node] = n > chunk ? static_cast<std::uint32_t>((n + chunk - 1) / chunk) : 0u;
}

// A warp per chunk (grid-stride up to max_chunks; those beyond the total do nothing): the
// chunk's partial local expansion, in list order, into partial[c * nl ...].
__global__ void m2l_chunk_kernel(Tables tb, int order, int nm, int nl, KernelKind kernel, double r_s, double cut_shift,
                                 FmmTreeView t,
                                 const InteractionTask* tasks, const std::uint64_t* offsets,
                                 const std::uint32_t* chunk_start, std::uint64_t chunk, std::size_t max_chunks,
                                 double box, const double* m, double* partial) {
  __shared__ double sm[kWarps][kMaxNm];
  __shared__ double lev[kWarps][2][kMaxNl];
  const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
  const std::uint32_t total = chunk_start[t.n_nodes];
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * kWarps;
  for (std::size_t c = blockIdx.x * static_cast<std::size_t>(kWarps) + w; c < max_chunks && c < total; c += warps) {
    // The node whose chunks hold c: the last with chunk_start[node] <= c (warp-uniform).
    std::size_t lo = 0, hi = t.n_nodes;   // chunk_start[lo] <= c < chunk_start[hi]
    while (hi - lo > 1) {
      const std::size_t mid = (lo + hi) / 2;
      if (chunk_start[mid] <= c) lo = mid;
      else hi = mid;
    }
    const std::size_t node = lo;
    const std::uint64_t begin = offsets[node] + (c - chunk_start[node]) * chunk;
    const std::uint64_t end = begin + chunk < offsets[node + 1] ? begin + chunk : offsets[node + 1];
    double acc[kMaxPerLane] = {};
    m2l_tasks(tb, order, nm, nl, kernel, r_s, cut_shift, t, tasks, begin, end, centre_of(t.geometry[node]), box, m,
              sm[w], lev[w], acc);
    for (int j = 0; j < kMaxPerLane; ++j)
      if (lane + 32 * j < nl) partial[c * nl + lane + 32 * j] = acc[j];
  }
}

// M2L: a warp per target node (grid-stride): its tasks in list order, or, for a node split
// into chunks, its chunks' partial expansions added in chunk order. Either way a fixed order.
__global__ void m2l_kernel(Tables tb, int order, int nm, int nl, KernelKind kernel, double r_s, double cut_shift,
                           FmmTreeView t,
                           const InteractionTask* tasks, const std::uint64_t* offsets,
                           const std::uint32_t* chunk_start, const double* partial, double box, const double* m,
                           double* l, std::uint8_t* has_local) {
  __shared__ double sm[kWarps][kMaxNm];
  __shared__ double lev[kWarps][2][kMaxNl];
  const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * kWarps;
  for (std::size_t node = blockIdx.x * static_cast<std::size_t>(kWarps) + w; node < t.n_nodes; node += warps) {
    const std::uint64_t begin = offsets[node], end = offsets[node + 1];
    double acc[kMaxPerLane] = {};
    const std::uint32_t c0 = chunk_start[node], c1 = chunk_start[node + 1];
    if (c1 > c0) {
      for (std::uint32_t c = c0; c < c1; ++c)
        for (int j = 0; j < kMaxPerLane; ++j)
          if (lane + 32 * j < nl) acc[j] += partial[static_cast<std::size_t>(c) * nl + lane + 32 * j];
    } else {
      m2l_tasks(tb, order, nm, nl, kernel, r_s, cut_shift, t, tasks, begin, end, centre_of(t.geometry[node]), box, m,
                sm[w], lev[w], acc);
    }
    if (begin < end)   // a node without tasks keeps no local expansion unless L2L gives it one
      for (int j = 0; j < kMaxPerLane; ++j)
        if (lane + 32 * j < nl) l[node * nl + lane + 32 * j] = acc[j];
    if (lane == 0) has_local[node] = begin < end;
  }
}

// L2L for the children of the nodes of one depth: a warp per parent with a local
// expansion, lane k of each child adds its terms in the host's order.
__global__ void l2l_kernel(Tables tb, int nl, FmmTreeView t, const std::int32_t* level, std::uint32_t n_level,
                           double* l, std::uint8_t* has_local) {
  __shared__ double mono[kWarps][kMaxNl];
  const std::uint32_t item = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
  if (item >= n_level) return;
  const std::int32_t parent = level[item];
  const DeviceShapeNode nd = t.nodes[parent];
  if (nd.left < 0 || !has_local[parent]) return;
  const double* lp = l + static_cast<std::size_t>(parent) * nl;
  const std::int32_t children[2] = {nd.left, nd.right};
  for (const std::int32_t child : children) {
    const Vec3d d = centre_of(t.geometry[child]) - centre_of(t.geometry[parent]);
    const bool had = has_local[child];   // its own M2L; else its expansion starts at zero
    for (int i = lane; i < nl; i += 32) mono[w][i] = scaled_monomial(tb.mi + 3 * i, d.x, d.y, d.z);
    __syncwarp();
    double* lc = l + static_cast<std::size_t>(child) * nl;
    for (int k = lane; k < nl; k += 32) {
      double v = had ? lc[k] : 0.0;
      for (int q = tb.l2l_start[k]; q < tb.l2l_start[k + 1]; ++q)
        v = __dadd_rn(v, __dmul_rn(lp[tb.l2l_terms[2 * q]], mono[w][tb.l2l_terms[2 * q + 1]]));
      lc[k] = v;
    }
    if (lane == 0) has_local[child] = 1;
    __syncwarp();
  }
}

// L2P: a warp per leaf with a local expansion; per particle, lane i adds gradient term i,
// the warp sums in a fixed tree, lane 0 adds G m grad phi to the particle's acceleration.
__global__ void l2p_kernel(Tables tb, int nm, int nl, FmmTreeView t, const double* l, const std::uint8_t* has_local,
                           double g_mass, double* acc) {
  const std::size_t leaf = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (leaf >= t.n_leaves) return;
  const std::int32_t node = t.leaf_node[leaf];
  if (!has_local[node]) return;
  const DeviceShapeNode nd = t.nodes[node];
  const Vec3d c = centre_of(t.geometry[node]);
  const double* loc = l + static_cast<std::size_t>(node) * nl;
  for (std::uint32_t p = nd.first; p < nd.first + nd.count; ++p) {
    const Vec3d y = Vec3d{t.x[p], t.y[p], t.z[p]} - c;
    double g[3] = {0, 0, 0};
    for (int i = lane; i < nm; i += 32) {
      const double mono = scaled_monomial(tb.mi + 3 * i, y.x, y.y, y.z);
      for (int d = 0; d < 3; ++d) g[d] += loc[tb.plus_e[d * nm + i]] * mono;
    }
    for (int o = 16; o > 0; o /= 2)
      for (int d = 0; d < 3; ++d) g[d] += __shfl_down_sync(0xffffffffu, g[d], o);
    if (lane == 0)
      for (int d = 0; d < 3; ++d) acc[3 * static_cast<std::size_t>(p) + d] += g_mass * g[d];
  }
}


// P2L (vacuum leaf-cell pairs): a block per target node (grid-stride), its source leaves in
// list order and each leaf's particles in tree order, the k-th of them to warp k mod kWarps
// (a node facing many leaves is the longest item), which sums D_k(z - x_j) in registers,
// lane k for entry k; the warps' sums are added in warp order to the node's M2L expansion
// (or to zero, when it has none).
__global__ void __launch_bounds__(kThreads) p2l_kernel(Tables tb, int order, int nl, KernelKind kernel, double r_s,
                                                      FmmTreeView t, const InteractionTask* tasks,
                                                      const std::uint64_t* offsets, double* l,
                                                      std::uint8_t* has_local) {
  __shared__ double lev[kWarps][2][kMaxNl];
  __shared__ double part[kWarps][kMaxNl];
  const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
  const int q_order = order + 1;
  for (std::size_t node = blockIdx.x; node < t.n_nodes; node += gridDim.x) {
    const std::uint64_t begin = offsets[node], end = offsets[node + 1];
    if (begin == end) continue;   // block-uniform
    double acc[kMaxPerLane] = {};
    const Vec3d zt = centre_of(t.geometry[node]);
    std::uint32_t k = 0;   // the particle's place in the node's list
    for (std::uint64_t q = begin; q < end; ++q) {
      const DeviceShapeNode leaf = t.nodes[t.leaf_node[tasks[q].source]];
      for (std::uint32_t p = leaf.first; p < leaf.first + leaf.count; ++p, ++k) {
        if (k % kWarps != static_cast<std::uint32_t>(w)) continue;   // warp-uniform
        const Vec3d R = zt - Vec3d{t.x[p], t.y[p], t.z[p]};
        const double* D = derivative_tensor(tb, kernel, r_s, q_order, R, lev[w], lane);
        for (int j = 0; j < kMaxPerLane; ++j)
          if (lane + 32 * j < nl) acc[j] += D[lane + 32 * j];
        __syncwarp();   // lev is rewritten by the next particle
      }
    }
    for (int j = 0; j < kMaxPerLane; ++j)
      if (lane + 32 * j < nl) part[w][lane + 32 * j] = acc[j];
    __syncthreads();
    if (w == 0) {
      const bool had = has_local[node];
      double* ln = l + node * nl;
      for (int j = 0; j < kMaxPerLane; ++j) {
        const int e = lane + 32 * j;
        if (e >= nl) break;
        double sum = had ? ln[e] : 0.0;
        for (int v = 0; v < kWarps; ++v) sum += part[v][e];
        ln[e] = sum;
      }
      __syncwarp();   // every lane has read `had`
      if (lane == 0) has_local[node] = 1;
    }
    __syncthreads();   // part is rewritten for the next node
  }
}

// M2P (vacuum leaf-cell pairs): kM2PSlots warps per target leaf (grid-stride over leaf and
// slot), slot s taking the leaf's particles s, s + kM2PSlots, ... (a leaf facing many nodes
// is the longest item); per particle, its source nodes in list order, lane n adding
// (-1)^|n| M_n D_(n+e)(x - z) over its n and every task, the warp's sum in a fixed tree;
// lane 0 adds G m times it to the particle's acceleration.
constexpr unsigned kM2PSlots = 8;
__global__ void m2p_kernel(Tables tb, int order, int nm, KernelKind kernel, double r_s, FmmTreeView t,
                           const InteractionTask* tasks, const std::uint64_t* offsets, const double* m,
                           double g_mass, double* acc) {
  __shared__ double lev[kWarps][2][kMaxNl];
  const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
  const int q_order = order + 1;
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * kWarps;
  for (std::size_t item = blockIdx.x * static_cast<std::size_t>(kWarps) + w; item < t.n_leaves * kM2PSlots;
       item += warps) {
    const std::size_t leaf = item / kM2PSlots;
    const auto slot = static_cast<std::uint32_t>(item % kM2PSlots);
    const std::uint64_t begin = offsets[leaf], end = offsets[leaf + 1];
    if (begin == end) continue;   // warp-uniform
    const DeviceShapeNode nd = t.nodes[t.leaf_node[leaf]];
    for (std::uint32_t p = nd.first + slot; p < nd.first + nd.count; p += kM2PSlots) {
      const Vec3d x{t.x[p], t.y[p], t.z[p]};
      double g[3] = {0, 0, 0};
      for (std::uint64_t q = begin; q < end; ++q) {
        const std::uint32_t src = tasks[q].source;
        const double* D = derivative_tensor(tb, kernel, r_s, q_order, x - centre_of(t.geometry[src]), lev[w], lane);
        const double* ms = m + static_cast<std::size_t>(src) * nm;
        for (int n = lane; n < nm; n += 32) {
          const int* mi = tb.mi + 3 * n;
          const double sm = ((mi[0] + mi[1] + mi[2]) & 1) ? -ms[n] : ms[n];
          for (int d = 0; d < 3; ++d) g[d] += sm * D[tb.plus_e[d * nm + n]];
        }
        __syncwarp();   // lev is rewritten by the next task
      }
      for (int o = 16; o > 0; o /= 2)
        for (int d = 0; d < 3; ++d) g[d] += __shfl_down_sync(0xffffffffu, g[d], o);
      if (lane == 0)
        for (int d = 0; d < 3; ++d) acc[3 * static_cast<std::size_t>(p) + d] += g_mass * g[d];
    }
  }
}

// Only the M2L sources need multipoles, and M2M needs their subtrees (as the host's
// Multipoles::compute with `needed`): flag the sources, then every child of a flagged node.
__global__ void flag_sources(const InteractionTask* tasks, std::size_t count, std::uint8_t* wanted) {
  const std::size_t q = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (q < count) wanted[tasks[q].source] = 1;   // every writer writes 1
}
__global__ void flag_children(const std::int32_t* level, std::uint32_t n_level, const DeviceShapeNode* nodes,
                              std::uint8_t* wanted) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_level) return;
  const std::int32_t node = level[i];
  const DeviceShapeNode nd = nodes[node];
  if (nd.left >= 0 && wanted[node]) wanted[nd.left] = wanted[nd.right] = 1;
}

unsigned warp_blocks(std::size_t items) { return static_cast<unsigned>((items + kWarps - 1) / kWarps); }

}  // namespace

FmmTreeView fmm_tree_view(const DeviceOrbTree& tree) {
  FmmTreeView view;
  view.n_nodes = tree.n_nodes();
  view.n_leaves = tree.n_leaves();
  view.nodes = tree.shape_nodes();
  view.geometry = tree.geometry();
  view.leaf_node = tree.leaf_nodes();
  view.level_nodes = tree.level_nodes();
  view.level_offset = &tree.level_offsets();
  view.x = tree.tree_x();
  view.y = tree.tree_y();
  view.z = tree.tree_z();
  return view;
}

DeviceFmm::DeviceFmm(int multipole_order, double r_s, KernelKind kernel, double cut_shift)
    : order_(multipole_order),
      nm_(MultiIndexSet::count(multipole_order)),
      nl_(MultiIndexSet::count(multipole_order + 1)),
      r_s_(r_s),
      kernel_(kernel),
      cut_shift_(cut_shift) {
  if (multipole_order < 1 || multipole_order > 6) fail("device FMM: multipole_order = {} outside [1, 6]", multipole_order);
  if (kernel == KernelKind::truncated && !(r_s > 0)) fail("device FMM: r_s = {} must be > 0", r_s);
  const MultiIndexSet mset(multipole_order), lset(multipole_order + 1);
  std::vector<int> all;
  table_offsets_.clear();
  auto begin_table = [&] { table_offsets_.push_back(static_cast<int>(all.size())); };
  // mi
  begin_table();
  for (int i = 0; i < nl_; ++i)
    for (int d = 0; d < 3; ++d) all.push_back(lset[i][d]);
  // M2M: shift_terms of the multipole set are grouped by n in increasing order.
  const std::vector<ShiftTerm> m2m = shift_terms(mset);
  begin_table();
  {
    int q = 0;
    for (int n = 0; n <= nm_; ++n) {
      all.push_back(q);
      while (n < nm_ && q < static_cast<int>(m2m.size()) && m2m[static_cast<std::size_t>(q)].n == n) ++q;
    }
  }
  begin_table();
  for (const ShiftTerm& t : m2m) all.insert(all.end(), {t.k, t.diff});
  // L2L: the local set's terms, regrouped by the index they add to, each group in list order.
  const std::vector<ShiftTerm> l2l = shift_terms(lset);
  std::vector<std::vector<int>> by_k(static_cast<std::size_t>(nl_));
  for (const ShiftTerm& t : l2l) by_k[static_cast<std::size_t>(t.k)].insert(by_k[static_cast<std::size_t>(t.k)].end(), {t.n, t.diff});
  begin_table();
  {
    int q = 0;
    for (int k = 0; k <= nl_; ++k) {
      all.push_back(q);
      if (k < nl_) q += static_cast<int>(by_k[static_cast<std::size_t>(k)].size() / 2);
    }
  }
  begin_table();
  for (const auto& list : by_k) all.insert(all.end(), list.begin(), list.end());
  // M2L: for local k, the multipoles n with |n| + |k| <= p + 1 (a prefix of the layout).
  begin_table();
  for (int k = 0; k < nl_; ++k) {
    int c = 0;
    for (int n = 0; n < nm_; ++n) c += lset.degree(k) + mset.degree(n) <= multipole_order + 1;
    all.push_back(c);
  }
  begin_table();
  for (int k = 0; k < nl_; ++k)
    for (int n = 0; n < nm_; ++n) {
      const auto& kk = lset[k];
      const auto& nn = mset[n];
      all.push_back(lset.degree(k) + mset.degree(n) <= multipole_order + 1
                        ? lset.index(kk[0] + nn[0], kk[1] + nn[1], kk[2] + nn[2])
                        : -1);
    }
  // D recurrence steps (KernelDerivatives' steps) over the local set.
  begin_table();
  for (int i = 0; i < nl_; ++i) {
    if (i == 0) {
      all.insert(all.end(), {0, -1, -1, 0});
      continue;
    }
    auto n = lset[i];
    const int axis = n[0] > 0 ? 0 : (n[1] > 0 ? 1 : 2);
    auto m1 = n, m2 = n;
    m1[axis] -= 1;
    m2[axis] -= 2;
    all.insert(all.end(), {axis, lset.index(m1[0], m1[1], m1[2]), lset.index(m2[0], m2[1], m2[2]), n[axis] - 1});
  }
  // L2P: local index of gradient term i + e_d (the gradient set is the multipole set).
  begin_table();
  for (int d = 0; d < 3; ++d)
    for (int i = 0; i < nm_; ++i) {
      auto n = mset[i];
      n[d] += 1;
      all.push_back(lset.index(n[0], n[1], n[2]));
    }
  tables_.ensure(all.size());
  ORBIS_CUDA_CHECK(cudaMemcpy(tables_.data(), all.data(), all.size() * sizeof(int), cudaMemcpyHostToDevice));
}

std::size_t DeviceFmm::bytes_for(int multipole_order, std::size_t n_nodes) {
  const std::size_t per_node = (MultiIndexSet::count(multipole_order) + MultiIndexSet::count(multipole_order + 1)) *
                                   sizeof(double) + 1;
  // The M2L chunks' partial expansions and counts, and the counts' scan (m2l_chunk_kernel).
  const std::size_t chunks = kMaxM2LChunks * MultiIndexSet::count(multipole_order + 1) * sizeof(double) +
                             (n_nodes + 1) * sizeof(std::uint32_t) * 2;
  return n_nodes * per_node + n_nodes * per_node / 8 + chunks + 4096;
}

void DeviceFmm::release() {
  m_.release();
  l_.release();
  active_.release();
  wanted_.release();
  chunk_start_.release();
  partial_.release();
  scan_temp_.release();
}

void DeviceFmm::compute(const FmmTreeView& tree, const InteractionTask* m2l, const std::uint64_t* m2l_offsets,
                        std::size_t m2l_count, double box, double g_mass, double* acc, cudaStream_t stream,
                        const LeafCellLists& leaf_cell) {
  const std::size_t nn = tree.n_nodes;
  if (nn == 0) return;
  m_.ensure(nn * static_cast<std::size_t>(nm_));
  l_.ensure(nn * static_cast<std::size_t>(nl_));
  active_.ensure(nn);
  const int* base = tables_.data();
  const auto at = [&](int i) { return base + table_offsets_[static_cast<std::size_t>(i)]; };
  const Tables tb{at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7), at(8)};
  const std::vector<std::size_t>& off = *tree.level_offset;
  const int depths = static_cast<int>(off.size()) - 1;
  auto level = [&](int d) { return tree.level_nodes + off[static_cast<std::size_t>(d)]; };
  auto level_size = [&](int d) {
    return static_cast<std::uint32_t>(off[static_cast<std::size_t>(d) + 1] - off[static_cast<std::size_t>(d)]);
  };

  wanted_.ensure(nn);
  ORBIS_CUDA_CHECK(cudaMemsetAsync(wanted_.data(), 0, nn, stream));
  if (m2l_count > 0) {
    flag_sources<<<static_cast<unsigned>((m2l_count + 255) / 256), 256, 0, stream>>>(m2l, m2l_count, wanted_.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  if (leaf_cell.count > 0) {   // the M2P sources
    flag_sources<<<static_cast<unsigned>((leaf_cell.count + 255) / 256), 256, 0, stream>>>(
        leaf_cell.m2p, leaf_cell.count, wanted_.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  // A forest's levels between its top and its subtrees are empty: nothing is launched there.
  for (int d = 0; d + 1 < depths; ++d) {
    if (level_size(d) == 0) continue;
    flag_children<<<static_cast<unsigned>((level_size(d) + 255) / 256), 256, 0, stream>>>(
        level(d), level_size(d), tree.nodes, wanted_.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  p2m_kernel<<<warp_blocks(tree.n_leaves), kThreads, 0, stream>>>(tb, nm_, tree, wanted_.data(), m_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  for (int d = depths - 2; d >= 0; --d) {
    if (level_size(d) == 0) continue;
    m2m_kernel<<<warp_blocks(level_size(d)), kThreads, 0, stream>>>(tb, nm_, tree, level(d), level_size(d),
                                                                    wanted_.data(), m_.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  int device = 0, sms = 0;
  ORBIS_CUDA_CHECK(cudaGetDevice(&device));
  ORBIS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const auto m2l_grid = static_cast<unsigned>(std::min<std::size_t>(warp_blocks(nn), 16 * static_cast<std::size_t>(sms)));
  // The chunk: enough tasks that the chunks are at most kMaxM2LChunks (their partial
  // expansions' memory is bounded: bytes_for), at least kMinM2LChunk (a chunk is a warp's
  // work; below that the partials cost more than they save).
  const std::uint64_t chunk =
      std::max<std::uint64_t>(kMinM2LChunk, (2 * static_cast<std::uint64_t>(m2l_count) + kMaxM2LChunks - 1) / kMaxM2LChunks);
  const std::size_t max_chunks = std::min<std::size_t>(kMaxM2LChunks, 2 * m2l_count / chunk + 1);
  chunk_start_.ensure(nn + 1);
  m2l_chunk_counts<<<static_cast<unsigned>((nn + 1 + 255) / 256), 256, 0, stream>>>(m2l_offsets, nn, chunk,
                                                                                   chunk_start_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  scan_temp_.ensure(exclusive_sum_bytes(chunk_start_.data(), chunk_start_.data(), nn + 1));
  exclusive_sum(scan_temp_.data(), scan_temp_.capacity(), chunk_start_.data(), chunk_start_.data(), nn + 1, stream);
  partial_.ensure(max_chunks * static_cast<std::size_t>(nl_));
  const auto chunk_grid = static_cast<unsigned>(std::min<std::size_t>(warp_blocks(max_chunks), 16 * static_cast<std::size_t>(sms)));
  m2l_chunk_kernel<<<chunk_grid, kThreads, 0, stream>>>(tb, order_, nm_, nl_, kernel_, r_s_, cut_shift_, tree, m2l, m2l_offsets,
                                                        chunk_start_.data(), chunk, max_chunks, box, m_.data(),
                                                        partial_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  m2l_kernel<<<m2l_grid, kThreads, 0, stream>>>(tb, order_, nm_, nl_, kernel_, r_s_, cut_shift_, tree, m2l, m2l_offsets,
                                                chunk_start_.data(), partial_.data(), box, m_.data(), l_.data(),
                                                active_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  if (leaf_cell.count > 0) {
    const auto p2l_grid = static_cast<unsigned>(std::min<std::size_t>(nn, 16 * static_cast<std::size_t>(sms)));
    p2l_kernel<<<p2l_grid, kThreads, 0, stream>>>(tb, order_, nl_, kernel_, r_s_, tree, leaf_cell.p2l,
                                                  leaf_cell.p2l_offsets, l_.data(), active_.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  for (int d = 0; d + 1 < depths; ++d) {
    if (level_size(d) == 0) continue;
    l2l_kernel<<<warp_blocks(level_size(d)), kThreads, 0, stream>>>(tb, nl_, tree, level(d), level_size(d), l_.data(),
                                                                   active_.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  l2p_kernel<<<warp_blocks(tree.n_leaves), kThreads, 0, stream>>>(tb, nm_, nl_, tree, l_.data(), active_.data(),
                                                                  g_mass, acc);
  ORBIS_CUDA_CHECK(cudaGetLastError());
  if (leaf_cell.count > 0) {
    const auto grid = static_cast<unsigned>(
        std::min<std::size_t>(warp_blocks(tree.n_leaves * kM2PSlots), 16 * static_cast<std::size_t>(sms)));
    m2p_kernel<<<grid, kThreads, 0, stream>>>(tb, order_, nm_, kernel_, r_s_, tree, leaf_cell.m2p,
                                              leaf_cell.m2p_offsets, m_.data(), g_mass, acc);
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace orbis::gpu
