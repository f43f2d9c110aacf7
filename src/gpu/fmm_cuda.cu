#include "gpu/fmm_cuda.cuh"

#include <algorithm>

#include "core/error.hpp"
#include "fmm/kernel_derivatives.hpp"
#include "fmm/multi_index_ct.hpp"
#include "gpu/cub_counts.cuh"
#include "gpu/fmm_cuda_kernels.cuh"
#include "gpu/fmm_cuda_monomials.cuh"
#include "gpu/orb_tree_cuda.cuh"
#include "tree/multi_index.hpp"

namespace orbis::gpu {
namespace fmm_detail {
namespace {

// chunks[i]: the chunks of target i (0: done whole), chunks[n] = 0 (the exclusive scan's
// entry n is then the total).
__global__ void task_chunk_counts(const std::uint64_t* offsets, std::size_t n, std::uint64_t chunk,
                                  std::uint32_t* chunks) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i > n) return;
  if (i == n) {
    chunks[n] = 0;
    return;
  }
  const std::uint64_t tasks = offsets[i + 1] - offsets[i];
  chunks[i] = tasks > chunk ? static_cast<std::uint32_t>((tasks + chunk - 1) / chunk) : 0u;
}

}  // namespace

void scan_task_chunks(const Pass& pass, const std::uint64_t* offsets, std::size_t n, std::uint64_t chunk,
                      const ChunkArrays& arrays, std::uint32_t* total) {
  task_chunk_counts<<<static_cast<unsigned>((n + 1 + 255) / 256), 256, 0, pass.stream>>>(offsets, n, chunk,
                                                                                         arrays.chunk_start);
  ORBIS_CUDA_CHECK(cudaGetLastError());
  DeviceArray<unsigned char>& temp = *arrays.scan_temp;
  temp.ensure(exclusive_sum_bytes(arrays.chunk_start, arrays.chunk_start, n + 1));
  exclusive_sum(temp.data(), temp.capacity(), arrays.chunk_start, arrays.chunk_start, n + 1, pass.stream);
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(total, arrays.chunk_start + n, sizeof(std::uint32_t), cudaMemcpyDeviceToDevice,
                                   pass.stream));
}

}  // namespace fmm_detail

