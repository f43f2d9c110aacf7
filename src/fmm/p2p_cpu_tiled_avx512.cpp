// The x86-64-v4 (AVX-512) tiled P2P kernel, float, Taylor orders 0..4 (p2p_cpu_tiled.hpp).
//
// Only functions marked ORBIS_V4 contain AVX-512 code; the file is compiled for the
// baseline like every other, so no inline function it instantiates (std::vector, ...) can
// leak AVX-512 instructions into code that runs on older CPUs, and the driver calls the
// kernel only after the CPU said it has x86-64-v4.
//
// Per 16 pairs (one source vector against one broadcast target), order 3: 3 sub, 3 FMA for
// r^2, 1 add of eps^2, 1/sqrt, 1 mul for s, 1 min, 2 add/sub of the rounding constant, 1 sub
// for e, 2 64-bit gathers of {c0,c1} and {c2,c3} (8 lanes each, 2 per pair of
// coefficients) and 2 permutes to split them, 3 FMA of Horner, 3 mul for g and the cut
// mask, 3 FMA to accumulate. Same series and same nearest-node rule as p2p_kernel.hpp.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "core/error.hpp"
#include "fmm/p2p_cpu_tiled_impl.hpp"
#include "fmm/p2p_prepare.hpp"

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define ORBIS_HAVE_V4_KERNEL 1
#include <immintrin.h>
// GCC 12 reports the self-initialised placeholders inside its own AVX-512 intrinsics
// (_mm512_undefined_ps) as "maybe uninitialized" wherever they are inlined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define ORBIS_V4 __attribute__((target("arch=x86-64-v4")))
#define ORBIS_V4_INLINE __attribute__((target("arch=x86-64-v4"), always_inline)) inline
#else
#define ORBIS_HAVE_V4_KERNEL 0
#endif

namespace orbis::p2p_tiled {

#if ORBIS_HAVE_V4_KERNEL
namespace {

// 64-byte aligned scratch that does not zero itself (std::vector would, per thread per call).
template <typename T>
struct Aligned {
  T* p = nullptr;
  explicit Aligned(std::size_t n)
      : p(static_cast<T*>(::operator new[](n * sizeof(T), std::align_val_t(64)))) {}
  ~Aligned() { ::operator delete[](p, std::align_val_t(64)); }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
};

// Gather bases biased by the bits of the rounding constant (truncation.hpp,
// rounded_bits()): the sum u + 1.5*2^23 read as an int32 is kRoundedBitsZeroF + node, so it
// serves as the gather index as it is, and the address arithmetic (64-bit, index sign-
// extended) lands on node. Saves one integer subtract per 16 pairs.
struct Bases {
  const void* c01;   // 8-byte elements
  const void* c23;
  const void* c0;    // 4-byte elements
  const void* c2;
  const void* c4;
};

const void* biased(const float* base, std::size_t elem_bytes) {
  return reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(base) -
                                       std::uintptr_t(kRoundedBitsZeroF) * elem_bytes);
}

struct Consts {
  __m512 rcut2, eps2, umax, magic, half, three_halves;
};

// Splits two vectors of {a, b} pairs (lanes 0-7 and 8-15) into a and b.
ORBIS_V4_INLINE void split_pairs(__m512d lo, __m512d hi, __m512& a, __m512& b) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  a = _mm512_permutex2var_ps(_mm512_castpd_ps(lo), even, _mm512_castpd_ps(hi));
  b = _mm512_permutex2var_ps(_mm512_castpd_ps(lo), odd, _mm512_castpd_ps(hi));
}

ORBIS_V4_INLINE void gather_pair(__m512i bits, const void* base, __m512& a, __m512& b) {
  const __m512d lo = _mm512_i32gather_pd(_mm512_castsi512_si256(bits), base, 8);
  const __m512d hi = _mm512_i32gather_pd(_mm512_extracti64x4_epi64(bits, 1), base, 8);
  split_pairs(lo, hi, a, b);
}

