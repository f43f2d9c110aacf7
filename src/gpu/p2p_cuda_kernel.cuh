// The P2P kernel (Wang et al. 2021, PhotoNs-GPU, Algorithms 1 and 2).
//
// Work unit: one target-leaf group (GroupIdx) per thread block at a time; persistent blocks
// take groups from an integer counter (which block takes a group does not change its sums:
// results stay bitwise reproducible).
//
// Keeping 4 warps busy on leaves of ~32 particles: thread t of the block serves target
// particle i = t % n and "phase" p = t / n (n = targets in the leaf, P = 128 / n phases);
// phase p takes the p-th of P contiguous runs of each tile. A 24-particle leaf keeps 120
// of 128 threads busy instead of 24. The P partial sums of a particle are added in phase
// order at the end (deterministic second stage, no atomics); each particle is written once.
// With an active subset (hierarchical steps) the targets are the leaf's active particles
// only, so a leaf with 3 of its 32 particles active takes 42 phases and about a tenth of
// the time of the whole leaf. The phases follow the number of targets, so an active
// particle's sum is the full computation's in another order (bitwise the same when its
// whole leaf is active) and depends on which of its leaf-mates are active, never on the
// run's ranks or the block that takes the group.
//
// Sources: the group's tasks are consumed in tiles of up to 8 source leaves / 256 particles.
// Warp 0 reads the next tile's task entries (shuffle prefix sum over the 8 leaf counts),
// every thread then loads its (at most 2) source particles into registers, shifted into the
// target leaf's frame (shift = c_j + image*L - c_i, computed in double, rounded once), and
// those loads are in flight while the block computes the current tile from shared memory
// (register-staged double buffering; one __syncthreads per tile).
//
// Table in shared memory, nearest node, in one of two forms of the same series: per-node
// coefficients c0..c3 (one 16-byte load, 3 FMAs for order 3; the default, fewer
// instructions) or eq. 2's {T_i, E_i} with the factors derived from x_i per pair.
// Accumulation: float partial sums per tile in registers, added into double per tile (the
// CPU evaluator does the same per task), so float results keep ~1e-7 with 10^4 neighbours.
//
// Individual masses (isolated systems with Particles::masses): the Newtonian kernel has a
// second instantiation, Weighted, whose sources carry their weight w_j = m_j / m (rounded to
// R) in the R4's otherwise unused w component and whose pair factor is multiplied by it
// (p2p_pair_weighted); w = 1 gives the unweighted kernel's bits. It is a template argument,
// not a flag, so the periodic kernels (and the Newtonian one without masses) keep their
// instructions and registers: nothing of it is compiled into them.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "fmm/p2p_grouping.hpp"
#include "fmm/p2p_kernel.hpp"
#include "fmm/tasks.hpp"

