// The P2P pair interaction, written once for the CPU evaluator and the CUDA kernel
// (core/hostdevice.hpp). For a target i and a source j at d = x_j - x_i (the source already in its
// periodic image, both relative to the target leaf's centre):
//
//   a_i += G m  d T(s / 2r_s) / s^3,   s^2 = |d|^2 + eps^2   (pairs with |d| < r_cut)
//
// Softening: Plummer, applied to the whole truncated kernel (s replaces r in T too; T is
// flat at the origin, T = 1 - O(x^3), so this changes T by O(eps^2/r_s^2) where softening
// matters). eps is the [gravity] softening (Plummer-equivalent length, Mpc/h); a pair at
// r << eps feels a force that goes to zero linearly, never blows up; a pair at d = 0 (the
// particle itself, or an exact duplicate) contributes exactly nothing, also with eps = 0.
// Plummer was chosen over GADGET's spline because it costs one add per pair in a kernel
// that is instruction-bound (~28 instructions per pair); its force is 1.5% low at r = 10 eps
// where the spline is already exact. Softening lengths are ~0.02 r_s, so it matters only
// inside haloes' cores.
//
// Cut: pairs at |d| >= r_cut contribute nothing. The table covers x <= 3 (r <= 6 r_s), so the
// table path cuts at min(r_cut, 6 r_s) (T(3) = 4.3e-4); the exact path (Order = -1) at r_cut.
//
// G m (and the length scale, see P2PPairConstants) are applied once per particle by the
// caller, not per pair.
//
// The Newtonian kernel (vacuum boundaries, fmm/kernel_kind.hpp) is the same code with T = 1:
// the Order template argument kNoTruncation, which every evaluator (the CPU loops, the CUDA
// kernel) takes like a Taylor order. Its cut lies beyond the whole system (the solver sets
// it from the particles' extent: make_newtonian_pair_constants), so it never drops a pair,
// and the kernels keep one form for both kernels.
#pragma once
#include <cmath>

#include "core/hostdevice.hpp"
#include "fmm/truncation.hpp"