namespace {

using namespace fmm_detail;

// Where a node's expansion is in an array of the needed nodes' expansions alone (`slots`: the
// needed nodes numbered in node order, DeviceFmm::prepare), or the node itself where the
// array has every node's (slots null).
__device__ inline std::size_t slot_of(const std::uint32_t* slots, std::int32_t node) {
  return slots ? slots[node] : static_cast<std::size_t>(node);
}

// P2M: a thread per leaf, every n at once in registers, its particles in tree order: the
// host's arithmetic term for term (its monomials, the product w_j times the monomial rounded
// before the sum; w = 1 without weights gives the unweighted bits), so M is the host's bits.
template <int P>
__global__ void __launch_bounds__(kThreads) p2m_kernel(FmmTreeView t, const std::uint8_t* wanted,
                                                      const std::uint32_t* m_slot, double* m) {
  constexpr int nm = ct::count(P);
  const std::size_t leaf = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (leaf >= t.n_leaves) return;
  const std::int32_t node = t.leaf_node[leaf];
  if (!wanted[node]) return;
  const ShapeNode nd = t.nodes[node];
  const Vec3d c = centre_of(t.geometry[node]);
  double sum[nm];
  ct::unroll<nm>([&](auto n) { sum[n] = 0; });
  for (std::uint32_t p = nd.first; p < nd.first + nd.count; ++p) {
    double mono[nm];
    scaled_monomials<P>(t.x[p] - c.x, t.y[p] - c.y, t.z[p] - c.z, mono);
    const double w = t.w ? t.w[p] : 1.0;
    ct::unroll<nm>([&](auto n) { sum[n] = __dadd_rn(sum[n], __dmul_rn(w, mono[n])); });
  }
  double* out = m + slot_of(m_slot, node) * nm;
  ct::unroll<nm>([&](auto n) { out[n] = sum[n]; });
}

// M2M for the nodes of one depth: a thread per internal node, its children (left, then
// right) shifted to its centre, M_n += M_k(child) d^(n-k)/(n-k)! over k <= n in the host's
// order (k's x, then y, then z component ascending; tree/multi_index.hpp shift_terms), with
// products and sums rounded apart: the host's bits.
template <int P>
__global__ void __launch_bounds__(kThreads) m2m_kernel(FmmTreeView t, const std::int32_t* level, std::uint32_t n_level,
                                                      const std::uint8_t* wanted, const std::uint32_t* m_slot,
                                                      double* m) {
  constexpr int nm = ct::count(P);
  const std::uint32_t item = blockIdx.x * blockDim.x + threadIdx.x;
  if (item >= n_level) return;
  const std::int32_t node = level[item];
  const ShapeNode nd = t.nodes[node];
  if (nd.left < 0 || !wanted[node]) return;
  double sum[nm];
  ct::unroll<nm>([&](auto n) { sum[n] = 0; });
  const Vec3d z = centre_of(t.geometry[node]);
  const std::int32_t children[2] = {nd.left, nd.right};
  for (const std::int32_t child : children) {
    const Vec3d d = centre_of(t.geometry[child]) - z;
    double mono[nm];
    scaled_monomials<P>(d.x, d.y, d.z, mono);
    const double* mc = m + slot_of(m_slot, child) * nm;
    ct::unroll<nm>([&](auto i) {
      constexpr ct::MI n = ct::kAll[i];
      ct::unroll<n.a + 1>([&](auto a) {
        ct::unroll<n.b + 1>([&](auto b) {
          ct::unroll<n.c + 1>([&](auto c) {
            constexpr int ka = a, kb = b, kc = c;
            sum[i] = __dadd_rn(sum[i], __dmul_rn(mc[ct::index(ka, kb, kc)], mono[ct::index(n.a - ka, n.b - kb, n.c - kc)]));
          });
        });
      });
    });
  }
  double* out = m + slot_of(m_slot, node) * nm;
  ct::unroll<nm>([&](auto n) { out[n] = sum[n]; });
}

// M2L of tasks [begin, end) of one target node (centre zt) added to the warp's local
// expansion acc (lane k holds entries k + 32 j), in list order.
__device__ void m2l_tasks(const Tables& tb, int order, int nm, int nl, KernelKind kernel, double r_s, double cut_shift, double eps2,
                          const FmmTreeView& t, const InteractionTask* tasks, std::uint64_t begin, std::uint64_t end,
                          const Vec3d& zt, double box, const double* m, const std::uint32_t* m_slot, double* sm,
                          double (*lev)[kMaxNl], double* acc) {
  const int lane = threadIdx.x & 31;
  const int q_order = order + 1;   // D to p + 1
  for (std::uint64_t q = begin; q < end; ++q) {
    const InteractionTask task = tasks[q];
    const Vec3d shift{task.image[0] * box, task.image[1] * box, task.image[2] * box};
    const Vec3d R = (zt - centre_of(t.geometry[task.source])) - shift;   // as the host
    const double* D = derivative_tensor(tb, kernel, r_s, q_order, R, lev, lane, cut_shift, eps2);
    const double* ms = m + slot_of(m_slot, task.source) * nm;
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

// A warp per chunk (grid-stride up to max_chunks; those beyond the total do nothing): the
// chunk's partial local expansion, in list order, into partial[c * nl ...].
__global__ void m2l_chunk_kernel(Tables tb, int order, int nm, int nl, KernelKind kernel, double r_s, double cut_shift, double eps2,
                                 FmmTreeView t,
                                 const InteractionTask* tasks, const std::uint64_t* offsets,
                                 const std::uint32_t* chunk_start, std::uint64_t chunk, std::size_t max_chunks,
                                 double box, const double* m, const std::uint32_t* m_slot, double* partial) {
  __shared__ double sm[kWarps][kMaxNm];
  __shared__ double lev[kWarps][2][kMaxNl];
  const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
  const std::uint32_t total = chunk_start[t.n_nodes];
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * kWarps;
  for (std::size_t c = blockIdx.x * static_cast<std::size_t>(kWarps) + w; c < max_chunks && c < total; c += warps) {
    const std::size_t node = owner_of(chunk_start, t.n_nodes, c);   // warp-uniform
    const std::uint64_t begin = offsets[node] + (c - chunk_start[node]) * chunk;
    const std::uint64_t end = begin + chunk < offsets[node + 1] ? begin + chunk : offsets[node + 1];
    double acc[kMaxPerLane] = {};
    m2l_tasks(tb, order, nm, nl, kernel, r_s, cut_shift, eps2, t, tasks, begin, end, centre_of(t.geometry[node]), box, m,
              m_slot, sm[w], lev[w], acc);
    for (int j = 0; j < kMaxPerLane; ++j)
      if (lane + 32 * j < nl) partial[c * nl + lane + 32 * j] = acc[j];
  }
}

// M2L: a warp per target node (grid-stride): its tasks in list order, or, for a node split
// into chunks, its chunks' partial expansions added in chunk order. Either way a fixed order.
__global__ void m2l_kernel(Tables tb, int order, int nm, int nl, KernelKind kernel, double r_s, double cut_shift, double eps2,
                           FmmTreeView t,
                           const InteractionTask* tasks, const std::uint64_t* offsets,
                           const std::uint32_t* chunk_start, const double* partial, double box, const double* m,
                           const std::uint32_t* m_slot, double* l, const std::uint32_t* l_slot,
                           std::uint8_t* has_local) {
  __shared__ double sm[kWarps][kMaxNm];
  __shared__ double lev[kWarps][2][kMaxNl];
  const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * kWarps;
  for (std::size_t node = blockIdx.x * static_cast<std::size_t>(kWarps) + w; node < t.n_nodes; node += warps) {
    const std::uint64_t begin = offsets[node], end = offsets[node + 1];
    double acc[kMaxPerLane] = {};
    const std::uint32_t c0 = chunk_start[node], c1 = chunk_start[node + 1];
    if (c1 > c0) {
      add_chunk_partials(partial, c0, c1, nl, lane, acc);
    } else {
      m2l_tasks(tb, order, nm, nl, kernel, r_s, cut_shift, eps2, t, tasks, begin, end, centre_of(t.geometry[node]), box, m,
                m_slot, sm[w], lev[w], acc);
    }
    if (begin < end)   // a node without tasks keeps no local expansion unless L2L gives it one
      for (int j = 0; j < kMaxPerLane; ++j)
        if (lane + 32 * j < nl) l[slot_of(l_slot, static_cast<std::int32_t>(node)) * nl + lane + 32 * j] = acc[j];
    if (lane == 0) has_local[node] = begin < end;
  }
}

// L2L for the children of the nodes of one depth: a thread per child of a parent with a
// local expansion, L_k(child) += L_n(parent) d^(n-k)/(n-k)! over n >= k in the host's order
// (n ascending in the layout, which is n - k's order too), onto the child's own M2L expansion
// (or zero), with products and sums rounded apart: the host's bits.
template <int P>
__global__ void __launch_bounds__(kThreads) l2l_kernel(FmmTreeView t, const std::int32_t* level, std::uint32_t n_level,
                                                      double* l, const std::uint32_t* l_slot,
                                                      std::uint8_t* has_local) {
  constexpr int nl = ct::count(P + 1);
  const std::uint32_t item = blockIdx.x * blockDim.x + threadIdx.x;
  if (item >= 2 * n_level) return;
  const std::int32_t parent = level[item / 2];
  const ShapeNode nd = t.nodes[parent];
  if (nd.left < 0 || !has_local[parent]) return;
  const std::int32_t child = item % 2 == 0 ? nd.left : nd.right;
  const Vec3d d = centre_of(t.geometry[child]) - centre_of(t.geometry[parent]);
  double mono[nl];
  scaled_monomials<P + 1>(d.x, d.y, d.z, mono);
  const bool had = has_local[child];   // its own M2L; else its expansion starts at zero
  const double* lp = l + slot_of(l_slot, parent) * nl;
  double* lc = l + slot_of(l_slot, child) * nl;
  ct::unroll<nl>([&](auto ki) {
    constexpr ct::MI k = ct::kAll[ki];
    double v = had ? lc[ki] : 0.0;
    ct::unroll<ct::count(P + 1 - k.degree())>([&](auto j) {
      constexpr ct::MI e = ct::kAll[j];
      v = __dadd_rn(v, __dmul_rn(lp[ct::index(k.a + e.a, k.b + e.b, k.c + e.c)], mono[j]));
    });
    lc[ki] = v;
  });
  has_local[child] = 1;
}

// L2P: a warp per leaf with a local expansion, a thread per particle: grad phi = sum_i
// L_(i + e_d) y^i / i! over the gradient set (the multipole set) in the host's order with the
// host's monomials (products and sums rounded apart, as FmmOperators::l2p), then G m times it
// added to the particle's acceleration.
template <int P>
__global__ void __launch_bounds__(kThreads) l2p_kernel(FmmTreeView t, const double* l, const std::uint32_t* l_slot,
                                                      const std::uint8_t* has_local, double g_mass, double* acc) {
  constexpr int nm = ct::count(P), nl = ct::count(P + 1);
  const std::size_t leaf = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (leaf >= t.n_leaves) return;
  const std::int32_t node = t.leaf_node[leaf];
  if (!has_local[node]) return;
  const ShapeNode nd = t.nodes[node];
  const Vec3d c = centre_of(t.geometry[node]);
  const double* loc = l + slot_of(l_slot, node) * nl;
  for (std::uint32_t i = lane; i < nd.count; i += 32) {
    const std::uint32_t p = nd.first + i;
    double mono[nm];
    scaled_monomials<P>(t.x[p] - c.x, t.y[p] - c.y, t.z[p] - c.z, mono);
    double g[3] = {0, 0, 0};
    ct::unroll<nm>([&](auto k) {
      constexpr ct::MI n = ct::kAll[k];
      g[0] = __dadd_rn(g[0], __dmul_rn(loc[ct::index(n.a + 1, n.b, n.c)], mono[k]));
      g[1] = __dadd_rn(g[1], __dmul_rn(loc[ct::index(n.a, n.b + 1, n.c)], mono[k]));
      g[2] = __dadd_rn(g[2], __dmul_rn(loc[ct::index(n.a, n.b, n.c + 1)], mono[k]));
    });
    for (int d = 0; d < 3; ++d) acc[3 * static_cast<std::size_t>(p) + d] += g_mass * g[d];
  }
}

// The multipoles of the wanted nodes in float for M2P, as M_n / r^|n| (r the node's radius,
// or 1 for a node of coincident particles, whose moments beyond the mass are 0): at most the
// node's mass, where M_n itself overflows a float at order 6 in an extended system (a
// Hernquist halo's outliers). nm a node, in runs of `stride` (float_multipole_stride: the
// padding is zeros); the nodes not wanted are never read and get zeros, not the pool's old
// bytes. n: nodes times stride.
__global__ void multipoles_to_float(const double* m, const std::uint8_t* wanted, const DeviceNodeGeometry* geometry,
                                    int nm, int stride, std::size_t n, float* out) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const std::size_t node = i / static_cast<std::size_t>(stride);
  const auto k = static_cast<int>(i % static_cast<std::size_t>(stride));
  if (!wanted[node] || k >= nm) {
    out[i] = 0;
    return;
  }
  const double inv = 1.0 / fmm_detail::multipole_scale(geometry[node].radius);
  double v = m[node * static_cast<std::size_t>(nm) + static_cast<std::size_t>(k)];
  for (int d = 0; k >= ct::count(d); ++d) v *= inv;   // the layout is by degree
  out[i] = static_cast<float>(v);
}

// acc[i] += a * f[i]: the M2P field (stored alone) added as M2P would have added it.
__global__ void add_scaled(const double* f, double a, std::size_t n, double* acc) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) acc[i] += a * f[i];
}

