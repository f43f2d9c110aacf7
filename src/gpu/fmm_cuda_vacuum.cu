// The vacuum far field's operators on the device (gpu/fmm_cuda.cuh), Newtonian kernel only:
// M2L, and the vacuum walk's leaf-cell pairs, P2L (a leaf's particles into a node's local
// expansion) and M2P (a node's multipoles at a leaf's particles). Each puts a thread on one
// pair (a warp per target or chunk: lanes over the target's source nodes for M2L, over the
// particles of the leaf for P2L and M2P) and makes the pair's derivative tensor in registers
// (gpu/fmm_cuda_tensor.cuh), with the order p a template argument. At 10^6 particles an
// isolated system has ~8e6 M2L and ~6e7 P2L and M2P pairs; the warp-wide operators of
// fmm_cuda.cu, which make one tensor at a time a level per step, took 0.11 s for them (the
// periodic runs keep those: their ~1e4 M2L a step cost ~1 ms, and their bits stay).
// The few core nodes of an isolated system receive ~1e4 leaves each (P2L) and the outer
// leaves face many core nodes (M2P): a target with more tasks than a chunk has its tasks done
// in chunks, a warp each, into partial sums that are then added in chunk order; every other
// target is done whole by one warp. Every sum has a fixed order, so the result is bitwise the
// same run after run.
// The three are in float, as the P2P's particle pairs (twice the throughput, half the
// registers and shared memory: M2L no longer spills at p = 4 and 5): each pair's terms
// scaled to fit a float at any distance and node size, summed in float over at most a
// chunk of tasks, then in double; the expansions themselves (P2M, M2M, L2L, L2P) stay in
// double. They move a force by ~1e-6 of itself, against the expansions' 1e-4 .. 1e-3.
#include <algorithm>
#include <type_traits>

#include "core/error.hpp"
#include "fmm/multi_index_ct.hpp"
#include "gpu/cub_counts.cuh"
#include "gpu/fmm_cuda_kernels.cuh"
#include "gpu/fmm_cuda_tensor.cuh"

