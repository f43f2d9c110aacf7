// The vacuum walk's leaf-cell pairs on the device (gpu/fmm_cuda.cuh): P2L, a leaf's
// particles into a node's local expansion, and M2P, a node's multipoles at a leaf's
// particles. In an isolated system the few nodes of the core receive ~1e4 leaves each (P2L)
// and the outer leaves face many core nodes (M2P): a target with more tasks than a chunk has
// its tasks done in chunks, a warp each, into partial sums that are then added in chunk
// order; every other target is done whole by one warp (P2L) or by kM2PSlots warps (M2P).
// Every sum has a fixed order, so the result is bitwise the same run after run.
#include <algorithm>

#include "core/error.hpp"
#include "gpu/cub_counts.cuh"
#include "gpu/fmm_cuda_kernels.cuh"

namespace orbis::gpu::fmm_detail {
namespace {

// P2L of tasks [begin, end) of one target node (centre zt): each source leaf's particles
// in tree order, D_k(zt - x_j) (times w_j with weights, the product rounded: w = 1 gives
// the unweighted bits) added to the warp's acc (lane k holds entries k + 32 j).
__device__ void p2l_tasks(const Tables& tb, int q_order, int nl, KernelKind kernel, double r_s, double eps2, const FmmTreeView& t,
                          const InteractionTask* tasks, std::uint64_t begin, std::uint64_t end, const Vec3d& zt,
                          double (*lev)[kMaxNl], double* acc) {
  const int lane = threadIdx.x & 31;
  for (std::uint64_t q = begin; q < end; ++q) {
    const DeviceShapeNode leaf = t.nodes[t.leaf_node[tasks[q].source]];
    for (std::uint32_t p = leaf.first; p < leaf.first + leaf.count; ++p) {
      const Vec3d R = zt - Vec3d{t.x[p], t.y[p], t.z[p]};
      const double* D = derivative_tensor(tb, kernel, r_s, q_order, R, lev, lane, 0.0, eps2);
      if (t.w) {   // warp-uniform
        const double w = t.w[p];
        for (int j = 0; j < kMaxPerLane; ++j)
          if (lane + 32 * j < nl) acc[j] += __dmul_rn(w, D[lane + 32 * j]);
      } else {
        for (int j = 0; j < kMaxPerLane; ++j)
          if (lane + 32 * j < nl) acc[j] += D[lane + 32 * j];
      }
      __syncwarp();   // lev is rewritten by the next particle
    }
  }
}

// A warp per P2L chunk (grid-stride up to max_chunks; those beyond the total do nothing):
// the chunk's partial local expansion, its tasks in list order, into partial[c * nl ...].
__global__ void __launch_bounds__(kThreads) p2l_chunk_kernel(Tables tb, int order, int nl, KernelKind kernel,
                                                             double r_s, double eps2, FmmTreeView t, const InteractionTask* tasks,
                                                             const std::uint64_t* offsets,
                                                             const std::uint32_t* chunk_start, std::uint64_t chunk,
                                                             std::size_t max_chunks, double* partial) {
  __shared__ double lev[kWarps][2][kMaxNl];
  const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
  const std::uint32_t total = chunk_start[t.n_nodes];
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * kWarps;
  for (std::size_t c = blockIdx.x * static_cast<std::size_t>(kWarps) + w; c < max_chunks && c < total; c += warps) {
    const std::size_t node = owner_of(chunk_start, t.n_nodes, c);
    const std::uint64_t begin = offsets[node] + (c - chunk_start[node]) * chunk;
    const std::uint64_t end = begin + chunk < offsets[node + 1] ? begin + chunk : offsets[node + 1];
    double acc[kMaxPerLane] = {};
    p2l_tasks(tb, order + 1, nl, kernel, r_s, eps2, t, tasks, begin, end, centre_of(t.geometry[node]), lev[w], acc);
    for (int j = 0; j < kMaxPerLane; ++j)
      if (lane + 32 * j < nl) partial[c * nl + lane + 32 * j] = acc[j];
  }
}

// P2L: a warp per target node with tasks (grid-stride): its chunks' partial expansions added
// in chunk order, or, for a node not split into chunks, its tasks in list order; the sum is
// added to the node's M2L expansion (or to zero, when it has none).
__global__ void __launch_bounds__(kThreads) p2l_kernel(Tables tb, int order, int nl, KernelKind kernel, double r_s, double eps2,
                                                      FmmTreeView t, const InteractionTask* tasks,
                                                      const std::uint64_t* offsets, const std::uint32_t* chunk_start,
                                                      const double* partial, double* l, std::uint8_t* has_local) {
  __shared__ double lev[kWarps][2][kMaxNl];
  const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * kWarps;
  for (std::size_t node = blockIdx.x * static_cast<std::size_t>(kWarps) + w; node < t.n_nodes; node += warps) {
    const std::uint64_t begin = offsets[node], end = offsets[node + 1];
    if (begin == end) continue;   // warp-uniform
    double acc[kMaxPerLane] = {};
    const std::uint32_t c0 = chunk_start[node], c1 = chunk_start[node + 1];
    if (c1 > c0) {
      add_chunk_partials(partial, c0, c1, nl, lane, acc);
    } else {
      p2l_tasks(tb, order + 1, nl, kernel, r_s, eps2, t, tasks, begin, end, centre_of(t.geometry[node]), lev[w], acc);
    }
    const bool had = has_local[node];
    double* ln = l + node * nl;
    for (int j = 0; j < kMaxPerLane; ++j) {
      const int e = lane + 32 * j;
      if (e < nl) ln[e] = (had ? ln[e] : 0.0) + acc[j];
    }
    __syncwarp();   // every lane has read `had`
    if (lane == 0) has_local[node] = 1;
  }
}

// grad phi at x of the multipoles of source nodes tasks[begin, end), in list order: lane n
// adds (-1)^|n| M_n D_(n+e)(x - z) over its n and every task, then the warp's sum in a fixed
// tree, in lane 0's g.
__device__ void m2p_tasks(const Tables& tb, int q_order, int nm, KernelKind kernel, double r_s, double eps2, const FmmTreeView& t,
                          const InteractionTask* tasks, std::uint64_t begin, std::uint64_t end, const Vec3d& x,
                          const double* m, double (*lev)[kMaxNl], double* g) {
  const int lane = threadIdx.x & 31;
  g[0] = g[1] = g[2] = 0;
  for (std::uint64_t q = begin; q < end; ++q) {
    const std::uint32_t src = tasks[q].source;
    const double* D = derivative_tensor(tb, kernel, r_s, q_order, x - centre_of(t.geometry[src]), lev, lane, 0.0, eps2);
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
}

// M2P chunks. A leaf's work is its tasks times its particles; W (the sum over leaves) sets
// the chunk (chunk_tasks with the partial entries' bound: a chunked leaf of n tasks and k
// particles has ceil(n / chunk) k <= 2 n k / chunk entries, so at most max_entries in all).
// work[leaf] = its work, work[n_leaves] = 0: after the exclusive scan, work[n_leaves] = W.
__global__ void m2p_leaf_work(FmmTreeView t, const std::uint64_t* offsets, std::uint64_t* work) {
  const std::size_t leaf = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (leaf > t.n_leaves) return;
  work[leaf] = leaf == t.n_leaves ? 0
                                  : (offsets[leaf + 1] - offsets[leaf]) * t.nodes[t.leaf_node[leaf]].count;
}

__device__ __forceinline__ std::uint64_t m2p_chunk(const std::uint64_t* work_scan, std::size_t n_leaves,
                                                   std::uint64_t min_chunk, std::uint64_t max_entries) {
  const std::uint64_t c = (2 * work_scan[n_leaves] + max_entries - 1) / max_entries;
  return c > min_chunk ? c : min_chunk;
}

// Per leaf, its chunks (0 when it has at most a chunk of tasks: done whole) and their
// partial entries (chunks times particles); both 0 at [n_leaves], for the scans' totals.
__global__ void m2p_chunk_counts(FmmTreeView t, const std::uint64_t* offsets, const std::uint64_t* work_scan,
                                 std::uint64_t min_chunk, std::uint64_t max_entries, std::uint32_t* chunks,
                                 std::uint32_t* entries) {
  const std::size_t leaf = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (leaf > t.n_leaves) return;
  if (leaf == t.n_leaves) {
    chunks[leaf] = entries[leaf] = 0;
    return;
  }
  const std::uint64_t chunk = m2p_chunk(work_scan, t.n_leaves, min_chunk, max_entries);
  const std::uint64_t n = offsets[leaf + 1] - offsets[leaf];
  const std::uint64_t c = n > chunk ? (n + chunk - 1) / chunk : 0;
  chunks[leaf] = static_cast<std::uint32_t>(c);
  entries[leaf] = static_cast<std::uint32_t>(c * t.nodes[t.leaf_node[leaf]].count);
}

// A warp per M2P chunk of a chunked leaf (grid-stride): at each of the leaf's particles in
// tree order, the field of the chunk's tasks in list order, into the chunk's partial
// entries partial[3 (entry_start[leaf] + k count + i) + d] (chunk k of the leaf, particle i).
__global__ void __launch_bounds__(kThreads) m2p_chunk_kernel(Tables tb, int order, int nm, KernelKind kernel,
                                                             double r_s, double eps2, FmmTreeView t, const InteractionTask* tasks,
                                                             const std::uint64_t* offsets,
                                                             const std::uint64_t* work_scan, std::uint64_t min_chunk,
                                                             std::uint64_t max_entries,
                                                             const std::uint32_t* chunk_start,
                                                             const std::uint32_t* entry_start, const double* m,
                                                             double* partial) {
  __shared__ double lev[kWarps][2][kMaxNl];
  const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
  const std::uint32_t total = chunk_start[t.n_leaves];
  const std::uint64_t chunk = m2p_chunk(work_scan, t.n_leaves, min_chunk, max_entries);
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * kWarps;
  for (std::size_t c = blockIdx.x * static_cast<std::size_t>(kWarps) + w; c < total; c += warps) {
    const std::size_t leaf = owner_of(chunk_start, t.n_leaves, c);
    const std::uint64_t k = c - chunk_start[leaf];
    const std::uint64_t begin = offsets[leaf] + k * chunk;
    const std::uint64_t end = begin + chunk < offsets[leaf + 1] ? begin + chunk : offsets[leaf + 1];
    const DeviceShapeNode nd = t.nodes[t.leaf_node[leaf]];
    double* out = partial + 3 * (entry_start[leaf] + k * nd.count);
    for (std::uint32_t i = 0; i < nd.count; ++i) {
      const std::uint32_t p = nd.first + i;
      double g[3];
      m2p_tasks(tb, order + 1, nm, kernel, r_s, eps2, t, tasks, begin, end, Vec3d{t.x[p], t.y[p], t.z[p]}, m, lev[w], g);
      if (lane == 0)
        for (int d = 0; d < 3; ++d) out[3 * i + d] = g[d];
    }
  }
}

// M2P: kM2PSlots warps per target leaf (grid-stride over leaf and slot), slot s taking the
// leaf's particles s, s + kM2PSlots, ...: for a leaf done whole, per particle its source
// nodes in list order (m2p_tasks); for a chunked leaf, lane i of the slot's warp adds the
// partial entries of its particle in chunk order. G m times the field is added to the
// particle's acceleration.
constexpr unsigned kM2PSlots = 8;
__global__ void __launch_bounds__(kThreads) m2p_kernel(Tables tb, int order, int nm, KernelKind kernel, double r_s, double eps2,
                                                      FmmTreeView t, const InteractionTask* tasks,
                                                      const std::uint64_t* offsets, const std::uint32_t* chunk_start,
                                                      const std::uint32_t* entry_start, const double* partial,
                                                      const double* m, double g_mass, double* acc) {
  __shared__ double lev[kWarps][2][kMaxNl];
  const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * kWarps;
  for (std::size_t item = blockIdx.x * static_cast<std::size_t>(kWarps) + w; item < t.n_leaves * kM2PSlots;
       item += warps) {
    const std::size_t leaf = item / kM2PSlots;
    const auto slot = static_cast<std::uint32_t>(item % kM2PSlots);
    const std::uint64_t begin = offsets[leaf], end = offsets[leaf + 1];
    if (begin == end) continue;   // warp-uniform
    const DeviceShapeNode nd = t.nodes[t.leaf_node[leaf]];
    const std::uint32_t chunks = chunk_start[leaf + 1] - chunk_start[leaf];
    if (chunks > 0) {
      const double* part = partial + 3 * static_cast<std::size_t>(entry_start[leaf]);
      for (std::uint32_t i = slot + kM2PSlots * lane; i < nd.count; i += kM2PSlots * 32) {
        double g[3] = {0, 0, 0};
        for (std::uint32_t k = 0; k < chunks; ++k)
          for (int d = 0; d < 3; ++d) g[d] += part[3 * (static_cast<std::size_t>(k) * nd.count + i) + d];
        for (int d = 0; d < 3; ++d) acc[3 * static_cast<std::size_t>(nd.first + i) + d] += g_mass * g[d];
      }
      continue;
    }
    for (std::uint32_t p = nd.first + slot; p < nd.first + nd.count; p += kM2PSlots) {
      double g[3];
      m2p_tasks(tb, order + 1, nm, kernel, r_s, eps2, t, tasks, begin, end, Vec3d{t.x[p], t.y[p], t.z[p]}, m, lev[w], g);
      if (lane == 0)
        for (int d = 0; d < 3; ++d) acc[3 * static_cast<std::size_t>(p) + d] += g_mass * g[d];
    }
  }
}

}  // namespace

void p2l(const Pass& pass, const LeafCellLists& lists, std::uint64_t min_chunk, std::uint64_t max_chunks,
         const ChunkArrays& arrays, double* l, std::uint8_t* has_local) {
  const std::size_t nn = pass.t.n_nodes;
  const std::uint64_t chunk = chunk_tasks(lists.count, min_chunk, max_chunks);
  const std::size_t bound = chunks_bound(lists.count, chunk, max_chunks);
  if (bound * static_cast<std::size_t>(pass.nl) > arrays.partial_doubles)
    fail("internal: P2L chunks need {} doubles, {} given", bound * pass.nl, arrays.partial_doubles);
  scan_task_chunks(pass, lists.p2l_offsets, nn, chunk, arrays, arrays.totals + 1);
  p2l_chunk_kernel<<<stride_grid(bound, pass.sms), kThreads, 0, pass.stream>>>(
      pass.tb, pass.order, pass.nl, pass.kernel, pass.r_s, pass.eps2, pass.t, lists.p2l, lists.p2l_offsets, arrays.chunk_start,
      chunk, bound, arrays.partial);
  ORBIS_CUDA_CHECK(cudaGetLastError());
  p2l_kernel<<<stride_grid(nn, pass.sms), kThreads, 0, pass.stream>>>(pass.tb, pass.order, pass.nl, pass.kernel,
                                                                      pass.r_s, pass.eps2, pass.t, lists.p2l, lists.p2l_offsets,
                                                                      arrays.chunk_start, arrays.partial, l, has_local);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

void m2p(const Pass& pass, const LeafCellLists& lists, std::uint64_t min_chunk, const ChunkArrays& arrays,
         const double* m, double g_mass, double* acc) {
  const std::size_t n = pass.t.n_leaves;
  const std::uint64_t max_entries = arrays.partial_doubles / 3;
  if (max_entries == 0) fail("internal: M2P chunks given no partial entries");
  const auto blocks = static_cast<unsigned>((n + 1 + 255) / 256);
  m2p_leaf_work<<<blocks, 256, 0, pass.stream>>>(pass.t, lists.m2p_offsets, arrays.leaf_work);
  ORBIS_CUDA_CHECK(cudaGetLastError());
  DeviceArray<unsigned char>& temp = *arrays.scan_temp;
  temp.ensure(std::max(exclusive_sum_bytes(arrays.leaf_work, arrays.leaf_work, n + 1),
                       exclusive_sum_bytes(arrays.chunk_start, arrays.chunk_start, n + 1)));
  exclusive_sum(temp.data(), temp.capacity(), arrays.leaf_work, arrays.leaf_work, n + 1, pass.stream);
  m2p_chunk_counts<<<blocks, 256, 0, pass.stream>>>(pass.t, lists.m2p_offsets, arrays.leaf_work, min_chunk,
                                                     max_entries, arrays.chunk_start, arrays.entry_start);
  ORBIS_CUDA_CHECK(cudaGetLastError());
  exclusive_sum(temp.data(), temp.capacity(), arrays.chunk_start, arrays.chunk_start, n + 1, pass.stream);
  exclusive_sum(temp.data(), temp.capacity(), arrays.entry_start, arrays.entry_start, n + 1, pass.stream);
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(arrays.totals + 2, arrays.chunk_start + n, sizeof(std::uint32_t),
                                   cudaMemcpyDeviceToDevice, pass.stream));
  // The chunks' count is known on the device only: a full grid, whose warps beyond it stop.
  m2p_chunk_kernel<<<stride_grid(16 * kWarps * static_cast<std::size_t>(pass.sms), pass.sms), kThreads, 0,
                     pass.stream>>>(pass.tb, pass.order, pass.nm, pass.kernel, pass.r_s, pass.eps2, pass.t, lists.m2p,
                                    lists.m2p_offsets, arrays.leaf_work, min_chunk, max_entries, arrays.chunk_start,
                                    arrays.entry_start, m, arrays.partial);
  ORBIS_CUDA_CHECK(cudaGetLastError());
  m2p_kernel<<<stride_grid(n * kM2PSlots, pass.sms), kThreads, 0, pass.stream>>>(
      pass.tb, pass.order, pass.nm, pass.kernel, pass.r_s, pass.eps2, pass.t, lists.m2p, lists.m2p_offsets, arrays.chunk_start,
      arrays.entry_start, arrays.partial, m, g_mass, acc);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace orbis::gpu::fmm_detail