namespace orbis::gpu {

constexpr int kBlock = 128;      // threads per block (4 warps per target group)
#ifndef ORBIS_P2P_MIN_BLOCKS
#define ORBIS_P2P_MIN_BLOCKS 10   // resident blocks per SM the register budget must allow
                                  // (48 registers; 8: 7.07e11, 10: 7.23e11, 12: 7.19e11 on H100)
#endif
#ifndef ORBIS_P2P_TILE_CAP
#define ORBIS_P2P_TILE_CAP 256
#endif
constexpr int kTileCap = ORBIS_P2P_TILE_CAP;   // source particles per tile, at most (<= 512)
constexpr int kTileTasks = kTileCap / 32;      // source leaves per tile, at most (<= 32)
constexpr int kSlots = kTileCap / kBlock;
static_assert(kTileCap % kBlock == 0 && kTileCap <= 512 && kTileTasks <= 32, "tile geometry");

// Leaf as the host stores it (tasks.hpp), read field by field on the device.
struct DeviceLeaf {
  std::uint32_t first, count;
  double cx, cy, cz;
};
static_assert(sizeof(DeviceLeaf) == sizeof(Leaf), "DeviceLeaf mirrors orbis::Leaf");

template <typename R> struct Vec4Of;
template <> struct Vec4Of<float> { using type = float4; };
template <> struct Vec4Of<double> { using type = double4_32a; };
template <typename R> struct Vec2Of;
template <> struct Vec2Of<float> { using type = float2; };
template <> struct Vec2Of<double> { using type = double2; };

// eq. 2 as written: {T_i, E_i} interleaved (one 8-byte load), factors derived from x_i.
template <typename R>
struct InterleavedTableReader {
  static constexpr bool kCoefficients = false;
  const typename Vec2Of<R>::type* te;
  __device__ __forceinline__ void operator()(int i, R& ti, R& ei) const {
    const auto v = te[i];
    ti = v.x;
    ei = v.y;
  }
};

// The coefficient form (truncation_taylor_coef): {c0, c1, c2, c3} in one 16-byte load
// (8 bytes for orders 0-1), c4 from a second array for order 4. Double: plain indexing.
template <typename R>
struct SharedCoefReader {
  static constexpr bool kCoefficients = true;
  const typename Vec4Of<R>::type* c0123;
  const R* c4;
  __device__ SharedCoefReader(const typename Vec4Of<R>::type* c, const R* c_4) : c0123(c), c4(c_4) {}
  template <int Order>
  __device__ __forceinline__ void load(std::int64_t bits, R* out) const {
    const int i = node_from_bits(bits);
    if constexpr (Order <= 1) {
      const auto v = reinterpret_cast<const typename Vec2Of<R>::type*>(c0123)[2 * i];
      out[0] = v.x;
      if constexpr (Order == 1) out[1] = v.y;
    } else {
      const auto v = c0123[i];
      out[0] = v.x;
      out[1] = v.y;
      out[2] = v.z;
      if constexpr (Order >= 3) out[3] = v.w;
      if constexpr (Order == 4) out[4] = c4[i];
    }
  }
};

// Float: the rounded bits become a shared-memory address in one multiply-add (the bias of
// the rounding constant is folded into the base once), and the load is ld.shared directly.
template <>
struct SharedCoefReader<float> {
  static constexpr bool kCoefficients = true;
  unsigned base16;   // shared address of {c0..c3}[0] - kRoundedBitsZeroF * 16 (mod 2^32)
  unsigned base4;    // shared address of c4[0] - kRoundedBitsZeroF * 4
  // The biased bases come from shared memory (see stage()): a value ptxas cannot see
  // through, so it cannot split the bias off again and add it per pair (it does so for a
  // value it computed itself, even behind an asm mov).
  __device__ SharedCoefReader(unsigned biased16, unsigned biased4) : base16(biased16), base4(biased4) {}
  template <int Order>
  __device__ __forceinline__ void load(std::int32_t bits, float* out) const {
    const unsigned addr = static_cast<unsigned>(bits) * 16u + base16;
    if constexpr (Order <= 1) {
      float a, b;
      asm("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(a), "=f"(b) : "r"(addr));
      out[0] = a;
      if constexpr (Order == 1) out[1] = b;
    } else {
      float a, b, c, d;
      asm("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(a), "=f"(b), "=f"(c), "=f"(d) : "r"(addr));
      out[0] = a;
      out[1] = b;
      out[2] = c;
      if constexpr (Order >= 3) out[3] = d;
      if constexpr (Order == 4) {
        float e;
        asm("ld.shared.f32 %0, [%1];" : "=f"(e) : "r"(static_cast<unsigned>(bits) * 4u + base4));
        out[4] = e;
      }
    }
  }
};

// Dynamic shared memory for the table: coefficient form, R4 per node (+ R for c4 at order
// 4); eq. 2 form, R2 per node.
template <typename R>
constexpr std::size_t table_smem_bytes(int size, bool coef, int order) {
  return coef ? size * (sizeof(typename Vec4Of<R>::type) + (order == 4 ? sizeof(R) : 0))
              : size * sizeof(typename Vec2Of<R>::type);
}

template <typename R>
struct P2PKernelArgs {
  const GroupIdx* groups;
  const std::uint32_t* n_groups;         // on the device: written by the grouping, no host sync
  const std::uint32_t* sources;          // TaskGroup: packed sources (tasks.hpp), sorted by target
  const DeviceLeaf* leaves;
  const R* x;                            // leaf-relative positions, tree order, Mpc/h
  const R* y;
  const R* z;
  const typename Vec2Of<R>::type* table; // {T_i, E_i} (eq. 2 form)
  const typename Vec4Of<R>::type* coef;  // {c0, c1, c2, c3} (coefficient form)
  const R* coef4;                        // c4
  int table_size;
  P2PPairConstants<R> k;
  double box;
  double* acc;                           // 3 doubles per particle (Vec3d layout), pre-zeroed
  std::uint32_t* next_group;             // work counter, zeroed before the launch
  unsigned long long* counters;          // nullptr, or {lane slots issued, pairs evaluated}
  // null: every particle of every target leaf is a target. Else the exclusive prefix sum of
  // the particles' active flags in tree order (n + 1 entries; hierarchical steps' active
  // subset): only active particles are targets, packed so that a leaf with k of its n
  // particles active costs about k / n of the whole leaf (see the kernel).
  const std::uint32_t* active_prefix = nullptr;
  // The Weighted kernel only: each particle's weight m_i / m, tree order (the others never
  // read it; it comes last so that the other fields keep their parameter offsets).
  const double* weights = nullptr;
};

// The tree position of the leaf's r-th active particle: the first position q of
// [first, first + count) with prefix[q + 1] > prefix[first] + r (prefix rises by 0 or 1).
__device__ __forceinline__ std::uint32_t nth_active(const std::uint32_t* prefix, std::uint32_t first,
                                                    std::uint32_t count, std::uint32_t r) {
  const std::uint32_t want = prefix[first] + r;
  std::uint32_t lo = first, hi = first + count - 1;
  while (lo < hi) {
    const std::uint32_t mid = (lo + hi) / 2;
    if (prefix[mid + 1] > want) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

// The tree position of the leaf's r-th target.
template <typename R>
__device__ __forceinline__ std::uint32_t target_position(const P2PKernelArgs<R>& a, const DeviceLeaf& li,
                                                         std::uint32_t r) {
  return a.active_prefix ? nth_active(a.active_prefix, li.first, li.count, r) : li.first + r;
}

template <typename R>
struct TileMeta {
  std::uint32_t first[kTileTasks];
  std::uint32_t off[kTileTasks + 1];     // prefix of the leaf counts; off[n_tasks] = total
  R shift[kTileTasks][3];
  int n_tasks;                           // 0: the group's task list is exhausted
};

// Warp 0 only (cursor is warp-uniform): the next tile of the group's task list.
template <typename R>
__device__ __forceinline__ void build_tile(const P2PKernelArgs<R>& a, const DeviceLeaf& li,
                                           std::uint32_t& cursor, std::uint32_t end,
                                           TileMeta<R>& m) {
  const int lane = threadIdx.x & 31;
  std::uint32_t cnt = 0, first = 0;
  R sh0 = 0, sh1 = 0, sh2 = 0;
  const bool have = lane < kTileTasks && cursor + lane < end;
  if (have) {
    const std::uint32_t w = a.sources[cursor + lane];
    const DeviceLeaf lj = a.leaves[packed_leaf(w)];
    cnt = lj.count;
    first = lj.first;
    const double scale = a.k.length_scale;   // into table units, like the positions
    sh0 = static_cast<R>((lj.cx + packed_image(w, 0) * a.box - li.cx) * scale);
    sh1 = static_cast<R>((lj.cy + packed_image(w, 1) * a.box - li.cy) * scale);
    sh2 = static_cast<R>((lj.cz + packed_image(w, 2) * a.box - li.cz) * scale);
  }
  std::uint32_t inc = cnt;   // inclusive prefix over lanes 0..kTileTasks-1
#pragma unroll
  for (int d = 1; d < kTileTasks; d <<= 1) {
    const std::uint32_t v = __shfl_up_sync(0xffffffffu, inc, d);
    if (lane >= d) inc += v;
  }
  const bool take = have && inc <= static_cast<std::uint32_t>(kTileCap);   // a prefix of lanes
  const int n = __popc(__ballot_sync(0xffffffffu, take));
  if (take) {
    m.first[lane] = first;
    m.off[lane] = inc - cnt;
    m.shift[lane][0] = sh0;
    m.shift[lane][1] = sh1;
    m.shift[lane][2] = sh2;
    if (lane == n - 1) m.off[n] = inc;
  }
  if (lane == 0) {
    m.n_tasks = n;
    if (n == 0) m.off[0] = 0;
  }
  cursor += n;
}

// Every thread: its slots of the tile described by m, shifted into the target frame (and,
// Weighted, each source's weight in w).
template <bool Weighted, typename R>
__device__ __forceinline__ void load_slots(const P2PKernelArgs<R>& a, const TileMeta<R>& m,
                                           int total, int n_tasks,
                                           typename Vec4Of<R>::type (&reg)[kSlots]) {
#pragma unroll
  for (int q = 0; q < kSlots; ++q) {
    const int s = threadIdx.x + q * kBlock;
    if (s < total) {
      int k = 0;
#pragma unroll
      for (int c = 1; c < kTileTasks; ++c) k += (c < n_tasks && s >= static_cast<int>(m.off[c]));
      const std::uint32_t idx = m.first[k] + (s - m.off[k]);
      reg[q].x = a.x[idx] + m.shift[k][0];
      reg[q].y = a.y[idx] + m.shift[k][1];
      reg[q].z = a.z[idx] + m.shift[k][2];
      if constexpr (Weighted) reg[q].w = static_cast<R>(a.weights[idx]);
    }
  }
}

// Reader and table copy for the two table forms.
template <typename R, bool Coef> struct KernelTable;
template <typename R> struct KernelTable<R, false> {
  using Reader = InterleavedTableReader<R>;
  template <int Order>
  static __device__ Reader stage(const P2PKernelArgs<R>& a, unsigned char* smem) {
    auto* te = reinterpret_cast<typename Vec2Of<R>::type*>(smem);
    for (int i = threadIdx.x; i < a.table_size; i += kBlock) te[i] = a.table[i];
    return Reader{te};
  }
};
template <typename R> struct KernelTable<R, true> {
  using Reader = SharedCoefReader<R>;
  template <int Order>
  static __device__ Reader stage(const P2PKernelArgs<R>& a, unsigned char* smem) {
    auto* c = reinterpret_cast<typename Vec4Of<R>::type*>(smem);
    R* c4 = reinterpret_cast<R*>(c + a.table_size);
    for (int i = threadIdx.x; i < a.table_size; i += kBlock) {
      c[i] = a.coef[i];
      if constexpr (Order == 4) c4[i] = a.coef4[i];
    }
    if constexpr (std::is_same_v<R, float>) {
      __shared__ unsigned bases[2];
      if (threadIdx.x == 0) {
        bases[0] = static_cast<unsigned>(__cvta_generic_to_shared(c)) -
                   static_cast<unsigned>(kRoundedBitsZeroF) * 16u;
        bases[1] = static_cast<unsigned>(__cvta_generic_to_shared(c4)) -
                   static_cast<unsigned>(kRoundedBitsZeroF) * 4u;
      }
      __syncthreads();
      return Reader(*static_cast<volatile unsigned*>(&bases[0]), *static_cast<volatile unsigned*>(&bases[1]));
    } else {
      return Reader(c, c4);
    }
  }
};

// Weighted: the sources' weights (a.weights) multiply their pairs; only for the Newtonian
// kernel (Order == kNoTruncation), the only one with individual masses.
template <int Order, typename R, bool Coef, bool Weighted = false>
__global__ void __launch_bounds__(kBlock, ORBIS_P2P_MIN_BLOCKS)
    p2p_groups_kernel(const P2PKernelArgs<R> a) {
  static_assert(!Weighted || Order == kNoTruncation, "weights only with the Newtonian kernel");
  using R4 = typename Vec4Of<R>::type;
  extern __shared__ __align__(32) unsigned char dynamic_smem[];   // the table
  __shared__ R4 buf[2][kTileCap];
  __shared__ TileMeta<R> meta[2];
  __shared__ std::uint32_t group_slot;
  // The phase sums are reduced through buf once the tiles are done (saves 3 KB per block:
  // shared memory, not registers, caps the resident blocks here).
  static_assert(sizeof(buf) >= 3 * kBlock * sizeof(double), "reduction fits in buf");
  double* red = reinterpret_cast<double*>(&buf[0][0]);

  const auto reader = KernelTable<R, Coef>::template stage<Order>(a, dynamic_smem);
  const int t = threadIdx.x;
  const bool warp0 = t < 32;
  const std::uint32_t n_groups = *a.n_groups;
  unsigned long long issued = 0, useful = 0;

  for (;;) {
    if (t == 0) group_slot = atomicAdd(a.next_group, 1u);
    __syncthreads();   // also orders the table copy and the previous group's last reads
    const std::uint32_t g = group_slot;
    __syncthreads();   // everyone has g before thread 0 may overwrite group_slot
    if (g >= n_groups) break;
    const GroupIdx grp = a.groups[g];
    const DeviceLeaf li = a.leaves[grp.i_leaf];
    const std::uint32_t targets =
        a.active_prefix ? a.active_prefix[li.first + li.count] - a.active_prefix[li.first] : li.count;
    if (targets == 0) continue;   // block-uniform
    for (std::uint32_t i0 = 0; i0 < targets; i0 += kBlock) {
      const int n = min(kBlock, static_cast<int>(targets - i0));
      const int P = kBlock / n;
      const float inv_p = 1.0f / static_cast<float>(P);
      const int my_i = t % n, phase = t / n;
      const bool active = phase < P;
      R xi = 0, yi = 0, zi = 0;
      if (active) {
        const std::uint32_t idx = target_position(a, li, i0 + my_i);
        xi = a.x[idx];
        yi = a.y[idx];
        zi = a.z[idx];
      }
      double sx = 0, sy = 0, sz = 0;
      std::uint32_t cursor = grp.start;
      const std::uint32_t end = grp.start + grp.count;
      if (warp0) build_tile(a, li, cursor, end, meta[0]);
      __syncthreads();
      int cur = 0;
      int n_tasks = meta[0].n_tasks;
      int total = meta[0].off[n_tasks];
      R4 reg[kSlots];
      load_slots<Weighted>(a, meta[0], total, n_tasks, reg);
      while (n_tasks > 0) {
#pragma unroll
        for (int q = 0; q < kSlots; ++q) {
          const int s = t + q * kBlock;
          if (s < total) buf[cur][s] = reg[q];
        }
        if (warp0) build_tile(a, li, cursor, end, meta[cur ^ 1]);
        __syncthreads();
        const int cur_total = total;
        n_tasks = meta[cur ^ 1].n_tasks;
        total = meta[cur ^ 1].off[n_tasks];
        if (n_tasks > 0) load_slots<Weighted>(a, meta[cur ^ 1], total, n_tasks, reg);   // next tile
        // Phase p takes a contiguous run of the tile (unit stride, so the loop unrolls).
        // ceil(cur_total / P) by a float reciprocal: exact for cur_total <= 512, P <= 128
        // (checked exhaustively), and ~16 instructions cheaper than an integer division.
        const int chunk = static_cast<int>(static_cast<float>(cur_total + P - 1) * inv_p + 1e-4f);
        const int j0 = min(phase * chunk, cur_total);
        const int j1 = min(j0 + chunk, cur_total);
        if (active) {
          R ax = 0, ay = 0, az = 0;
          const R4* b = buf[cur];
#pragma unroll 4
          for (int j = j0; j < j1; ++j) {
            const R4 q = b[j];
            if constexpr (Weighted)
              p2p_pair_weighted<Order>(q.x - xi, q.y - yi, q.z - zi, q.w, a.k, reader, ax, ay, az);
            else
              p2p_pair<Order>(q.x - xi, q.y - yi, q.z - zi, a.k, reader, ax, ay, az);
          }
          sx += ax;
          sy += ay;
          sz += az;
        }
        if (a.counters) {   // active-thread fraction: a warp costs its slowest lane
          const int mine = active ? j1 - j0 : 0;
          const unsigned most = __reduce_max_sync(0xffffffffu, static_cast<unsigned>(mine));
          const unsigned sum = __reduce_add_sync(0xffffffffu, static_cast<unsigned>(mine));
          if ((t & 31) == 0) { issued += 32ull * most; useful += sum; }
        }
        cur ^= 1;
      }
      // Deterministic second stage: the P phase sums of each particle, in phase order.
      __syncthreads();   // every thread is done reading buf
      if (active) {
        red[t] = sx;
        red[kBlock + t] = sy;
        red[2 * kBlock + t] = sz;
      }
      __syncthreads();
      if (t < n) {
        double x = 0, y = 0, z = 0;
        for (int p = 0; p < P; ++p) {
          x += red[p * n + t];
          y += red[kBlock + p * n + t];
          z += red[2 * kBlock + p * n + t];
        }
        const std::size_t idx = target_position(a, li, i0 + t);   // found again: one register less in the loop
        a.acc[3 * idx + 0] = a.k.acc_scale * x;
        a.acc[3 * idx + 1] = a.k.acc_scale * y;
        a.acc[3 * idx + 2] = a.k.acc_scale * z;
      }
      __syncthreads();   // red, buf and meta are reused by the next chunk or group
    }
  }
  if (a.counters && (t & 31) == 0) {
    atomicAdd(&a.counters[0], issued);   // integer atomics: exact, order-independent
    atomicAdd(&a.counters[1], useful);
  }
}

}  // namespace orbis::gpu