namespace orbis::gpu::fmm_detail {
namespace {

// M2L and P2L sum a local expansion per lane in registers (floats fit beside the tensor),
// then store it in shared memory for the reduction over the lanes: entry k of lane j at
// [k][j] of the block's (one warp's) array, rows padded to 33 so that both the lanes' stores
// of one k and the reduction's reads of one j spread over the banks. The sums are floats: a
// lane adds at most a chunk of tasks (tens to hundreds of terms: ~1e-6 of the sum at worst),
// and the lanes' sums are then added in double.
constexpr int kRow = 33;
template <int P> constexpr int local_count() { return ct::count(P + 1); }
template <int P, typename S> constexpr std::size_t lane_sums_bytes() { return sizeof(S) * local_count<P>() * kRow; }
// M2L and P2L are one warp a block: their shared sums (7 KB at p = 4, 16 KB at p = 6) bound
// the warps an SM holds, and single-warp blocks fill that bound in any order.
constexpr int kLaneSumThreads = 32;

// Lane k sums row k over the lanes in lane order, in double, into acc[j], entry k = lane + 32 j,
// times inv_scale^(|k| + 1) (P2L's sums are of scaled terms; M2L's inv_scale is 1: no change).
template <int P, typename S>
__device__ __forceinline__ void reduce_lane_sums(const S* sh, double* acc, double inv_scale = 1.0) {
  const int lane = threadIdx.x & 31;
  __syncwarp();
  for (int j = 0; j < kMaxPerLane; ++j) {
    const int k = lane + 32 * j;
    if (k >= local_count<P>()) break;
    double s = 0;
    for (int l = 0; l < 32; ++l) s += static_cast<double>(sh[k * kRow + l]);
    if (inv_scale != 1.0) {
      double f = inv_scale;   // the layout is by degree: |k| is the first d with k < count(d)
      for (int d = 0; k >= ct::count(d); ++d) f *= inv_scale;
      s *= f;
    }
    acc[j] = s;
  }
  __syncwarp();   // sh is zeroed again for the warp's next target
}

// The length M2L's and P2L's terms are scaled by: the target's radius S, or for a target of
// coincident particles (radius 0) the softened distance to its first source point.
__device__ __forceinline__ double target_scale(const DeviceNodeGeometry& target, const Vec3d& first_source,
                                               double eps2) {
  return target.radius > 0 ? target.radius : sqrt(norm2(centre_of(target) - first_source) + eps2);
}

// M2L: for local k, the multipoles n that reach it, |n| <= min(p, p + 1 - |k|) (a prefix of
// the layout, as DeviceFmm's m2l_count table).
template <int P>
constexpr int m2l_terms(int k) {
  const int room = P + 1 - ct::kAll[static_cast<std::size_t>(k)].degree();
  return ct::count(room < P ? room : P);
}

// M2L of tasks [begin, end) (at least one) of one target node: lane j takes tasks begin + j,
// begin + j + 32, ... (image 0: vacuum), makes D to order p + 1 of R = z - z_source and adds
// sum_n (-1)^|n| M_n D_(n+k) to its shared L_k, in float as P2L and M2P; then the lanes'
// sums into acc (reduce_lane_sums). Scaled as P2L's terms, by the target's radius S (an
// accepted source lies beyond S / theta, so every D_(n+k)(R / S) is at most (2p+1)!!): the
// terms (-1)^|n| [mf_n (r / S)^|n|] D_(n+k)(R / S; eps / S) = S^(|k|+1) times the unscaled
// ones, mf the source's multipoles over its radius r to the |n| (DeviceFmm's float copy).
template <int P>
__device__ void m2l_tasks(double eps2, const FmmTreeView& t, const InteractionTask* tasks, std::uint64_t begin,
                          std::uint64_t end, const DeviceNodeGeometry& target, const float* mf, float* sh,
                          double* acc) {
  constexpr int nl = local_count<P>(), nm = ct::count(P);
  const int lane = threadIdx.x & 31;
  const Vec3d zt = centre_of(target);
  const double scale = target_scale(target, centre_of(t.geometry[tasks[begin].source]), eps2);
  const double inv = 1.0 / scale;
  const auto eps2f = static_cast<float>(eps2 * inv * inv);
  float lane_sum[nl];
  ct::unroll<nl>([&](auto k) { lane_sum[k] = 0; });
  constexpr int stride = float_multipole_stride(nm);
  for (std::uint64_t q = begin + lane; q < end; q += 32) {
    const std::uint32_t src = tasks[q].source;
    // Each lane reads another node: its centre and radius in two 16-byte loads, its
    // multipoles in float4s (loads of 4 or 8 bytes each cost a cache wavefront a lane).
    const auto* cr = reinterpret_cast<const double2*>(t.geometry[src].centre);
    const double2 c01 = cr[0], c2r = cr[1];
    const Vec3d r = (zt - Vec3d{c01.x, c01.y, c2r.x}) * inv;
    float D[nl];
    newtonian_tensor<P + 1>(static_cast<float>(r.x), static_cast<float>(r.y), static_cast<float>(r.z), eps2f,
                            [&](auto i, float d) { D[i] = d; });
    const auto rho = static_cast<float>(multipole_scale(c2r.y) * inv);
    const auto* ms = reinterpret_cast<const float4*>(mf + static_cast<std::size_t>(src) * stride);
    float mh[stride];
    ct::unroll<stride / 4>([&](auto j) {
      const float4 v = ms[j];
      mh[4 * j] = v.x;
      mh[4 * j + 1] = v.y;
      mh[4 * j + 2] = v.z;
      mh[4 * j + 3] = v.w;
    });
    float rho_power[P + 1];   // rho^|n|: one product a moment
    rho_power[0] = 1;
    for (int d = 1; d <= P; ++d) rho_power[d] = rho_power[d - 1] * rho;
    ct::unroll<nm>([&](auto n) { mh[n] *= rho_power[ct::kAll[n].degree()]; });
    ct::unroll<nl>([&](auto k) {
      constexpr ct::MI kk = ct::kAll[k];
      float s = 0;
      ct::unroll<m2l_terms<P>(k)>([&](auto n) {
        constexpr ct::MI nn = ct::kAll[n];
        constexpr float sign = nn.degree() % 2 == 0 ? 1.0f : -1.0f;
        s += sign * mh[n] * D[ct::index(kk.a + nn.a, kk.b + nn.b, kk.c + nn.c)];
      });
      lane_sum[k] += s;
    });
  }
  ct::unroll<nl>([&](auto k) { sh[k * kRow + lane] = lane_sum[k]; });
  reduce_lane_sums<P>(sh, acc, inv);
}

// P2L of tasks [begin, end) (at least one) of one target node: lane j takes particles j,
// j + 32, ... of each source leaf, in list order, adding D_k(z - x) (times w, in one fused
// multiply-add: w = 1 gives the unweighted bits) to its L_k in float; then the lanes' sums
// into acc. D_k(R) itself would not fit a float (order 7 overflows below |R| ~ 1e-3, in any
// length unit), so the terms are D_k(R / S; eps / S) = S^(|k|+1) D_k(R) with S the target's
// radius: a P2L source lies beyond it (the expansion converges only there), so |R| / S > 1
// and every term is at most (2p+1)!!; the far sources' terms shrink as (S / |R|)^(|k|+1),
// towards zero where they are negligible. The sums are scaled back in double. (A target of
// coincident particles, radius 0: S is the first source particle's distance.)
template <int P>
__device__ void p2l_tasks(double eps2, const FmmTreeView& t, const InteractionTask* tasks, std::uint64_t begin,
                          std::uint64_t end, const DeviceNodeGeometry& target, float* sh, double* acc) {
  const int lane = threadIdx.x & 31;
  const Vec3d zt = centre_of(target);
  const ShapeNode first = t.nodes[t.leaf_node[tasks[begin].source]];
  const double scale = target_scale(target, Vec3d{t.x[first.first], t.y[first.first], t.z[first.first]}, eps2);
  const double inv = 1.0 / scale;
  const auto eps2f = static_cast<float>(eps2 * inv * inv);
  constexpr int nl = local_count<P>();
  float lane_sum[nl];
  ct::unroll<nl>([&](auto k) { lane_sum[k] = 0; });
  for (std::uint64_t q0 = begin; q0 < end; q0 += 32) {
    // The next 32 source leaves' particle ranges, a lane each, then broadcast: a chain of
    // three dependent loads per task held each task up longer than its particles' terms.
    const auto batch = static_cast<int>(end - q0 < 32 ? end - q0 : 32);
    std::uint32_t my_first = 0, my_count = 0;
    if (lane < batch) {
      const ShapeNode leaf = t.nodes[t.leaf_node[tasks[q0 + lane].source]];
      my_first = leaf.first;
      my_count = leaf.count;
    }
    for (int j = 0; j < batch; ++j) {
      const std::uint32_t leaf_first = __shfl_sync(0xffffffffu, my_first, j);
      const std::uint32_t leaf_count = __shfl_sync(0xffffffffu, my_count, j);
      for (std::uint32_t i = lane; i < leaf_count; i += 32) {
        const std::uint32_t p = leaf_first + i;
        // One code path with and without weights: two copies of the tensor could be
        // compiled with different multiply-adds. Each term is added in one fused multiply-add
        // (one instruction, not a product and a sum), which for w = 1 rounds d + sum once,
        // as the unweighted sum would.
        const float w = t.w ? static_cast<float>(t.w[p]) : 1.0f;
        const Vec3d r = (zt - Vec3d{t.x[p], t.y[p], t.z[p]}) * inv;
        newtonian_tensor<P + 1>(static_cast<float>(r.x), static_cast<float>(r.y), static_cast<float>(r.z), eps2f,
                                [&](auto k, float d) { lane_sum[k] = __fmaf_rn(w, d, lane_sum[k]); });
      }
    }
  }
  ct::unroll<nl>([&](auto k) { sh[k * kRow + lane] = lane_sum[k]; });
  reduce_lane_sums<P>(sh, acc, inv);
}

// The two passes into local expansions, for local_chunk_kernel and local_kernel: M2L (a
// node's expansion starts from its tasks; has_local set for every node, as fmm_cuda.cu's
// m2l_kernel: a node without tasks keeps none unless L2L gives it one) and P2L (after M2L:
// added to the node's expansion, or to zero when it has none; has_local set for its targets).
template <int P>
struct M2lPass {
  static constexpr bool kAdds = false;
  using Sum = float;
  const float* m;
  __device__ void operator()(double eps2, const FmmTreeView& t, const InteractionTask* tasks, std::uint64_t begin,
                             std::uint64_t end, const DeviceNodeGeometry& target, float* sh, double* acc) const {
    m2l_tasks<P>(eps2, t, tasks, begin, end, target, m, sh, acc);
  }
};
template <int P>
struct P2lPass {
  static constexpr bool kAdds = true;
  using Sum = float;
  __device__ void operator()(double eps2, const FmmTreeView& t, const InteractionTask* tasks, std::uint64_t begin,
                             std::uint64_t end, const DeviceNodeGeometry& target, float* sh, double* acc) const {
    p2l_tasks<P>(eps2, t, tasks, begin, end, target, sh, acc);
  }
};

// A warp per chunk of a pass (grid-stride up to max_chunks; those beyond the total do
// nothing): the chunk's partial local expansion, its tasks in list order, into
// partial[c * nl ...].
template <int P, typename Pass>
__global__ void __launch_bounds__(kLaneSumThreads) local_chunk_kernel(Pass pass, double eps2, FmmTreeView t,
                                                                      const InteractionTask* tasks,
                                                                      const std::uint64_t* offsets,
                                                                      const std::uint32_t* chunk_start,
                                                                      std::uint64_t chunk, std::size_t max_chunks,
                                                                      double* partial) {
  extern __shared__ double sh_doubles[];
  auto* sh = reinterpret_cast<typename Pass::Sum*>(sh_doubles);
  constexpr int nl = local_count<P>();
  const int lane = threadIdx.x & 31;
  const std::uint32_t total = chunk_start[t.n_nodes];
  for (std::size_t c = blockIdx.x; c < max_chunks && c < total; c += gridDim.x) {
    const std::size_t node = owner_of(chunk_start, t.n_nodes, c);
    const std::uint64_t begin = offsets[node] + (c - chunk_start[node]) * chunk;
    const std::uint64_t end = begin + chunk < offsets[node + 1] ? begin + chunk : offsets[node + 1];
    double acc[kMaxPerLane] = {};
    pass(eps2, t, tasks, begin, end, t.geometry[node], sh, acc);
    for (int j = 0; j < kMaxPerLane; ++j)
      if (lane + 32 * j < nl) partial[c * nl + lane + 32 * j] = acc[j];
  }
}

// A warp per target node of a pass (grid-stride): its chunks' partial expansions added in
// chunk order, or, for a node not split into chunks, its tasks in list order; the sum is
// stored (M2L) or added (P2L) to the node's expansion.
template <int P, typename Pass>
__global__ void __launch_bounds__(kLaneSumThreads) local_kernel(Pass pass, double eps2, FmmTreeView t,
                                                                const InteractionTask* tasks,
                                                                const std::uint64_t* offsets,
                                                                const std::uint32_t* chunk_start,
                                                                const double* partial, double* l,
                                                                std::uint8_t* has_local) {
  extern __shared__ double sh_doubles[];
  auto* sh = reinterpret_cast<typename Pass::Sum*>(sh_doubles);
  constexpr int nl = local_count<P>();
  const int lane = threadIdx.x & 31;
  for (std::size_t node = blockIdx.x; node < t.n_nodes; node += gridDim.x) {
    const std::uint64_t begin = offsets[node], end = offsets[node + 1];
    if (!Pass::kAdds && lane == 0) has_local[node] = begin < end;
    if (begin == end) continue;   // warp-uniform
    double acc[kMaxPerLane] = {};
    const std::uint32_t c0 = chunk_start[node], c1 = chunk_start[node + 1];
    if (c1 > c0) {
      add_chunk_partials(partial, c0, c1, nl, lane, acc);
    } else {
      pass(eps2, t, tasks, begin, end, t.geometry[node], sh, acc);
    }
    double* ln = l + node * nl;
    if constexpr (Pass::kAdds) {
      const bool had = has_local[node];
      for (int j = 0; j < kMaxPerLane; ++j) {
        const int e = lane + 32 * j;
        if (e < nl) ln[e] = (had ? ln[e] : 0.0) + acc[j];
      }
      __syncwarp();   // every lane has read `had`
      if (lane == 0) has_local[node] = 1;
    } else {
      for (int j = 0; j < kMaxPerLane; ++j)
        if (lane + 32 * j < nl) ln[lane + 32 * j] = acc[j];
    }
  }
}

// grad phi at x of the multipoles of source nodes tasks[begin, end), in list order, added
// to g: for each tensor entry D_i as it is made, the terms (-1)^|n| M_n D_(n+e_a) with
// n + e_a = i. One thread's particle; the warp's lanes share the tasks (broadcast loads).
// A particle-node pair as P2L's, in float (x - z made in double), each at its own scale
// s = sqrt(|x - z|^2 + eps^2): sum_n (-1)^|n| (M_n / s^|n|) D_(n+e)(u) / s^2 with
// u = (x - z) / s (newtonian_tensor_unit) and M_n / s^|n| = mf_n (r / s)^|n|, mf the
// multipoles over the node's radius r to the |n| (DeviceFmm's float copy; r / s below about
// theta): factors that fit a float at any distance and size; over at most a chunk of tasks,
// then added to g in double.
// The whole warp calls it (the shuffles): a lane past the leaf's particles passes any
// position and discards g.
template <int P>
__device__ __forceinline__ void m2p_field(double eps2, const FmmTreeView& t, const InteractionTask* tasks,
                                          std::uint64_t begin, std::uint64_t end, const Vec3d& x, const float* mf,
                                          double* g) {
  constexpr int nm = ct::count(P);
  const int lane = threadIdx.x & 31;
  const auto eps2f = static_cast<float>(eps2);
  float f[3] = {0, 0, 0};
  for (std::uint64_t q0 = begin; q0 < end; q0 += 32) {
    // The next 32 source nodes and their centres and radii, a lane each, then broadcast:
    // the chain of dependent loads per task otherwise held every lane up.
    const auto batch = static_cast<int>(end - q0 < 32 ? end - q0 : 32);
    std::uint32_t my_src = 0;
    double my_geo[4] = {0, 0, 0, 0};   // centre, radius
    if (lane < batch) {
      my_src = tasks[q0 + lane].source;
      const DeviceNodeGeometry& geo = t.geometry[my_src];
      for (int d = 0; d < 3; ++d) my_geo[d] = geo.centre[d];
      my_geo[3] = geo.radius;
    }
    for (int j = 0; j < batch; ++j) {
      const std::uint32_t src = __shfl_sync(0xffffffffu, my_src, j);
      double geo[4];
      for (int d = 0; d < 4; ++d) geo[d] = __shfl_sync(0xffffffffu, my_geo[d], j);
      const Vec3d r = x - Vec3d{geo[0], geo[1], geo[2]};
      const float rx = static_cast<float>(r.x), ry = static_cast<float>(r.y), rz = static_cast<float>(r.z);
      const float inv_s = rsqrtf(rx * rx + ry * ry + rz * rz + eps2f);
      const float ratio = static_cast<float>(multipole_scale(geo[3])) * inv_s;
      const float* ms = mf + static_cast<std::size_t>(src) * float_multipole_stride(nm);
      // The terms summed per degree |n| of the multipole, each sum then times ratio^|n|
      // (M_n / s^|n| = mf_n ratio^|n|): P + 1 products a component instead of one per term.
      float e[P + 1][3] = {};
      newtonian_tensor_unit<P + 1>(rx * inv_s, ry * inv_s, rz * inv_s, [&](auto i, float d) {
        constexpr ct::MI n = ct::kAll[i];
        constexpr int degree = n.degree() - 1;                         // of the multipole n - e_a
        constexpr float sign = degree % 2 == 0 ? 1.0f : -1.0f;         // (-1)^|i - e_a|
        if constexpr (n.degree() >= 1 && degree <= P) {
          if constexpr (n.a > 0) e[degree][0] += sign * ms[ct::index(n.a - 1, n.b, n.c)] * d;
          if constexpr (n.b > 0) e[degree][1] += sign * ms[ct::index(n.a, n.b - 1, n.c)] * d;
          if constexpr (n.c > 0) e[degree][2] += sign * ms[ct::index(n.a, n.b, n.c - 1)] * d;
        }
      });
      float power = inv_s * inv_s;   // ratio^|n| / s^2
      for (int k = 0; k <= P; ++k) {
        for (int d = 0; d < 3; ++d) f[d] += e[k][d] * power;
        power *= ratio;
      }
    }
  }
  for (int d = 0; d < 3; ++d) g[d] += static_cast<double>(f[d]);
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

// A warp per M2P chunk of a chunked leaf (grid-stride), a lane per particle of the leaf
// (particles i, i + 32, ...): the field of the chunk's tasks in list order into the chunk's
// partial entries partial[3 (entry_start[leaf] + k count + i) + d] (chunk k, particle i).
template <int P>
__global__ void __launch_bounds__(kThreads) m2p_chunk_kernel(double eps2, FmmTreeView t, const InteractionTask* tasks,
                                                             const std::uint64_t* offsets,
                                                             const std::uint64_t* work_scan, std::uint64_t min_chunk,
                                                             std::uint64_t max_entries,
                                                             const std::uint32_t* chunk_start,
                                                             const std::uint32_t* entry_start, const float* m,
                                                             double* partial) {
  const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
  const std::uint32_t total = chunk_start[t.n_leaves];
  const std::uint64_t chunk = m2p_chunk(work_scan, t.n_leaves, min_chunk, max_entries);
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * kWarps;
  for (std::size_t c = blockIdx.x * static_cast<std::size_t>(kWarps) + w; c < total; c += warps) {
    const std::size_t leaf = owner_of(chunk_start, t.n_leaves, c);
    const std::uint64_t k = c - chunk_start[leaf];
    const std::uint64_t begin = offsets[leaf] + k * chunk;
    const std::uint64_t end = begin + chunk < offsets[leaf + 1] ? begin + chunk : offsets[leaf + 1];
    const ShapeNode nd = t.nodes[t.leaf_node[leaf]];
    double* out = partial + 3 * (entry_start[leaf] + k * nd.count);
    for (std::uint32_t i0 = 0; i0 < nd.count; i0 += 32) {   // the whole warp, for m2p_field
      const std::uint32_t i = i0 + lane, p = nd.first + (i < nd.count ? i : 0);
      double g[3] = {0, 0, 0};
      m2p_field<P>(eps2, t, tasks, begin, end, Vec3d{t.x[p], t.y[p], t.z[p]}, m, g);
      if (i < nd.count)
        for (int d = 0; d < 3; ++d) out[3 * i + d] = g[d];
    }
  }
}

// M2P: a warp per target leaf (grid-stride), a lane per particle: for a leaf done whole,
// its source nodes in list order (m2p_field); for a chunked leaf, the partial entries of its
// particle in chunk order. G m times the field is added to the particle's acceleration.
template <int P>
__global__ void __launch_bounds__(kThreads) m2p_kernel(double eps2, FmmTreeView t, const InteractionTask* tasks,
                                                      const std::uint64_t* offsets, const std::uint32_t* chunk_start,
                                                      const std::uint32_t* entry_start, const double* partial,
                                                      const float* m, double g_mass, double* acc) {
  const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * kWarps;
  for (std::size_t leaf = blockIdx.x * static_cast<std::size_t>(kWarps) + w; leaf < t.n_leaves; leaf += warps) {
    const std::uint64_t begin = offsets[leaf], end = offsets[leaf + 1];
    if (begin == end) continue;   // warp-uniform
    const ShapeNode nd = t.nodes[t.leaf_node[leaf]];
    const std::uint32_t chunks = chunk_start[leaf + 1] - chunk_start[leaf];
    const double* part = partial + 3 * static_cast<std::size_t>(entry_start[leaf]);
    for (std::uint32_t i0 = 0; i0 < nd.count; i0 += 32) {   // the whole warp, for m2p_field
      const std::uint32_t i = i0 + lane, p = nd.first + (i < nd.count ? i : 0);
      double g[3] = {0, 0, 0};
      if (chunks > 0) {   // warp-uniform
        if (i < nd.count)
          for (std::uint32_t k = 0; k < chunks; ++k)
            for (int d = 0; d < 3; ++d) g[d] += part[3 * (static_cast<std::size_t>(k) * nd.count + i) + d];
      } else {
        m2p_field<P>(eps2, t, tasks, begin, end, Vec3d{t.x[p], t.y[p], t.z[p]}, m, g);
      }
      if (i < nd.count)
        for (int d = 0; d < 3; ++d) acc[3 * static_cast<std::size_t>(p) + d] += g_mass * g[d];
    }
  }
}

// A single-warp kernel's grid-stride grid: a block per item, at most 32 per SM.
unsigned warp_grid(std::size_t items, int sms) {
  const std::size_t cap = 32 * static_cast<std::size_t>(sms);
  return static_cast<unsigned>(items == 0 ? 1 : std::min(items, cap));
}

}  // namespace

void m2l_newtonian(const Pass& pass, const InteractionTask* tasks, const std::uint64_t* offsets, std::uint64_t chunk,
                   std::size_t max_chunks, const ChunkArrays& arrays, const float* m, double* l,
                   std::uint8_t* has_local) {
  if (pass.kernel != KernelKind::newtonian) fail("internal: the per-thread M2L is the Newtonian kernel's");
  const std::size_t nn = pass.t.n_nodes;
  scan_task_chunks(pass, offsets, nn, chunk, arrays, arrays.totals);
  with_order(pass.order, [&](auto order) {
    constexpr int P = decltype(order)::value;
    constexpr std::size_t shared = lane_sums_bytes<P, float>();
    const M2lPass<P> op{m};
    local_chunk_kernel<P><<<warp_grid(max_chunks, pass.sms), kLaneSumThreads, shared, pass.stream>>>(
        op, pass.eps2, pass.t, tasks, offsets, arrays.chunk_start, chunk, max_chunks, arrays.partial);
    ORBIS_CUDA_CHECK(cudaGetLastError());
    local_kernel<P><<<warp_grid(nn, pass.sms), kLaneSumThreads, shared, pass.stream>>>(
        op, pass.eps2, pass.t, tasks, offsets, arrays.chunk_start, arrays.partial, l, has_local);
    ORBIS_CUDA_CHECK(cudaGetLastError());
  });
}

void p2l(const Pass& pass, const LeafCellLists& lists, std::uint64_t min_chunk, std::uint64_t max_chunks,
         const ChunkArrays& arrays, double* l, std::uint8_t* has_local) {
  if (pass.kernel != KernelKind::newtonian) fail("internal: leaf-cell pairs need the Newtonian kernel (vacuum)");
  const std::size_t nn = pass.t.n_nodes;
  const std::uint64_t chunk = chunk_tasks(lists.count, min_chunk, max_chunks);
  const std::size_t bound = chunks_bound(lists.count, chunk, max_chunks);
  if (bound * static_cast<std::size_t>(pass.nl) > arrays.partial_doubles)
    fail("internal: P2L chunks need {} doubles, {} given", bound * pass.nl, arrays.partial_doubles);
  scan_task_chunks(pass, lists.p2l_offsets, nn, chunk, arrays, arrays.totals + 1);
  with_order(pass.order, [&](auto order) {
    constexpr int P = decltype(order)::value;
    constexpr std::size_t shared = lane_sums_bytes<P, float>();
    const P2lPass<P> op{};
    local_chunk_kernel<P><<<warp_grid(bound, pass.sms), kLaneSumThreads, shared, pass.stream>>>(
        op, pass.eps2, pass.t, lists.p2l, lists.p2l_offsets, arrays.chunk_start, chunk, bound, arrays.partial);
    ORBIS_CUDA_CHECK(cudaGetLastError());
    local_kernel<P><<<warp_grid(nn, pass.sms), kLaneSumThreads, shared, pass.stream>>>(
        op, pass.eps2, pass.t, lists.p2l, lists.p2l_offsets, arrays.chunk_start, arrays.partial, l, has_local);
    ORBIS_CUDA_CHECK(cudaGetLastError());
  });
}

void m2p(const Pass& pass, const LeafCellLists& lists, std::uint64_t min_chunk, const ChunkArrays& arrays,
         const float* m, double g_mass, double* acc) {
  if (pass.kernel != KernelKind::newtonian) fail("internal: leaf-cell pairs need the Newtonian kernel (vacuum)");
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
  with_order(pass.order, [&](auto order) {
    constexpr int P = decltype(order)::value;
    // The chunks' count is known on the device only: a full grid, whose warps beyond it stop.
    m2p_chunk_kernel<P><<<stride_grid(16 * kWarps * static_cast<std::size_t>(pass.sms), pass.sms), kThreads, 0,
                          pass.stream>>>(pass.eps2, pass.t, lists.m2p, lists.m2p_offsets, arrays.leaf_work, min_chunk,
                                         max_entries, arrays.chunk_start, arrays.entry_start, m, arrays.partial);
    ORBIS_CUDA_CHECK(cudaGetLastError());
    m2p_kernel<P><<<stride_grid(n, pass.sms), kThreads, 0, pass.stream>>>(
        pass.eps2, pass.t, lists.m2p, lists.m2p_offsets, arrays.chunk_start, arrays.entry_start, arrays.partial, m,
        g_mass, acc);
    ORBIS_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace orbis::gpu::fmm_detail