// Only the M2L sources need multipoles, and M2M needs their subtrees (as the host's
// Multipoles::compute with `needed`): flag the sources, then every child of a flagged node.
__global__ void flag_sources(const InteractionTask* tasks, std::size_t count, std::uint8_t* wanted) {
  const std::size_t q = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (q < count) wanted[tasks[q].source] = 1;   // every writer writes 1
}
// The M2L targets (nodes with tasks), whose subtrees then get local expansions by L2L.
__global__ void flag_targets(const std::uint64_t* offsets, std::size_t n, std::uint8_t* flags) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) flags[i] = offsets[i + 1] > offsets[i];
}
// slots[i] = flags[i] for i < n, slots[n] = 0: their exclusive sum numbers the flagged nodes
// in node order, and its entry n is their count.
__global__ void flags_to_slots(const std::uint8_t* flags, std::size_t n, std::uint32_t* slots) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i <= n) slots[i] = i < n ? flags[i] : 0u;
}
__global__ void flag_children(const std::int32_t* level, std::uint32_t n_level, const ShapeNode* nodes,
                              std::uint8_t* wanted) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_level) return;
  const std::int32_t node = level[i];
  const ShapeNode nd = nodes[node];
  if (nd.left >= 0 && wanted[node]) wanted[nd.left] = wanted[nd.right] = 1;
}

}  // namespace

