// The x86-64-v3 (AVX2 + FMA) instance of the tiled P2P kernel (p2p_cpu_tiled_kernel.inl): 8
// float lanes, lane masks as vectors, gather indices clamped to the table (AVX2 masks for
// 64-bit gathers would cost more than the clamp), a permute table for the tile fill.
// Same isolation as the AVX-512 file: only this file's anonymous namespace is compiled for
// x86-64-v3, and the dispatcher calls it only on such CPUs.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>

#include "core/error.hpp"
#include "fmm/p2p_cpu_tiled_impl.hpp"
#include "fmm/p2p_prepare.hpp"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define ORBIS_TILED_AVX2 1
#include <immintrin.h>
#else
#define ORBIS_TILED_AVX2 0
#endif

namespace orbis::p2p_tiled {

#if ORBIS_TILED_AVX2
namespace {

// For each 8-bit keep mask, the lanes to move to the front (vpermps indices): the AVX2
// stand-in for AVX-512's compress. Plain integers, built once.
struct CompressTable {
  std::array<std::array<std::int32_t, 8>, 256> idx{};
  CompressTable() {
    for (int m = 0; m < 256; ++m) {
      int k = 0;
      for (int l = 0; l < 8; ++l)
        if (m & (1 << l)) idx[m][k++] = l;
      for (; k < 8; ++k) idx[m][k] = 0;
    }
  }
};
const CompressTable kCompress;

}  // namespace

// GCC 12 reports the self-initialised placeholders inside its own gather intrinsics
// (_mm256_undefined_pd) as "maybe uninitialized" wherever they are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v3")
namespace {

struct S {
  static constexpr int W = 8;
  using F = __m256;
  using M = __m256;   // all-ones lanes where true
  static F set1(float a) { return _mm256_set1_ps(a); }
  static F zero() { return _mm256_setzero_ps(); }
  static F load(const float* p) { return _mm256_load_ps(p); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fnmadd(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }
  static M lt(F a, F b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static bool any(M m) { return _mm256_movemask_ps(m) != 0; }
  static F keep(M m, F a) { return _mm256_and_ps(m, a); }

  // 1/sqrt exactly rounded (sqrt, then divide), as the generic loop: the 12-bit estimate
  // of AVX2 with one Newton step would leave ~2 ulp, always low (a bias of the forces).
  // (Here measured no faster: 1.63e9 vs 1.61e9 pairs/s.)
  template <typename C>
  static F rsqrt(F s2, const C&) {
    return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_sqrt_ps(s2));
  }

  // Lanes outside the cut may carry any u: their index is clamped to the last node, which
  // keeps every load inside the table (the caller discards those lanes).
  static __m256i index(M, F r, int last) {
    return _mm256_min_epi32(_mm256_castps_si256(r), _mm256_set1_epi32(kRoundedBitsZeroF + last));
  }
  static F gather1(M m, F r, const void* base, int last) {
    return _mm256_i32gather_ps(static_cast<const float*>(base), index(m, r, last), 4);
  }
  // {a, b} pairs of 8 nodes: two 64-bit gathers of 4, lanes {0,1,4,5} and {2,3,6,7}, so
  // that one in-lane shuffle each puts a and b back in lane order.
  static void gather2(M m, F r, const void* base, int last, F& a, F& b) {
    const __m256i idx = _mm256_permutevar8x32_epi32(index(m, r, last),
                                                    _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
    const double* p = static_cast<const double*>(base);
    const __m256 lo = _mm256_castpd_ps(_mm256_i32gather_pd(p, _mm256_castsi256_si128(idx), 8));
    const __m256 hi = _mm256_castpd_ps(_mm256_i32gather_pd(p, _mm256_extracti128_si256(idx, 1), 8));
    a = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    b = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
  }

  static int append(float* sx, float* sy, float* sz, float* sw, int m, const float* x, const float* y,
                    const float* z, const float* w, int n, float shx, float shy, float shz, float reach2) {
    const F vx = set1(shx), vy = set1(shy), vz = set1(shz), r2 = set1(reach2);
    for (int o = 0; o < n; o += W) {
      const int valid = std::min(W, n - o);
      const __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(valid),
                                               _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      const F px = add(_mm256_maskload_ps(x + o, lanes), vx);
      const F py = add(_mm256_maskload_ps(y + o, lanes), vy);
      const F pz = add(_mm256_maskload_ps(z + o, lanes), vz);
      const F d2 = fmadd(pz, pz, fmadd(py, py, mul(px, px)));
      const int in = _mm256_movemask_ps(_mm256_and_ps(lt(d2, r2), _mm256_castsi256_ps(lanes)));
      const __m256i perm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kCompress.idx[in].data()));
      _mm256_storeu_ps(sx + m, _mm256_permutevar8x32_ps(px, perm));
      _mm256_storeu_ps(sy + m, _mm256_permutevar8x32_ps(py, perm));
      _mm256_storeu_ps(sz + m, _mm256_permutevar8x32_ps(pz, perm));
      if (w) _mm256_storeu_ps(sw + m, _mm256_permutevar8x32_ps(_mm256_maskload_ps(w + o, lanes), perm));
      m += _mm_popcnt_u32(static_cast<unsigned>(in));
    }
    return m;
  }

  // 8 float lane sums into 8 double lanes.
  static void flush(double* d, F f) {
    _mm256_store_pd(d, _mm256_add_pd(_mm256_load_pd(d), _mm256_cvtps_pd(_mm256_castps256_ps128(f))));
    _mm256_store_pd(d + 4, _mm256_add_pd(_mm256_load_pd(d + 4), _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1))));
  }
  static double reduce(const double* d) {   // a fixed tree over the 8 lanes
    const __m256d a = _mm256_add_pd(_mm256_load_pd(d), _mm256_load_pd(d + 4));
    const __m128d b = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    return _mm_cvtsd_f64(_mm_add_sd(b, _mm_unpackhi_pd(b, b)));
  }
};
using F = S::F;
using M = S::M;

#include "fmm/p2p_cpu_tiled_kernel.inl"

}  // namespace
#pragma GCC pop_options
#pragma GCC diagnostic pop

bool have_avx2_kernels() { return true; }
void run_avx2(int taylor_order, const Job& job) { run_any_order(taylor_order, job); }

#else

bool have_avx2_kernels() { return false; }
void run_avx2(int, const Job&) { fail("tiled P2P: no AVX2 kernel in this build"); }

#endif

}  // namespace orbis::p2p_tiled