// T(u) - the truncated series at the nearest node - for 16 lanes, u >= 0.
template <int Order>
ORBIS_V4_INLINE __m512 taylor16(__m512 s, const Consts& c, const Bases& t) {
  const __m512 u = _mm512_min_ps(s, c.umax);
  const __m512 r = _mm512_add_ps(u, c.magic);   // round to nearest: the node in the low bits
  const __m512i bits = _mm512_castps_si512(r);
  if constexpr (Order == 0) {
    return _mm512_i32gather_ps(bits, t.c0, 4);
  } else {
    const __m512 e = _mm512_sub_ps(u, _mm512_sub_ps(r, c.magic));   // u - node, |e| <= 1/2
    __m512 c0, c1;
    gather_pair(bits, t.c01, c0, c1);
    if constexpr (Order == 1) {
      return _mm512_fmadd_ps(c1, e, c0);
    } else {
      __m512 p;
      if constexpr (Order == 2) {
        p = _mm512_i32gather_ps(bits, t.c2, 4);
      } else {
        __m512 c2, c3;
        gather_pair(bits, t.c23, c2, c3);
        if constexpr (Order == 3) {
          p = _mm512_fmadd_ps(c3, e, c2);
        } else {
          const __m512 c4 = _mm512_i32gather_ps(bits, t.c4, 4);
          p = _mm512_fmadd_ps(_mm512_fmadd_ps(c4, e, c3), e, c2);
        }
      }
      p = _mm512_fmadd_ps(p, e, c1);
      return _mm512_fmadd_ps(p, e, c0);
    }
  }
}

// 16 sources against one target: (a) += g d with g = T(s) / s^3 inside the cut, 0 outside.
template <int Order, int Rsqrt>
ORBIS_V4_INLINE void pair16(__m512 sx, __m512 sy, __m512 sz, __m512 xi, __m512 yi, __m512 zi,
                            const Consts& c, const Bases& t, __m512& ax, __m512& ay, __m512& az) {
  const __m512 dx = _mm512_sub_ps(sx, xi);
  const __m512 dy = _mm512_sub_ps(sy, yi);
  const __m512 dz = _mm512_sub_ps(sz, zi);
  const __m512 r2 = _mm512_fmadd_ps(dz, dz, _mm512_fmadd_ps(dy, dy, _mm512_mul_ps(dx, dx)));
  const __mmask16 inside = _mm512_cmp_ps_mask(r2, c.rcut2, _CMP_LT_OQ);
  const __m512 s2 = _mm512_add_ps(r2, c.eps2);
  __m512 sinv;
  if constexpr (Rsqrt == 0) {
    sinv = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_sqrt_ps(s2));
  } else {
    const __m512 y = _mm512_rsqrt14_ps(s2);
    const __m512 hs2 = _mm512_mul_ps(s2, c.half);
    sinv = _mm512_mul_ps(y, _mm512_fnmadd_ps(hs2, _mm512_mul_ps(y, y), c.three_halves));
  }
  const __m512 s = _mm512_mul_ps(s2, sinv);
  const __m512 tr = taylor16<Order>(s, c, t);
  const __m512 g = _mm512_maskz_mul_ps(inside, _mm512_mul_ps(tr, sinv), _mm512_mul_ps(sinv, sinv));
  ax = _mm512_fmadd_ps(g, dx, ax);
  ay = _mm512_fmadd_ps(g, dy, ay);
  az = _mm512_fmadd_ps(g, dz, az);
}

// Adds 16 float lane sums into 8 double lane sums (lanes 0-7, then 8-15).
ORBIS_V4_INLINE void flush(double* d, __m512 f) {
  __m512d acc = _mm512_load_pd(d);
  acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(f)));
  acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1))));
  _mm512_store_pd(d, acc);
}

