// The x86-64-v4 (AVX-512) instance of the tiled P2P kernel (p2p_cpu_tiled_kernel.inl): 16
// float lanes, mask registers for the cut, 64-bit gathers of 8 lanes for table pairs,
// compress for the tile fill.
//
// Only the code between push_options and pop_options is compiled for x86-64-v4, and all of
// it sits in an anonymous namespace: no inline function of another header (std::vector, ...)
// is instantiated with AVX-512 instructions that the linker could then pick for code running
// on older CPUs; the dispatcher calls run_avx512() only after the CPU said it has x86-64-v4.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>

#include "core/error.hpp"
#include "fmm/p2p_cpu_tiled_impl.hpp"
#include "fmm/p2p_prepare.hpp"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define ORBIS_TILED_AVX512 1
#include <immintrin.h>
#else
#define ORBIS_TILED_AVX512 0
#endif

namespace orbis::p2p_tiled {

#if ORBIS_TILED_AVX512
// GCC 12 reports the self-initialised placeholders inside its own AVX-512 intrinsics
// (_mm512_undefined_ps) as "maybe uninitialized" wherever they are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4")
namespace {

struct S {
  static constexpr int W = 16;
  using F = __m512;
  using M = __mmask16;
  static F set1(float a) { return _mm512_set1_ps(a); }
  static F zero() { return _mm512_setzero_ps(); }
  static F load(const float* p) { return _mm512_load_ps(p); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F min(F a, F b) { return _mm512_min_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fnmadd(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
  static M lt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static bool any(M m) { return m != 0; }
  static F keep(M m, F a) { return _mm512_maskz_mov_ps(m, a); }

  // 1/sqrt: the 14-bit estimate and one Newton step written as y + y (1/2 - s2 y^2 / 2), so
  // the last FMA adds a small correction to y (error ~0.5 ulp plus the 2^-28 of the step);
  // 1.2x faster here than sqrt and divide (whose units are not pipelined on 16 lanes).
  template <typename C>
  static F rsqrt(F s2, const C& c) {
    const F y = _mm512_rsqrt14_ps(s2);
    const F r = fnmadd(mul(mul(s2, c.half), y), y, c.half);
    return fmadd(y, r, y);
  }

  static F gather1(M m, F r, const void* base, int) {
    return _mm512_mask_i32gather_ps(zero(), m, _mm512_castps_si512(r), base, 4);
  }
  // {a, b} pairs of 16 nodes: two 64-bit gathers of 8 lanes (half the elements that two
  // 32-bit gathers of 16 would load), then even and odd floats split by two permutes.
  static void gather2(M m, F r, const void* base, int, F& a, F& b) {
    const __m512i bits = _mm512_castps_si512(r);
    const __m512d z = _mm512_setzero_pd();
    const __m512 lo = _mm512_castpd_ps(
        _mm512_mask_i32gather_pd(z, __mmask8(m), _mm512_castsi512_si256(bits), base, 8));
    const __m512 hi = _mm512_castpd_ps(
        _mm512_mask_i32gather_pd(z, __mmask8(m >> 8), _mm512_extracti64x4_epi64(bits, 1), base, 8));
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    a = _mm512_permutex2var_ps(lo, even, hi);
    b = _mm512_permutex2var_ps(lo, odd, hi);
  }

  // Appends the n particles at x/y/z, shifted, to the tile at m, leaving out those at
  // distance^2 >= reach2 from the target frame's origin; returns the new m.
  static int append(float* sx, float* sy, float* sz, float* sw, int m, const float* x, const float* y,
                    const float* z, const float* w, int n, float shx, float shy, float shz, float reach2) {
    const F vx = set1(shx), vy = set1(shy), vz = set1(shz), r2 = set1(reach2);
    for (int o = 0; o < n; o += W) {
      const M valid = n - o >= W ? M(0xFFFF) : M((1u << (n - o)) - 1);
      const F px = add(_mm512_maskz_loadu_ps(valid, x + o), vx);
      const F py = add(_mm512_maskz_loadu_ps(valid, y + o), vy);
      const F pz = add(_mm512_maskz_loadu_ps(valid, z + o), vz);
      const F d2 = fmadd(pz, pz, fmadd(py, py, mul(px, px)));
      const M in = _mm512_mask_cmp_ps_mask(valid, d2, r2, _CMP_LT_OQ);
      _mm512_storeu_ps(sx + m, _mm512_maskz_compress_ps(in, px));
      _mm512_storeu_ps(sy + m, _mm512_maskz_compress_ps(in, py));
      _mm512_storeu_ps(sz + m, _mm512_maskz_compress_ps(in, pz));
      if (w) _mm512_storeu_ps(sw + m, _mm512_maskz_compress_ps(in, _mm512_maskz_loadu_ps(valid, w + o)));
      m += _mm_popcnt_u32(in);
    }
    return m;
  }

  // 16 float lane sums into 8 double lanes: lanes 0-7, then 8-15.
  static void flush(double* d, F f) {
    __m512d acc = _mm512_load_pd(d);
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(f)));
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1))));
    _mm512_store_pd(d, acc);
  }
  static double reduce(const double* d) {   // W = 16 slots, the 8 used ones in a fixed tree
    const __m512d v = _mm512_load_pd(d);
    const __m256d a = _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
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

bool have_avx512_kernels() { return true; }
void run_avx512(int taylor_order, const Job& job) { run_any_order(taylor_order, job); }

#else

bool have_avx512_kernels() { return false; }
void run_avx512(int, const Job&) { fail("tiled P2P: no AVX-512 kernel in this build"); }

#endif

}  // namespace orbis::p2p_tiled
