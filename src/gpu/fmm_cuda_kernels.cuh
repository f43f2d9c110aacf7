// Internals of the device far field (gpu/fmm_cuda.cuh), shared by its two files:
// fmm_cuda.cu (P2M, M2M, M2L, L2L, L2P) and fmm_cuda_vacuum.cu (the Newtonian kernel's
// per-thread M2L and the vacuum walk's leaf-cell pairs, P2L and M2P). The launch shape, the index tables as device pointers, the
// device helpers both use, and the task chunks: a target with more tasks than a chunk has
// them done in chunks, a warp each, and their partial sums are then added in chunk order,
// so the few targets with thousands of tasks (the core of an isolated system, a sub-step's
// few active targets) do not keep one warp busy while the GPU idles, and every sum keeps a
// fixed order (no atomics).
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include "core/error.hpp"
#include "core/vec3.hpp"
#include "fmm/kernel_derivatives.hpp"
#include "gpu/device_buffer.cuh"
#include "gpu/device_memory_plan.hpp"
#include "gpu/fmm_cuda.cuh"
#include "gpu/orb_tree_cuda.cuh"
#include "tree/multi_index.hpp"

namespace orbis::gpu::fmm_detail {

inline constexpr int kWarps = 4;   // per block: one item (leaf, node, chunk) per warp
inline constexpr int kThreads = 32 * kWarps;
inline constexpr int kMaxNm = MultiIndexSet::count(6);   // multipoles of the highest order
inline constexpr int kMaxNl = MultiIndexSet::count(7);   // its local expansion
inline constexpr int kMaxPerLane = (kMaxNl + 31) / 32;

// The index tables of the periodic runs' warp-wide M2L, as device pointers into one array
// (DeviceFmm::tables_). The per-thread operators unroll theirs at compile time.
struct Tables {
  const int* mi;          // (a, b, c) of each local-set index (the multipole set is its prefix)
  const int* m2l_count;   // M2L: multipoles n < count[k] reach local k ...
  const int* m2l_kn;      // ... at D_(n+k), index kn[k * nm + n]
  const int* steps;       // D recurrence of index i: (axis, i - e, i - 2e or -1, n_axis - 1)
};

// What the chunked passes of one compute() read (the per-thread M2L, P2L and M2P, and the
// chunk scans): the multipole order (nl locals to order + 1), the kernel and its softening,
// the tree, the stream and the device's SMs.
struct Pass {
  int order = 0, nl = 0;
  KernelKind kernel = KernelKind::truncated;
  double eps2 = 0;   // the Newtonian kernel's softening squared
  FmmTreeView t;
  int sms = 1;
  cudaStream_t stream = nullptr;
};

// The chunked passes' shared arrays (DeviceFmm's, sized by compute()). The passes run one
// after the other on one stream, so each reuses them. chunk_start: [n_nodes + 1], the scanned
// chunk counts of the pass's targets; partial: `partial_doubles` doubles, the chunks'
// partial sums; M2P also scans its leaves' work (leaf_work, [n_leaves + 1]) and partial
// entries (entry_start, [n_leaves + 1]); totals[3]: the chunks of M2L, P2L and M2P (device,
// for tests).
struct ChunkArrays {
  std::uint32_t* chunk_start = nullptr;
  std::uint32_t* entry_start = nullptr;
  std::uint64_t* leaf_work = nullptr;
  double* partial = nullptr;
  std::size_t partial_doubles = 0;
  DeviceArray<unsigned char>* scan_temp = nullptr;
  std::uint32_t* totals = nullptr;
};

// The chunk of a list of `count` tasks grouped by target: at least min_chunk tasks, and
// enough that a target split into chunks (more than one chunk of tasks: ceil(n / chunk) <=
// 2 n / chunk chunks) gives at most max_chunks chunks in all.
inline std::uint64_t chunk_tasks(std::uint64_t count, std::uint64_t min_chunk, std::uint64_t max_chunks) {
  const std::uint64_t c = (2 * count + max_chunks - 1) / max_chunks;
  return c > min_chunk ? c : min_chunk;
}
// The most chunks a list of `count` tasks in chunks of `chunk` gives (a launch's grid).
inline std::size_t chunks_bound(std::uint64_t count, std::uint64_t chunk, std::uint64_t max_chunks) {
  const std::uint64_t b = 2 * count / chunk + 1;
  return static_cast<std::size_t>(b < max_chunks ? b : max_chunks);
}

// Queues chunk_start[i] = the chunks of targets 0 .. i - 1 (i <= n; chunk_start[n] the
// total, copied to *total) for tasks grouped by target (offsets[n + 1]): a target with more
// than `chunk` tasks has ceil(tasks / chunk) chunks, the others none (done whole).
void scan_task_chunks(const Pass& pass, const std::uint64_t* offsets, std::size_t n, std::uint64_t chunk,
                      const ChunkArrays& arrays, std::uint32_t* total);

// The length the float copy divides a node's moments by (M_n / r^|n|): its radius, or 1 for
// a node of coincident particles (radius 0, whose moments beyond the mass are 0).
__device__ __forceinline__ double multipole_scale(double radius) { return radius > 0 ? radius : 1.0; }

// The Newtonian kernel's M2L (fmm_cuda_vacuum.cu), queued on pass.stream: the tasks grouped
// by target node (offsets[n_nodes + 1]) in chunks of `chunk` (at most max_chunks), into the
// local expansions l; sets has_local of every node. Chunk counts in arrays.totals[0].
void m2l_newtonian(const Pass& pass, const InteractionTask* tasks, const std::uint64_t* offsets, std::uint64_t chunk,
                   std::size_t max_chunks, const ChunkArrays& arrays, const float* m, double* l,
                   std::uint8_t* has_local);

// The vacuum walk's leaf-cell pairs (fmm_cuda_vacuum.cu), queued on pass.stream.
// P2L into the local expansions l (after M2L, before L2L; sets has_local of its targets);
// min_chunk, max_chunks as M2L's.
void p2l(const Pass& pass, const LeafCellLists& lists, std::uint64_t min_chunk, std::uint64_t max_chunks,
         const ChunkArrays& arrays, double* l, std::uint8_t* has_local);
// M2P of the multipoles m (in float: DeviceFmm's copy) onto the target leaves' particles:
// acc[3 t + d] += g_mass * grad phi. Its chunks' partial entries (a particle's field from one chunk, 3
// doubles) are at most arrays.partial_doubles / 3.
void m2p(const Pass& pass, const LeafCellLists& lists, std::uint64_t min_chunk, const ChunkArrays& arrays,
         const float* m, double g_mass, double* acc);

__device__ __forceinline__ Vec3d centre_of(const DeviceNodeGeometry& g) { return Vec3d{g.centre[0], g.centre[1], g.centre[2]}; }

// D_n(R) for |n| <= q_order into lev[0] (the warp's two level buffers): the radial
// factors (every lane), then the recurrence a level per step, lanes over its entries; every
// lane returns the pointer, after the warp's last write. cut_shift: the truncated kernel's
// shifted cut, eps2: the Newtonian kernel's softening squared (fmm/kernel_derivatives.hpp).
__device__ inline const double* derivative_tensor(const Tables& tb, KernelKind kernel, double r_s, int q_order,
                                                  const Vec3d& R, double (*lev)[kMaxNl], int lane,
                                                  double cut_shift = 0, double eps2 = 0) {
  double g[9];
  radial_derivatives(kernel, sqrt(norm2(R)), r_s, q_order, g, cut_shift, eps2);
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

// The target whose chunks hold chunk c: the last i < n with start[i] <= c, for a scan
// start[0 .. n] with start[0] = 0 <= c < start[n] (warp-uniform when c is).
__device__ inline std::size_t owner_of(const std::uint32_t* start, std::size_t n, std::size_t c) {
  std::size_t lo = 0, hi = n;   // start[lo] <= c < start[hi]
  while (hi - lo > 1) {
    const std::size_t mid = (lo + hi) / 2;
    if (start[mid] <= c) lo = mid;
    else hi = mid;
  }
  return lo;
}

// f(integral_constant<int, p>) for the multipole order p of a pass (1 .. 6, DeviceFmm's range).
template <typename F>
inline void with_order(int order, F&& f) {
  switch (order) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 3: f(std::integral_constant<int, 3>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 5: f(std::integral_constant<int, 5>{}); break;
    case 6: f(std::integral_constant<int, 6>{}); break;
    default: fail("internal: device FMM of multipole order {} (1 .. 6)", order);
  }
}

inline unsigned warp_blocks(std::size_t items) { return static_cast<unsigned>((items + kWarps - 1) / kWarps); }
// A grid-stride launch's grid: enough warps for the items, at most 16 blocks per SM.
inline unsigned stride_grid(std::size_t warps, int sms) {
  const std::size_t cap = 16 * static_cast<std::size_t>(sms);
  return static_cast<unsigned>(warps == 0 ? 1 : (warp_blocks(warps) < cap ? warp_blocks(warps) : cap));
}

// A target's chunks [c0, c1) of partial expansions (nl coefficients each, in chunk order) added
// into the lane's coefficients acc[j] = coefficient lane + 32 j: the fixed order that makes a
// chunked target's sum the same bits from run to run.
__device__ inline void add_chunk_partials(const double* partial, std::uint32_t c0, std::uint32_t c1, int nl, int lane,
                                          double* acc) {
  for (std::uint32_t c = c0; c < c1; ++c)
    for (int j = 0; j < kMaxPerLane; ++j)
      if (lane + 32 * j < nl) acc[j] += partial[static_cast<std::size_t>(c) * nl + lane + 32 * j];
}

}  // namespace orbis::gpu::fmm_detail