struct Scratch {
  int cap;                      // sources per tile
  Aligned<float> sx, sy, sz;    // cap + 16: full-vector stores may run 15 past the last source
  Aligned<double> sums;         // 3 x 8 double lanes per target particle
  Scratch(int cap_, std::uint32_t max_count)
      : cap(cap_), sx(cap_ + 32), sy(cap_ + 32), sz(cap_ + 32), sums(24 * std::size_t(max_count) + 8) {}
};

// Far from every target: the cut mask drops these lanes (r^2 ~ 1e30 stays finite in float).
constexpr float kFar = 1e15f;

template <int Order, int Rsqrt>
ORBIS_V4 void group_v4(const Job& job, const Bases& bases, const GroupIdx& group, Scratch& sc) {
  const std::vector<Leaf>& leaves = *job.leaves;
  const Leaf& li = leaves[group.i_leaf];
  const int ni = static_cast<int>(li.count);
  const float* xi = job.x + li.first;
  const float* yi = job.y + li.first;
  const float* zi = job.z + li.first;
  const Consts c{_mm512_set1_ps(job.k.rcut2), _mm512_set1_ps(job.k.eps2),
                 _mm512_set1_ps(job.k.u_max), _mm512_set1_ps(12582912.0f),
                 _mm512_set1_ps(0.5f), _mm512_set1_ps(1.5f)};
  const double scale = job.k.length_scale;
  double* sums = sc.sums.p;
  std::memset(sums, 0, 24 * sizeof(double) * std::size_t(ni));
  float* sx = sc.sx.p;
  float* sy = sc.sy.p;
  float* sz = sc.sz.p;

  std::uint32_t cursor = group.start;
  const std::uint32_t end = group.start + group.count;
  while (cursor < end) {
    // Fill a tile with whole source leaves, each shifted into the target frame.
    int m = 0;
    while (cursor < end) {
      const InteractionTask& tk = job.grouped->tasks[cursor];
      const Leaf& lj = leaves[tk.source];
      const int nj = static_cast<int>(lj.count);
      if (m > 0 && m + nj > sc.cap) break;
      const Vec3d shift = task_shift(leaves, tk, job.box) * scale;
      const __m512 shx = _mm512_set1_ps(static_cast<float>(shift.x));
      const __m512 shy = _mm512_set1_ps(static_cast<float>(shift.y));
      const __m512 shz = _mm512_set1_ps(static_cast<float>(shift.z));
      for (int o = 0; o < nj; o += 16) {
        const __mmask16 k = nj - o >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (nj - o)) - 1);
        const std::size_t p = std::size_t(lj.first) + o;
        _mm512_storeu_ps(sx + m + o, _mm512_add_ps(_mm512_maskz_loadu_ps(k, job.x + p), shx));
        _mm512_storeu_ps(sy + m + o, _mm512_add_ps(_mm512_maskz_loadu_ps(k, job.y + p), shy));
        _mm512_storeu_ps(sz + m + o, _mm512_add_ps(_mm512_maskz_loadu_ps(k, job.z + p), shz));
      }
      m += nj;
      ++cursor;
    }
    const __m512 far = _mm512_set1_ps(kFar);
    _mm512_storeu_ps(sx + m, far);
    _mm512_storeu_ps(sy + m, far);
    _mm512_storeu_ps(sz + m, far);
    const int nv = (m + 15) / 16;

    // Every target of the leaf against the tile: two targets at a time share the loads.
    int i = 0;
    for (; i + 1 < ni; i += 2) {
      const __m512 xa = _mm512_set1_ps(xi[i]), ya = _mm512_set1_ps(yi[i]), za = _mm512_set1_ps(zi[i]);
      const __m512 xb = _mm512_set1_ps(xi[i + 1]), yb = _mm512_set1_ps(yi[i + 1]),
                   zb = _mm512_set1_ps(zi[i + 1]);
      __m512 axa = _mm512_setzero_ps(), aya = axa, aza = axa, axb = axa, ayb = axa, azb = axa;
      for (int v = 0; v < nv; ++v) {
        const __m512 px = _mm512_load_ps(sx + 16 * v);
        const __m512 py = _mm512_load_ps(sy + 16 * v);
        const __m512 pz = _mm512_load_ps(sz + 16 * v);
        pair16<Order, Rsqrt>(px, py, pz, xa, ya, za, c, bases, axa, aya, aza);
        pair16<Order, Rsqrt>(px, py, pz, xb, yb, zb, c, bases, axb, ayb, azb);
      }
      double* d = sums + 24 * std::size_t(i);
      flush(d, axa); flush(d + 8, aya); flush(d + 16, aza);
      flush(d + 24, axb); flush(d + 32, ayb); flush(d + 40, azb);
    }
    if (i < ni) {
      const __m512 xa = _mm512_set1_ps(xi[i]), ya = _mm512_set1_ps(yi[i]), za = _mm512_set1_ps(zi[i]);
      __m512 axa = _mm512_setzero_ps(), aya = axa, aza = axa;
      for (int v = 0; v < nv; ++v)
        pair16<Order, Rsqrt>(_mm512_load_ps(sx + 16 * v), _mm512_load_ps(sy + 16 * v),
                             _mm512_load_ps(sz + 16 * v), xa, ya, za, c, bases, axa, aya, aza);
      double* d = sums + 24 * std::size_t(i);
      flush(d, axa); flush(d + 8, aya); flush(d + 16, aza);
    }
  }
  const double gm = job.k.acc_scale;
  Vec3d* out = job.acc->data() + li.first;
  for (int i = 0; i < ni; ++i) {
    const double* d = sums + 24 * std::size_t(i);
    out[i] = Vec3d{gm * _mm512_reduce_add_pd(_mm512_load_pd(d)),
                   gm * _mm512_reduce_add_pd(_mm512_load_pd(d + 8)),
                   gm * _mm512_reduce_add_pd(_mm512_load_pd(d + 16))};
  }
}

