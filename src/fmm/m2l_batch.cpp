// Eight M2L at a time (m2l_batch.hpp). Per batch of eight (source, R) pairs of one target:
//  1. radial derivatives g_m(|R|), m <= p + 1, per lane (fmm/kernel_derivatives.hpp), of
//     the truncated kernel (erfc from a table) or of 1/r (Newtonian: a template switch);
//  2. D_n(R), |n| <= p + 1, by the McMurchie-Davidson recurrence, all eight lanes at once;
//  3. acc_k += sum_n (-1)^|n| M_n D_(n+k), unrolled: every index is a compile-time constant.
// acc holds eight partial local expansions (one per lane); they are summed in a fixed tree
// at the end. GCC vector types give the eight lanes; the loop is built for x86-64-v4,
// x86-64-v3 and the baseline and picked at run time (as fmm/p2p_cpu.cpp does). The v3/v4
// builds fuse multiply-adds, so results can differ in the last bits between CPUs, never
// between thread counts on one CPU.
#include "fmm/m2l_batch.hpp"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "fmm/kernel_derivatives.hpp"
#include "fmm/derivative_recurrence_ct.hpp"
#include "fmm/multi_index_ct.hpp"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define ORBIS_M2L_MULTIVERSION 1
#else
#define ORBIS_M2L_MULTIVERSION 0
#endif
#if defined(__GNUC__)
#define ORBIS_INLINE [[gnu::always_inline]] inline
#else
#define ORBIS_INLINE inline
#endif