FmmTreeView fmm_tree_view(const DeviceOrbTree& tree) {
  FmmTreeView view;
  view.n_nodes = tree.n_nodes();
  view.n_leaves = tree.n_leaves();
  view.n_particles = tree.size();
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

DeviceFmm::DeviceFmm(int multipole_order, double r_s, KernelKind kernel, double cut_shift, double softening)
    : order_(multipole_order),
      nm_(MultiIndexSet::count(multipole_order)),
      nl_(MultiIndexSet::count(multipole_order + 1)),
      r_s_(r_s),
      kernel_(kernel),
      cut_shift_(cut_shift),
      eps2_(kernel == KernelKind::newtonian ? softening * softening : 0.0) {
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
  tables_.ensure(all.size());
  ORBIS_CUDA_CHECK(cudaMemcpy(tables_.data(), all.data(), all.size() * sizeof(int), cudaMemcpyHostToDevice));
  ORBIS_CUDA_CHECK(cudaEventCreateWithFlags(&numbered_, cudaEventDisableTiming));
}

DeviceFmm::~DeviceFmm() {
  if (numbered_) cudaEventDestroy(numbered_);
}

std::size_t DeviceFmm::bytes_for(int multipole_order, std::size_t n_nodes) {
  const std::size_t per_node = (MultiIndexSet::count(multipole_order) + MultiIndexSet::count(multipole_order + 1)) *
                                   sizeof(double) + 1;
  // The chunks' partial sums (M2L and P2L: kMaxChunks local expansions; M2P: as many doubles),
  // the chunk counts and their scan, M2P's per-leaf work and entries (a leaf is a node) and
  // their scans' temporaries.
  const std::size_t chunks = kMaxChunks * MultiIndexSet::count(multipole_order + 1) * sizeof(double) +
                             (n_nodes + 1) * (sizeof(std::uint32_t) * 2 + sizeof(std::uint64_t)) * 2;
  return n_nodes * per_node + n_nodes * per_node / 8 + chunks + 4096;
}

void DeviceFmm::release() {
  m_.release();
  l_.release();
  m_slot_.release();
  l_slot_.release();
  compact_ = false;
  m2p_field_.release();
  m_float_.release();
  active_.release();
  wanted_.release();
  chunk_start_.release();
  entry_start_.release();
  leaf_work_.release();
  partial_.release();
  scan_temp_.release();
}

DeviceFmm::ChunkCounts DeviceFmm::last_chunk_counts() const {
  ChunkCounts c;
  if (chunk_totals_.data() == nullptr) return c;
  std::uint32_t h[3] = {0, 0, 0};
  ORBIS_CUDA_CHECK(cudaDeviceSynchronize());
  ORBIS_CUDA_CHECK(cudaMemcpy(h, chunk_totals_.data(), sizeof(h), cudaMemcpyDeviceToHost));
  c.m2l = h[0];
  c.p2l = h[1];
  c.m2p = h[2];
  return c;
}

void DeviceFmm::compute(const FmmTreeView& tree, const InteractionTask* m2l, const std::uint64_t* m2l_offsets,
                        std::size_t m2l_count, double box, double g_mass, double* acc, cudaStream_t stream,
                        const LeafCellLists& leaf_cell) {
  prepare(tree, m2l, m2l_offsets, m2l_count, stream, leaf_cell);
  source_multipoles(tree, stream);
  expand(tree, m2l, m2l_offsets, m2l_count, box, stream, leaf_cell);
  evaluate(tree, g_mass, acc, stream, leaf_cell);
}

fmm_detail::Pass DeviceFmm::pass_of(const FmmTreeView& tree, cudaStream_t stream) const {
  int device = 0;
  fmm_detail::Pass pass;
  ORBIS_CUDA_CHECK(cudaGetDevice(&device));
  ORBIS_CUDA_CHECK(cudaDeviceGetAttribute(&pass.sms, cudaDevAttrMultiProcessorCount, device));
  pass.order = order_;
  pass.nl = nl_;
  pass.kernel = kernel_;
  pass.eps2 = eps2_;
  pass.t = tree;
  pass.stream = stream;
  return pass;
}

fmm_detail::ChunkArrays DeviceFmm::chunk_arrays() {
  fmm_detail::ChunkArrays arrays;
  arrays.chunk_start = chunk_start_.data();
  arrays.entry_start = entry_start_.data();
  arrays.leaf_work = leaf_work_.data();
  arrays.partial = partial_.data();
  arrays.partial_doubles = partial_doubles_;
  arrays.scan_temp = &scan_temp_;
  arrays.totals = chunk_totals_.data();
  return arrays;
}

void DeviceFmm::multipoles(const FmmTreeView& tree, cudaStream_t stream) {
  compact_ = false;
  if (tree.n_nodes == 0) return;
  wanted_.ensure(tree.n_nodes);
  ORBIS_CUDA_CHECK(cudaMemsetAsync(wanted_.data(), 1, tree.n_nodes, stream));
  make_multipoles(tree, stream);
}

void DeviceFmm::flag_subtrees(const FmmTreeView& tree, std::uint8_t* flags, cudaStream_t stream) {
  const std::vector<std::size_t>& off = *tree.level_offset;
  // A forest's levels between its top and its subtrees are empty: nothing is launched there.
  for (std::size_t d = 0; d + 2 < off.size(); ++d) {
    const auto size = static_cast<std::uint32_t>(off[d + 1] - off[d]);
    if (size == 0) continue;
    flag_children<<<(size + 255) / 256, 256, 0, stream>>>(tree.level_nodes + off[d], size, tree.nodes, flags);
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
}

void DeviceFmm::number_flagged(const std::uint8_t* flags, std::size_t n, DeviceArray<std::uint32_t>& slots,
                               std::uint32_t* count, cudaStream_t stream) {
  slots.ensure(n + 1);
  flags_to_slots<<<static_cast<unsigned>((n + 1 + 255) / 256), 256, 0, stream>>>(flags, n, slots.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  scan_temp_.ensure(exclusive_sum_bytes(slots.data(), slots.data(), n + 1));
  exclusive_sum(scan_temp_.data(), scan_temp_.capacity(), slots.data(), slots.data(), n + 1, stream);
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(count, slots.data() + n, sizeof(std::uint32_t), cudaMemcpyDeviceToHost, stream));
}

void DeviceFmm::prepare(const FmmTreeView& tree, const InteractionTask* m2l, const std::uint64_t* m2l_offsets,
                        std::size_t m2l_count, cudaStream_t stream, const LeafCellLists& leaf_cell) {
  const std::size_t nn = tree.n_nodes;
  compact_ = false;
  if (nn == 0) return;
  const bool every_node = every_node_wanted(m2l_count + leaf_cell.count, nn);
  wanted_.ensure(nn);
  ORBIS_CUDA_CHECK(cudaMemsetAsync(wanted_.data(), every_node ? 1 : 0, nn, stream));
  if (!every_node) {
    if (m2l_count > 0) {
      flag_sources<<<static_cast<unsigned>((m2l_count + 255) / 256), 256, 0, stream>>>(m2l, m2l_count, wanted_.data());
      ORBIS_CUDA_CHECK(cudaGetLastError());
    }
    if (leaf_cell.count > 0) {   // the M2P sources
      flag_sources<<<static_cast<unsigned>((leaf_cell.count + 255) / 256), 256, 0, stream>>>(
          leaf_cell.m2p, leaf_cell.count, wanted_.data());
      ORBIS_CUDA_CHECK(cudaGetLastError());
    }
    flag_subtrees(tree, wanted_.data(), stream);
  }
  // In a box the cut leaves few M2L tasks (~1 a 30 nodes at 256^3 in 1 Gpc/h): the sources'
  // and the targets' subtrees are ~1.4% of the nodes, and their expansions alone are kept, each
  // at its node's number among them (the slots). Vacuum's leaf-cell passes and float
  // multipoles, and a walk whose tasks outnumber the nodes, keep every node's.
  compact_ = !every_node && leaf_cell.count == 0 && kernel_ != KernelKind::newtonian;
  if (!compact_) return;
  active_.ensure(nn);
  if (m2l_count > 0) {
    flag_targets<<<static_cast<unsigned>((nn + 255) / 256), 256, 0, stream>>>(m2l_offsets, nn, active_.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    flag_subtrees(tree, active_.data(), stream);
  } else {
    ORBIS_CUDA_CHECK(cudaMemsetAsync(active_.data(), 0, nn, stream));
  }
  slot_counts_.ensure(2);
  number_flagged(wanted_.data(), nn, m_slot_, slot_counts_.data(), stream);
  number_flagged(active_.data(), nn, l_slot_, slot_counts_.data() + 1, stream);
  ORBIS_CUDA_CHECK(cudaEventRecord(numbered_, stream));
}

std::size_t DeviceFmm::expansion_slots(int which, std::size_t n_nodes) const {
  if (!compact_) return n_nodes;
  ORBIS_CUDA_CHECK(cudaEventSynchronize(numbered_));   // long done when the P2P was queued after it
  return slot_counts_.data()[which];
}

void DeviceFmm::source_multipoles(const FmmTreeView& tree, cudaStream_t stream) { make_multipoles(tree, stream); }

std::vector<double> DeviceFmm::node_multipoles(std::size_t n_nodes) const {
  const auto nm = static_cast<std::size_t>(nm_);
  std::vector<double> out(n_nodes * nm, 0.0);
  if (n_nodes == 0) return out;
  ORBIS_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::uint8_t> wanted(n_nodes);
  ORBIS_CUDA_CHECK(cudaMemcpy(wanted.data(), wanted_.data(), n_nodes, cudaMemcpyDeviceToHost));
  std::vector<std::uint32_t> slot(n_nodes);
  for (std::size_t k = 0; k < n_nodes; ++k) slot[k] = static_cast<std::uint32_t>(k);
  std::size_t slots = n_nodes;
  if (compact_) {
    ORBIS_CUDA_CHECK(cudaMemcpy(slot.data(), m_slot_.data(), n_nodes * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
    slots = slot_counts_.data()[0];
  }
  std::vector<double> packed(slots * nm);
  if (slots > 0)
    ORBIS_CUDA_CHECK(cudaMemcpy(packed.data(), m_.data(), packed.size() * sizeof(double), cudaMemcpyDeviceToHost));
  for (std::size_t k = 0; k < n_nodes; ++k)
    if (wanted[k]) std::copy_n(packed.begin() + static_cast<std::ptrdiff_t>(slot[k] * nm), nm, out.begin() + k * nm);
  return out;
}

void DeviceFmm::make_multipoles(const FmmTreeView& tree, cudaStream_t stream) {
  const std::size_t nn = tree.n_nodes;
  if (nn == 0) return;
  m_.ensure(expansion_slots(0, nn) * static_cast<std::size_t>(nm_));
  const std::uint32_t* m_slot = compact_ ? m_slot_.data() : nullptr;
  const std::vector<std::size_t>& off = *tree.level_offset;
  const int depths = static_cast<int>(off.size()) - 1;
  auto level = [&](int d) { return tree.level_nodes + off[static_cast<std::size_t>(d)]; };
  auto level_size = [&](int d) {
    return static_cast<std::uint32_t>(off[static_cast<std::size_t>(d) + 1] - off[static_cast<std::size_t>(d)]);
  };
  const auto leaf_blocks = static_cast<unsigned>((tree.n_leaves + kThreads - 1) / kThreads);
  fmm_detail::with_order(order_, [&](auto order) {
    p2m_kernel<decltype(order)::value><<<leaf_blocks, kThreads, 0, stream>>>(tree, wanted_.data(), m_slot,
                                                                                            m_.data());
  });
  ORBIS_CUDA_CHECK(cudaGetLastError());
  for (int d = depths - 2; d >= 0; --d) {
    if (level_size(d) == 0) continue;
    fmm_detail::with_order(order_, [&](auto order) {
      m2m_kernel<decltype(order)::value><<<(level_size(d) + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
          tree, level(d), level_size(d), wanted_.data(), m_slot, m_.data());
    });
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  if (kernel_ == KernelKind::newtonian) {
    // Vacuum's M2L and M2P read the multipoles in float, as their pairs' arithmetic, scaled by
    // the nodes' radii.
    const int stride = float_multipole_stride(nm_);
    const std::size_t moments = nn * static_cast<std::size_t>(stride);
    m_float_.ensure(moments);
    multipoles_to_float<<<static_cast<unsigned>((moments + 255) / 256), 256, 0, stream>>>(
        m_.data(), wanted_.data(), tree.geometry, nm_, stride, moments, m_float_.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
}

void DeviceFmm::expand(const FmmTreeView& tree, const InteractionTask* m2l, const std::uint64_t* m2l_offsets,
                       std::size_t m2l_count, double box, cudaStream_t stream, const LeafCellLists& leaf_cell) {
  const std::size_t nn = tree.n_nodes;
  if (nn == 0) return;
  l_.ensure(expansion_slots(1, nn) * static_cast<std::size_t>(nl_));
  active_.ensure(nn);
  const std::uint32_t* m_slot = compact_ ? m_slot_.data() : nullptr;
  const std::uint32_t* l_slot = compact_ ? l_slot_.data() : nullptr;
  const int* base = tables_.data();
  const auto at = [&](int i) { return base + table_offsets_[static_cast<std::size_t>(i)]; };
  const Tables tb{at(0), at(1), at(2), at(3)};
  const std::vector<std::size_t>& off = *tree.level_offset;
  const int depths = static_cast<int>(off.size()) - 1;
  auto level = [&](int d) { return tree.level_nodes + off[static_cast<std::size_t>(d)]; };
  auto level_size = [&](int d) {
    return static_cast<std::uint32_t>(off[static_cast<std::size_t>(d) + 1] - off[static_cast<std::size_t>(d)]);
  };
  const fmm_detail::Pass pass = pass_of(tree, stream);
  const int sms = pass.sms;
  // The chunks' arrays, shared by M2L, P2L and M2P (one after the other on the stream). A
  // chunk: enough tasks that the chunks are at most kMaxChunks (their partial expansions'
  // memory is bounded: bytes_for), at least kMinChunk (a chunk is a warp's work; below that
  // the partials cost more than they save).
  const std::uint64_t min_chunk = min_chunk_tasks();
  const std::uint64_t chunk = fmm_detail::chunk_tasks(m2l_count, min_chunk, kMaxChunks);
  const std::size_t max_chunks = fmm_detail::chunks_bound(m2l_count, chunk, kMaxChunks);
  const bool pairs = leaf_cell.count > 0;
  // M2P's partial entries are bounded by this size, which sets its chunk: a fixed number, not
  // the array's capacity, so the chunks (and the sums) do not depend on earlier steps.
  partial_doubles_ = (pairs ? kMaxChunks : max_chunks) * static_cast<std::size_t>(nl_);
  chunk_start_.ensure(nn + 1);
  partial_.ensure(partial_doubles_);
  chunk_totals_.ensure(3);
  ORBIS_CUDA_CHECK(cudaMemsetAsync(chunk_totals_.data(), 0, 3 * sizeof(std::uint32_t), stream));
  if (pairs) {
    entry_start_.ensure(tree.n_leaves + 1);
    leaf_work_.ensure(tree.n_leaves + 1);
  }
  const fmm_detail::ChunkArrays arrays = chunk_arrays();

  if (kernel_ == KernelKind::newtonian) {   // vacuum: ~8 M2L a particle, a thread each
    fmm_detail::m2l_newtonian(pass, m2l, m2l_offsets, chunk, max_chunks, arrays, m_float_.data(), l_.data(),
                              active_.data());
  } else {
    fmm_detail::scan_task_chunks(pass, m2l_offsets, nn, chunk, arrays, arrays.totals);
    m2l_chunk_kernel<<<stride_grid(max_chunks, sms), kThreads, 0, stream>>>(
        tb, order_, nm_, nl_, kernel_, r_s_, cut_shift_, eps2_, tree, m2l, m2l_offsets, chunk_start_.data(), chunk,
        max_chunks, box, m_.data(), m_slot, partial_.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    m2l_kernel<<<stride_grid(nn, sms), kThreads, 0, stream>>>(tb, order_, nm_, nl_, kernel_, r_s_, cut_shift_, eps2_, tree,
                                                              m2l, m2l_offsets, chunk_start_.data(), partial_.data(), box,
                                                              m_.data(), m_slot, l_.data(), l_slot, active_.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  if (pairs) fmm_detail::p2l(pass, leaf_cell, min_chunk, kMaxChunks, arrays, l_.data(), active_.data());
  for (int d = 0; d + 1 < depths; ++d) {
    if (level_size(d) == 0) continue;
    fmm_detail::with_order(order_, [&](auto order) {
      l2l_kernel<decltype(order)::value><<<(2 * level_size(d) + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
          tree, level(d), level_size(d), l_.data(), l_slot, active_.data());
    });
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  if (pairs) {
    // The field alone (G m = 1, added to zeros: stored exactly); evaluate() scales and adds it.
    m2p_field_.ensure(3 * tree.n_particles);
    ORBIS_CUDA_CHECK(cudaMemsetAsync(m2p_field_.data(), 0, 3 * tree.n_particles * sizeof(double), stream));
    fmm_detail::m2p(pass, leaf_cell, min_chunk, arrays, m_float_.data(), 1.0, m2p_field_.data());
  }
}

void DeviceFmm::evaluate(const FmmTreeView& tree, double g_mass, double* acc, cudaStream_t stream,
                         const LeafCellLists& leaf_cell) {
  if (tree.n_nodes == 0) return;
  fmm_detail::with_order(order_, [&](auto order) {
    l2p_kernel<decltype(order)::value><<<warp_blocks(tree.n_leaves), kThreads, 0, stream>>>(
        tree, l_.data(), compact_ ? l_slot_.data() : nullptr, active_.data(), g_mass, acc);
  });
  ORBIS_CUDA_CHECK(cudaGetLastError());
  if (leaf_cell.count > 0) {
    const std::size_t n = 3 * tree.n_particles;
    add_scaled<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(m2p_field_.data(), g_mass, n, acc);
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace orbis::gpu