int rsqrt_variant() {
  static const int v = [] {
    const char* e = std::getenv("ORBIS_P2P_RSQRT");
    return e ? std::atoi(e) : 1;
  }();
  return v;
}

template <int Order, int Rsqrt>
void run_order(const Job& job) {
  const CoefLayout& t = *job.table;
  const Bases bases{biased(t.c01.data(), 8), biased(t.c23.data(), 8), biased(t.c0.data(), 4),
                    biased(t.c2.data(), 4), biased(t.c4.data(), 4)};
  const int cap = std::max<int>(kTiledSources, (static_cast<int>(job.max_count) + 15) / 16 * 16);
  const std::int64_t n_groups = static_cast<std::int64_t>(job.grouped->groups.size());
#pragma omp parallel
  {
    Scratch sc(cap, job.max_count);
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t g = 0; g < n_groups; ++g)
      group_v4<Order, Rsqrt>(job, bases, job.grouped->groups[g], sc);
  }
}

template <int Order>
void run_order(const Job& job) {
  if (rsqrt_variant() == 0) run_order<Order, 0>(job);
  else run_order<Order, 1>(job);
}

}  // namespace

bool have_avx512_kernels() { return true; }

void run_avx512(int taylor_order, const Job& job) {
  switch (taylor_order) {
    case 0: return run_order<0>(job);
    case 1: return run_order<1>(job);
    case 2: return run_order<2>(job);
    case 3: return run_order<3>(job);
    case 4: return run_order<4>(job);
    default: fail("tiled P2P: taylor_order = {} is not in 0..4", taylor_order);
  }
}

#else

bool have_avx512_kernels() { return false; }
void run_avx512(int, const Job&) { fail("tiled P2P: no AVX-512 kernel in this build"); }

#endif

}  // namespace orbis::p2p_tiled