namespace orbis {

// The Order template argument of the pair code: 0..4, the T(x) table's Taylor order;
// kExactTruncation, T(x) from erfc and exp; kNoTruncation, T = 1 (the Newtonian kernel).
inline constexpr int kExactTruncation = -1;
inline constexpr int kNoTruncation = -2;

// Per-call constants of the pair interaction in the kernel's arithmetic R. Lengths are in
// "table units": the evaluators multiply every position (and shift) by length_scale =
// 1 / (2 r_s h) (table path; 1 / (2 r_s) on the exact path), so the softened distance s IS
// the table coordinate u = x / h (or x) and no multiply per pair is spent on it; the sum is
// multiplied back by acc_scale = G m length_scale^2 once per particle.
template <typename R>
struct P2PPairConstants {
  R rcut2 = 0;          // (effective cut)^2, table units
  R eps2 = 0;           // softening^2, table units
  R spacing = 0;        // h, the table's node spacing in x ({T,E} form)
  R u_max = 0;          // u is clamped to min(last node, x_cut/h): pairs beyond the cut then
                        // all read one node (a shared-memory broadcast on the GPU instead of
                        // bank conflicts) and are discarded
  R shift = 0;          // the shifted cut's a in table units: T(s) - shift s^2 (0: a sharp cut)
  double length_scale = 0;   // Mpc/h -> table units
  double acc_scale = 0;      // G m length_scale^2: sum -> (km/s)^2/(Mpc/h)
};

// Host side: constants for a given split, softening, G m and table (use_table = false: the
// exact erfc path, x = s); cut_shift: the shifted cut's a in 1/(Mpc/h)^2 (P2PSettings).
template <typename R>
inline P2PPairConstants<R> make_pair_constants(double r_s, double r_cut, double softening,
                                               double g_mass, int table_size, bool use_table,
                                               double cut_shift = 0) {
  P2PPairConstants<R> c;
  const double cut = use_table ? std::fmin(r_cut, 2.0 * r_s * kTruncationTableXMax) : r_cut;
  const double h = kTruncationTableXMax / (table_size - 1);
  const double scale = use_table ? 1.0 / (2.0 * r_s * h) : 1.0 / (2.0 * r_s);
  c.length_scale = scale;
  c.acc_scale = g_mass * scale * scale;
  c.rcut2 = static_cast<R>(cut * cut * scale * scale);
  // The 1e-20 floor keeps s >= 1e-10 at d = 0 with eps = 0, so 1/s^3 stays finite in float
  // and that pair adds exactly 0; for any real separation it is below rounding.
  c.eps2 = static_cast<R>(softening * softening * scale * scale + 1e-20);
  c.spacing = static_cast<R>(h);
  c.u_max = static_cast<R>(std::fmin(table_size - 1.0, cut * scale));
  c.shift = static_cast<R>(cut_shift / (scale * scale));   // a r^2 = (a / scale^2) s^2
  return c;
}

// The Newtonian kernel's constants (T = 1): lengths in units of the cut, which the caller
// places beyond every pair of the system (length_scale = 1 / r_cut), so that scaled
// separations lie in [0, 1) whatever the unit of length and 1/s^3 stays far from float's
// limits; no table (spacing and u_max are not read).
template <typename R>
inline P2PPairConstants<R> make_newtonian_pair_constants(double r_cut, double softening, double g_mass) {
  P2PPairConstants<R> c;
  const double scale = 1.0 / r_cut;
  c.length_scale = scale;
  c.acc_scale = g_mass * scale * scale;
  c.rcut2 = R(1);
  c.eps2 = static_cast<R>(softening * softening * scale * scale + 1e-20);   // as make_pair_constants
  c.spacing = R(0);
  c.u_max = R(0);
  return c;
}

// 1/sqrt: the hardware approximation on the GPU (rsqrtf, 2 ulp, one special-function
// instruction instead of a sqrt and a divide), an exactly rounded sqrt and divide on the host.
ORBIS_HD float p2p_rsqrt(float x) {
#if defined(__CUDA_ARCH__)
  // rsqrtf() wraps MUFU.RSQ in 4 instructions of denormal handling; x >= 1e-20 here.
  float r;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return 1.0f / std::sqrt(x);
#endif
}
ORBIS_HD double p2p_rsqrt(double x) {
#if defined(__CUDA_ARCH__)
  return rsqrt(x);
#else
  return 1.0 / std::sqrt(x);
#endif
}

// The factor g with a_i += g * d (times G m later) of the truncated kernels, from r^2:
// Order 0..4, table; kExactTruncation, exact erfc/exp (the Newtonian kernel's factor is
// the separation form's below).
// A select, not a branch, discards pairs outside the cut or at d = 0: on the GPU the warp
// stays converged, on the CPU the loop vectorises (GCC if-converts nothing more complex).
template <int Order, typename R, typename Reader>
ORBIS_HD R p2p_pair_factor(R r2, const P2PPairConstants<R>& k, const Reader& table) {
  static_assert(Order >= kExactTruncation && Order <= 4, "Order: a Taylor order or kExactTruncation");
  const R s2 = r2 + k.eps2;   // >= 1e-20: eps2 carries that floor
  const R sinv = p2p_rsqrt(s2);
  const R s = s2 * sinv;
  R t;
  if constexpr (Order == kExactTruncation) {
    t = truncation_exact(s);   // s = x in table units of the exact path
  } else if constexpr (Reader::kCoefficients) {
    t = truncation_taylor_coef<Order>(s, table, k.u_max);   // s = u = x / h
  } else {
    t = truncation_taylor_u<Order>(s, table, k.spacing, k.u_max);
  }
  t -= k.shift * s2;   // the shifted cut: zero at the cut (k.shift = 0: a sharp cut)
  const R g = t * sinv * sinv * sinv;   // finite: s >= 1e-10, so g <= 1e30
  return r2 < k.rcut2 ? g : R(0);       // d = 0 then adds g * 0 = 0 exactly
}

// p2p_pair_factor from the separation; kNoTruncation: T = 1, the Newtonian kernel. It has
// no cut (its rcut2 lies beyond every pair), so it needs neither the select (d = 0 adds
// g * 0 = 0 exactly as well) nor the unsoftened r^2: eps^2 goes in first, and s^2 takes
// three multiply-adds on the GPU instead of a multiply, two multiply-adds and an add.
template <int Order, typename R, typename Reader>
ORBIS_HD R p2p_pair_factor(R dx, R dy, R dz, const P2PPairConstants<R>& k, const Reader& table) {
  if constexpr (Order == kNoTruncation) {
    const R sinv = p2p_rsqrt(dx * dx + (dy * dy + (dz * dz + k.eps2)));   // >= 1e-20: eps2's floor
    return sinv * sinv * sinv;
  } else {
    return p2p_pair_factor<Order>(dx * dx + dy * dy + dz * dz, k, table);
  }
}

// One pair: accumulates the source at (dx, dy, dz) = x_j - x_i into (ax, ay, az). table
// reads node i as table(i, T_i, E_i) (SplitTableReader on the host).
template <int Order, typename R, typename Reader>
ORBIS_HD void p2p_pair(R dx, R dy, R dz, const P2PPairConstants<R>& k, const Reader& table,
                       R& ax, R& ay, R& az) {
  const R g = p2p_pair_factor<Order>(dx, dy, dz, k, table);
  ax += g * dx;
  ay += g * dy;
  az += g * dz;
}

// One pair whose source weighs w (its mass over the reference mass whose G m the caller
// applies: the vacuum kernel of systems with individual masses, Particles::masses). w = 1
// gives p2p_pair's bits.
template <int Order, typename R, typename Reader>
ORBIS_HD void p2p_pair_weighted(R dx, R dy, R dz, R w, const P2PPairConstants<R>& k, const Reader& table,
                                R& ax, R& ay, R& az) {
  const R g = w * p2p_pair_factor<Order>(dx, dy, dz, k, table);
  ax += g * dx;
  ay += g * dy;
  az += g * dz;
}

// The pair potential whose negative gradient is p2p_pair's force (the potential energy
// diagnostic, integrate/energy.hpp): psi(r) = erfc(s / 2r_s) / s with s^2 = r^2 + eps^2, so
// that a pair's energy is -G m m psi. Why it matches: d/ds [erfc(s/2r_s)/s] = -T(s/2r_s)/s^2
// (the erfc term and the Gaussian from differentiating erfc make T), and ds/dr = r/s, so
// -grad_i(-G m m psi) = G m m d T/s^3 with d = x_j - x_i: p2p_pair's softened, truncated
// force. Pairs at r2 >= cut2 contribute nothing (the same cut as the force), and so does
// r2 = 0 without softening (the particle itself: the self-energy is the caller's term).
// Exact erfc in double: the diagnostic needs no table.
ORBIS_HD double p2p_pair_potential(double r2, double eps2, double inv_two_rs, double cut2) {
  const double s2 = r2 + eps2;
  if (r2 >= cut2 || s2 == 0) return 0.0;
  const double s = sqrt(s2);
  return erfc(s * inv_two_rs) / s;
}

}  // namespace orbis
