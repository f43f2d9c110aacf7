#include "fmm/leaf_cell_batch.hpp"

#include <cmath>
#include <cstring>

#include <array>
#include <utility>

#include "core/error.hpp"
#include "fmm/derivative_recurrence_ct.hpp"
#include "fmm/multi_index_ct.hpp"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define ORBIS_LEAF_CELL_MULTIVERSION 1
#else
#define ORBIS_LEAF_CELL_MULTIVERSION 0
#endif
#if defined(__GNUC__)
#define ORBIS_INLINE [[gnu::always_inline]] inline
#else
#define ORBIS_INLINE inline
#endif

namespace orbis {
namespace {

constexpr int kLanes = LeafCellBatch::kLanes;
typedef double V __attribute__((vector_size(kLanes * sizeof(double))));

// D_n(R) for the eight lanes, |n| <= Q, at lev[0 .. count(Q)): the radial factors of 1/s,
// s^2 = r^2 + eps^2, g_m = ((1/r) d/dr)^m (1/s) = -(2m - 1) g_(m-1) / s^2, then the recurrence.
template <int Q>
ORBIS_INLINE void derivatives(const V* R, V* lev, double eps2) {
  const V r2 = R[0] * R[0] + R[1] * R[1] + R[2] * R[2] + eps2;
  V inv_r;
  for (int l = 0; l < kLanes; ++l) inv_r[l] = 1.0 / std::sqrt(r2[l]);
  const V inv_r2 = inv_r * inv_r;
  V g[Q + 1];
  g[0] = inv_r;
  for (int m = 1; m <= Q; ++m) g[m] = -(2.0 * m - 1.0) * g[m - 1] * inv_r2;
  ct::recurrence<Q>(lev, g, R);
}

// Lanes b .. b + 7 of R and their weights (null: 1; the last batch padded with R[b], weight 0).
ORBIS_INLINE void load_batch(const Vec3d* R, const double* weights, std::size_t n, std::size_t b, V* Rv, V& weight) {
  alignas(64) double r_d[3][kLanes], w_d[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    const std::size_t q = b + static_cast<std::size_t>(l);
    const bool in = q < n;
    const Vec3d& x = R[in ? q : b];
    for (int d = 0; d < 3; ++d) r_d[d][l] = x[d];
    w_d[l] = in ? (weights ? weights[q] : 1.0) : 0.0;
  }
  for (int d = 0; d < 3; ++d) std::memcpy(&Rv[d], r_d[d], sizeof(V));
  std::memcpy(&weight, w_d, sizeof(V));
}

template <int P>
ORBIS_INLINE void p2l_body(const Vec3d* R, const double* weights, std::size_t n, double* local, double eps2) {
  constexpr int Q = P + 1, nl = ct::count(Q);
  V acc[nl] = {};
  V lev[ct::rec_total<Q>()];
  for (std::size_t b = 0; b < n; b += kLanes) {
    V Rv[3], w;
    load_batch(R, weights, n, b, Rv, w);
    derivatives<Q>(Rv, lev, eps2);
    for (int k = 0; k < nl; ++k) acc[k] += w * lev[k];
  }
  for (int k = 0; k < nl; ++k) {   // the lanes in a fixed order
    const V a = acc[k];
    local[k] += ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  }
}
static_assert(kLanes == 8, "the lane reduction above is written for eight lanes");

// Local index of multipole n + e_d (order P + 1 layout).
template <int P>
constexpr std::array<std::array<int, ct::count(P)>, 3> make_plus_e() {
  std::array<std::array<int, ct::count(P)>, 3> out{};
  for (int d = 0; d < 3; ++d)
    for (int i = 0; i < ct::count(P); ++i) {
      const ct::MI n = ct::kAll[static_cast<std::size_t>(i)];
      out[static_cast<std::size_t>(d)][static_cast<std::size_t>(i)] =
          ct::index(n.a + (d == 0), n.b + (d == 1), n.c + (d == 2));
    }
  return out;
}
template <int P> inline constexpr auto kPlusE = make_plus_e<P>();

template <int P>
ORBIS_INLINE void m2p_body(const double* multipole, const Vec3d* R, std::size_t n, Vec3d* out, double eps2) {
  constexpr int Q = P + 1, nm = ct::count(P);
  double sm[nm];
  for (int i = 0; i < nm; ++i) sm[i] = (ct::kAll[static_cast<std::size_t>(i)].degree() & 1) ? -multipole[i] : multipole[i];
  V lev[ct::rec_total<Q>()];
  for (std::size_t b = 0; b < n; b += kLanes) {
    V Rv[3], w;
    load_batch(R, nullptr, n, b, Rv, w);
    derivatives<Q>(Rv, lev, eps2);
    V g[3] = {};
    ct::unroll<nm>([&](auto i) {
      g[0] += sm[i] * lev[kPlusE<P>[0][i]];
      g[1] += sm[i] * lev[kPlusE<P>[1][i]];
      g[2] += sm[i] * lev[kPlusE<P>[2][i]];
    });
    for (int l = 0; l < kLanes && b + static_cast<std::size_t>(l) < n; ++l)
      out[b + static_cast<std::size_t>(l)] += Vec3d{g[0][l], g[1][l], g[2][l]};
  }
}

template <int P>
void p2l_base(const Vec3d* R, const double* w, std::size_t n, double* local, double eps2) {
  p2l_body<P>(R, w, n, local, eps2);
}
template <int P>
void m2p_base(const double* m, const Vec3d* R, std::size_t n, Vec3d* out, double eps2) {
  m2p_body<P>(m, R, n, out, eps2);
}
#if ORBIS_LEAF_CELL_MULTIVERSION
template <int P>
[[gnu::target("arch=x86-64-v3")]] void p2l_v3(const Vec3d* R, const double* w, std::size_t n, double* local, double eps2) {
  p2l_body<P>(R, w, n, local, eps2);
}
template <int P>
[[gnu::target("arch=x86-64-v4")]] void p2l_v4(const Vec3d* R, const double* w, std::size_t n, double* local, double eps2) {
  p2l_body<P>(R, w, n, local, eps2);
}
template <int P>
[[gnu::target("arch=x86-64-v3")]] void m2p_v3(const double* m, const Vec3d* R, std::size_t n, Vec3d* out, double eps2) {
  m2p_body<P>(m, R, n, out, eps2);
}
template <int P>
[[gnu::target("arch=x86-64-v4")]] void m2p_v4(const double* m, const Vec3d* R, std::size_t n, Vec3d* out, double eps2) {
  m2p_body<P>(m, R, n, out, eps2);
}
#endif

int simd_level() {
#if ORBIS_LEAF_CELL_MULTIVERSION
  if (__builtin_cpu_supports("x86-64-v4")) return 4;
  if (__builtin_cpu_supports("x86-64-v3")) return 3;
#endif
  return 0;
}

template <int P>
LeafCellBatch::P2LKernel p2l_for(int simd) {
#if ORBIS_LEAF_CELL_MULTIVERSION
  if (simd == 4) return p2l_v4<P>;
  if (simd == 3) return p2l_v3<P>;
#endif
  (void)simd;
  return p2l_base<P>;
}
template <int P>
LeafCellBatch::M2PKernel m2p_for(int simd) {
#if ORBIS_LEAF_CELL_MULTIVERSION
  if (simd == 4) return m2p_v4<P>;
  if (simd == 3) return m2p_v3<P>;
#endif
  (void)simd;
  return m2p_base<P>;
}

}  // namespace

LeafCellBatch::LeafCellBatch(int multipole_order, double softening)
    : order_(multipole_order), eps2_(softening * softening) {
  const int simd = simd_level();
  switch (multipole_order) {
    case 1: p2l_ = p2l_for<1>(simd), m2p_ = m2p_for<1>(simd); break;
    case 2: p2l_ = p2l_for<2>(simd), m2p_ = m2p_for<2>(simd); break;
    case 3: p2l_ = p2l_for<3>(simd), m2p_ = m2p_for<3>(simd); break;
    case 4: p2l_ = p2l_for<4>(simd), m2p_ = m2p_for<4>(simd); break;
    case 5: p2l_ = p2l_for<5>(simd), m2p_ = m2p_for<5>(simd); break;
    case 6: p2l_ = p2l_for<6>(simd), m2p_ = m2p_for<6>(simd); break;
    default: fail("leaf-cell pairs: multipole_order = {} outside [1, 6]", multipole_order);
  }
}

void LeafCellBatch::p2l(const Vec3d* R, std::size_t n, double* local, const double* weights) const {
  if (n > 0) p2l_(R, weights, n, local, eps2_);
}

void LeafCellBatch::m2p(const double* multipole, const Vec3d* R, std::size_t n, Vec3d* out) const {
  if (n > 0) m2p_(multipole, R, n, out, eps2_);
}

}  // namespace orbis