namespace orbis {
namespace {

constexpr int kLanes = M2LBatch::kLanes;
typedef double V __attribute__((vector_size(kLanes * sizeof(double))));

// ---------------------------------------------------------------- compile-time tables
// (the derivative tensors' recurrence: fmm/derivative_recurrence_ct.hpp)

// M2L: for local index k (|k| <= p + 1), the multipoles n = 0 .. n_terms(k) - 1 (those with
// |n| <= p + 1 - |k|, a prefix of the layout) and the index of n + k in the order-(p+1) set.
template <int P>
constexpr int n_terms(int k) {
  const int room = P + 1 - ct::kAll[static_cast<std::size_t>(k)].degree();
  return ct::count(room < P ? room : P);
}
template <int P>
constexpr std::array<std::array<int, ct::count(P)>, ct::count(P + 1)> make_kn() {
  std::array<std::array<int, ct::count(P)>, ct::count(P + 1)> kn{};
  for (int k = 0; k < ct::count(P + 1); ++k)
    for (int n = 0; n < n_terms<P>(k); ++n) {
      const ct::MI a = ct::kAll[static_cast<std::size_t>(k)], b = ct::kAll[static_cast<std::size_t>(n)];
      kn[static_cast<std::size_t>(k)][static_cast<std::size_t>(n)] = ct::index(a.a + b.a, a.b + b.b, a.c + b.c);
    }
  return kn;
}
template <int P> inline constexpr auto kKn = make_kn<P>();

// ---------------------------------------------------------------- radial part
// erfc(x) and e^(-x^2) for eight lanes from a table: nodes x_i = i h, h = 1/64, on
// [0, kXMax]; nearest node, eps = x - x_i (|eps| <= 1/128), and the Taylor series of
// f = e^(-x^2) to eps^8 (f^(k)(x) = (-1)^k H_k(x) f(x), Hermite H_k), whose integral gives
// erfc(x) = erfc(x_i) - (2/sqrt(pi)) sum_k F_k eps^(k+1)/(k+1). Truncation error below
// 1e-15 relative for x <= 3 and 2e-13 at x = 6 (the M2L R never exceeds r_cut <= 6 r_s,
// x <= 3; larger x takes the scalar path). One table for every r_s: x = |R|/(2 r_s).
constexpr int kTerms = 9;                 // F_0 .. F_8
constexpr double kNodesPerUnit = 64;
constexpr double kXMax = 6.5;
constexpr int kNodes = static_cast<int>(kXMax * kNodesPerUnit) + 1;
struct RadialTable {
  // row i: erfc(x_i), F_0 .. F_(kTerms-1); padded to 16 doubles (two cache lines).
  alignas(64) double row[kNodes][16];
  RadialTable() {
    for (int i = 0; i < kNodes; ++i) {
      const double x = i / kNodesPerUnit;
      const double f = std::exp(-x * x);
      double h_prev = 1, h = 2 * x;   // H_0, H_1
      double inv_fact = 1;
      row[i][0] = std::erfc(x);
      row[i][1] = f;                                 // F_0 = H_0 f
      for (int k = 1; k < kTerms; ++k) {
        inv_fact /= k;
        row[i][1 + k] = ((k & 1) ? -h : h) * f * inv_fact;
        const double next = 2 * x * h - 2 * k * h_prev;
        h_prev = h;
        h = next;
      }
      for (int k = 1 + kTerms; k < 16; ++k) row[i][k] = 0;
    }
  }
};
const RadialTable& radial_table() {
  static const RadialTable table;
  return table;
}

// ---------------------------------------------------------------- unrolled kernels

template <int P, int K, std::size_t... J>
ORBIS_INLINE void contract_k(V& acc, const V* sm, const V* D, std::index_sequence<J...>) {
  // Two partial sums: halves the dependent-add chain of the longest rows.
  V s[2] = {};
  ((s[J % 2] += sm[J] * D[kKn<P>[K][J]]), ...);
  acc += s[0] + s[1];
}
template <int P, std::size_t... K>
ORBIS_INLINE void contract(V* acc, const V* sm, const V* D, std::index_sequence<K...>) {
  (contract_k<P, static_cast<int>(K)>(acc[K], sm, D, std::make_index_sequence<n_terms<P>(K)>{}), ...);
}

ORBIS_INLINE void load(V& v, const double* p) { std::memcpy(&v, p, sizeof(V)); }

// g[m] = ((1/r) d/dr)^m [erfc(r/2r_s)/r], m = 0..Q, as truncated_radial_derivatives does
// per lane (the same upward recurrence), with erfc and the Gaussian from the table.
template <int Q>
ORBIS_INLINE void radial(const V* R, double r_s, V* g, double (&g_d)[Q + 1][kLanes],
                         double (&coef_d)[1 + kTerms][kLanes], double (&node_d)[kLanes]) {
  constexpr double kInvSqrtPi = 0.56418958354775628695;
  const double a = 0.5 / r_s;
  const V r2 = R[0] * R[0] + R[1] * R[1] + R[2] * R[2];
  alignas(64) double r_lane[kLanes];
  bool in_table = true;
  for (int l = 0; l < kLanes; ++l) {
    r_lane[l] = std::sqrt(r2[l]);
    const double x = a * r_lane[l];
    in_table &= x <= kXMax - 1.0 / kNodesPerUnit;
    const int i = static_cast<int>(x * kNodesPerUnit + 0.5);
    node_d[l] = i / kNodesPerUnit;
    const double* row = radial_table().row[in_table ? i : 0];
    for (int k = 0; k < 1 + kTerms; ++k) coef_d[k][l] = row[k];
  }
  if (!in_table) {   // some |R| beyond the table (not from the walk): exact per lane
    double g_one[Q + 1];
    for (int l = 0; l < kLanes; ++l) {
      truncated_radial_derivatives(r_lane[l], r_s, Q, g_one);
      for (int m = 0; m <= Q; ++m) g_d[m][l] = g_one[m];
    }
    for (int m = 0; m <= Q; ++m) load(g[m], g_d[m]);
    return;
  }
  V r, node, c[1 + kTerms];
  load(r, r_lane);
  load(node, node_d);
  for (int k = 0; k < 1 + kTerms; ++k) load(c[k], coef_d[k]);
  const V eps = a * r - node;
  // Horner for f = sum F_k eps^k and for I = sum F_k eps^k / (k + 1).
  V f = c[kTerms], integral = c[kTerms] * (1.0 / kTerms);
  for (int k = kTerms - 2; k >= 0; --k) {
    f = f * eps + c[1 + k];
    integral = integral * eps + c[1 + k] * (1.0 / (k + 1));
  }
  const V erfc_x = c[0] - (2 * kInvSqrtPi) * eps * integral;
  const V inv_r2 = 1.0 / r2;
  const V gauss = f * (kInvSqrtPi / a);   // e^(-a^2 r^2) / (a sqrt(pi))
  V b = erfc_x / r;
  g[0] = b;
  double two_a2_pow = 1.0;
  for (int m = 1; m <= Q; ++m) {
    two_a2_pow *= 2.0 * a * a;
    b = ((2 * m - 1) * b + two_a2_pow * gauss) * inv_r2;
    g[m] = (m & 1) ? -b : b;
  }
}

// g[m] = ((1/r) d/dr)^m (1/s), s^2 = r^2 + eps^2, m = 0..Q, as newtonian_radial_derivatives
// does per lane.
template <int Q>
ORBIS_INLINE void radial_newtonian(const V* R, V* g, double eps2) {
  const V r2 = R[0] * R[0] + R[1] * R[1] + R[2] * R[2] + eps2;
  alignas(64) double inv_r_d[kLanes];
  for (int l = 0; l < kLanes; ++l) inv_r_d[l] = 1.0 / std::sqrt(r2[l]);
  V b;
  load(b, inv_r_d);
  const V inv_r2 = 1.0 / r2;
  g[0] = b;
  for (int m = 1; m <= Q; ++m) {
    b = (2 * m - 1) * b * inv_r2;
    g[m] = (m & 1) ? -b : b;
  }
}

template <int P, bool Newtonian>
ORBIS_INLINE void m2l_body(const double* const* mp, const Vec3d* R, std::size_t n, double* local, double r_s,
                           double cut_shift, double eps2) {
  constexpr int Q = P + 1;
  constexpr int nm = ct::count(P), nl = ct::count(Q);
  V acc[nl];
  for (int k = 0; k < nl; ++k) acc[k] = V{};
  alignas(64) double sm_d[nm][kLanes];
  alignas(64) double g_d[Q + 1][kLanes];
  alignas(64) double r_d[3][kLanes];
  alignas(64) double coef_d[1 + kTerms][kLanes];
  alignas(64) double node_d[kLanes];
  for (std::size_t q0 = 0; q0 < n; q0 += kLanes) {
    const int lanes = n - q0 < static_cast<std::size_t>(kLanes) ? static_cast<int>(n - q0) : kLanes;
    // The sources' moments are scattered over the node array (tens of MB): fetch the next
    // batch's while this one computes, or the loads below wait on memory.
    for (std::size_t q = q0 + kLanes; q < q0 + 2 * kLanes && q < n; ++q)
      for (int line = 0; line < nm; line += 8) __builtin_prefetch(mp[q] + line);
    for (int l = 0; l < kLanes; ++l) {
      // Padding lanes repeat lane 0's R (finite D) with zero multipoles (no contribution).
      const bool real = l < lanes;
      const Vec3d& r = R[q0 + (real ? l : 0)];
      r_d[0][l] = r.x;
      r_d[1][l] = r.y;
      r_d[2][l] = r.z;
      const double* m_src = mp[q0 + (real ? l : 0)];
      for (int i = 0; i < nm; ++i) {
        // (-1)^|n|: the layout groups degrees, so the sign is known per position.
        const bool odd = ct::kAll[static_cast<std::size_t>(i)].degree() & 1;
        sm_d[i][l] = real ? (odd ? -m_src[i] : m_src[i]) : 0.0;
      }
    }
    V g[Q + 1], Rv[3], sm[nm];
    for (int d = 0; d < 3; ++d) load(Rv[d], r_d[d]);
    if constexpr (Newtonian)
      radial_newtonian<Q>(Rv, g, eps2);
    else
      radial<Q>(Rv, r_s, g, g_d, coef_d, node_d);
    if (!Newtonian && cut_shift != 0) {   // the shifted cut's terms, per lane (a run's choice: rare to be off)
      alignas(64) double shift_d[Q + 1][kLanes];
      for (int l = 0; l < kLanes; ++l) {
        double t[Q + 1] = {};
        add_cut_shift_derivatives(std::sqrt(r_d[0][l] * r_d[0][l] + r_d[1][l] * r_d[1][l] + r_d[2][l] * r_d[2][l]),
                                  cut_shift, Q, t);
        for (int m = 0; m <= Q; ++m) shift_d[m][l] = t[m];
      }
      for (int m = 0; m <= Q; ++m) {
        V v;
        load(v, shift_d[m]);
        g[m] += v;
      }
    }
    for (int i = 0; i < nm; ++i) load(sm[i], sm_d[i]);
    V lev[ct::rec_total<Q>()];
    ct::recurrence<Q>(lev, g, Rv);
    contract<P>(acc, sm, lev, std::make_index_sequence<nl>{});
  }
  for (int k = 0; k < nl; ++k) {
    const V a = acc[k];
    local[k] += ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  }
}
static_assert(kLanes == 8, "the lane reduction above is written for eight lanes");

template <int P, bool Newtonian>
void m2l_base(const double* const* mp, const Vec3d* R, std::size_t n, double* local, double r_s, double cut_shift,
              double eps2) {
  m2l_body<P, Newtonian>(mp, R, n, local, r_s, cut_shift, eps2);
}
#if ORBIS_M2L_MULTIVERSION
template <int P, bool Newtonian>
[[gnu::target("arch=x86-64-v3")]] void m2l_v3(const double* const* mp, const Vec3d* R, std::size_t n,
                                             double* local, double r_s, double cut_shift, double eps2) {
  m2l_body<P, Newtonian>(mp, R, n, local, r_s, cut_shift, eps2);
}
template <int P, bool Newtonian>
[[gnu::target("arch=x86-64-v4")]] void m2l_v4(const double* const* mp, const Vec3d* R, std::size_t n,
                                             double* local, double r_s, double cut_shift, double eps2) {
  m2l_body<P, Newtonian>(mp, R, n, local, r_s, cut_shift, eps2);
}
#endif

int simd_level() {
#if ORBIS_M2L_MULTIVERSION
  if (__builtin_cpu_supports("x86-64-v4")) return 4;
  if (__builtin_cpu_supports("x86-64-v3")) return 3;
#endif
  return 0;
}

template <int P, bool Newtonian>
M2LBatch::Kernel select_level() {
#if ORBIS_M2L_MULTIVERSION
  switch (simd_level()) {
    case 4: return m2l_v4<P, Newtonian>;
    case 3: return m2l_v3<P, Newtonian>;
    default: break;
  }
#endif
  return m2l_base<P, Newtonian>;
}

template <int P>
M2LBatch::Kernel select(KernelKind kind) {
  return kind == KernelKind::newtonian ? select_level<P, true>() : select_level<P, false>();
}

}  // namespace

M2LBatch::M2LBatch(int multipole_order, double r_s, KernelKind kind, double cut_shift, double softening)
    : order_(multipole_order), r_s_(r_s), kind_(kind), cut_shift_(cut_shift), eps2_(softening * softening) {
  if (kind == KernelKind::truncated && !(r_s > 0)) fail("M2L: r_s = {} must be > 0", r_s);
  switch (multipole_order) {
    case 1: kernel_ = select<1>(kind); break;
    case 2: kernel_ = select<2>(kind); break;
    case 3: kernel_ = select<3>(kind); break;
    case 4: kernel_ = select<4>(kind); break;
    case 5: kernel_ = select<5>(kind); break;
    case 6: kernel_ = select<6>(kind); break;
    default: fail("M2L: multipole_order = {} outside [1, 6]", multipole_order);
  }
}

int M2LBatch::local_size() const { return ct::count(order_ + 1); }

void M2LBatch::apply(const double* const* multipoles, const Vec3d* R, std::size_t n, double* local) const {
  if (n > 0) kernel_(multipoles, R, n, local, r_s_, cut_shift_, eps2_);
}

std::string M2LBatch::simd_variant() {
  switch (simd_level()) {
    case 4: return "x86-64-v4 (AVX-512)";
    case 3: return "x86-64-v3 (AVX2)";
    default: return "baseline";
  }
}

}  // namespace orbis
