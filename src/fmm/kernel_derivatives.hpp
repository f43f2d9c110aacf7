// Cartesian derivative tensors of the FMM's kernel (fmm/kernel_kind.hpp): the truncated
// (short-range) psi(r) = erfc(r / 2r_s) / r, or the Newtonian psi(r) = 1/r (vacuum
// boundaries): the D_n(R) = d^n psi / dR^n (|n| <= order) that M2L contracts with the
// multipoles. The two differ only in their radial factors g_m below; the tensor recurrence
// that builds D from them is the same code for both.
//
// Radial part: g_m(r) = ((1/r) d/dr)^m psi(r), the f_(m) prefactors of Wang (2021, PhotoNs):
//   (-1)^m r_s^(2m+1) g_m = (2m-1)!!/2^(2m+1) erfc(x)/x^(2m+1)
//                         + sum_{q=1}^m 2^(-q-m) (2m-1)!!/(2m-2q+1)!! e^(-x^2)/(sqrt(pi) x^(2q)),
// x = r/2r_s. We evaluate it by the equivalent upward recurrence (Smith 1998, Ewald sums)
//   B_0 = erfc(a r)/r,  B_m = [(2m-1) B_(m-1) + (2a^2)^m/(a sqrt(pi)) e^(-a^2 r^2)] / r^2,
// g_m = (-1)^m B_m, a = 1/(2 r_s): every term is positive, so it is stable for all r > 0.
//
// Tensor part: with R^(m)_tuv = d_x^t d_y^u d_z^v g_m(|R|) and d_x g_m = x g_(m+1), the
// McMurchie-Davidson recurrence R^(m)_(t+1)uv = x R^(m+1)_tuv + t R^(m+1)_(t-1)uv builds
// every D_n = R^(0)_n for any radial kernel in O(order^4) operations. The truncated kernel
// is not harmonic, so these tensors are not traceless (see tree/multipoles.hpp); 1/r's are,
// but full tensors serve both.
#pragma once
#include <math.h>

#include <vector>

#include "core/hostdevice.hpp"
#include "core/vec3.hpp"
#include "fmm/kernel_kind.hpp"
#include "tree/multi_index.hpp"

namespace orbis {

// g[m] = ((1/r) d/dr)^m [erfc(r/2r_s)/r] for m = 0..order; r > 0, r_s > 0 (Mpc/h). Host and
// device (the GPU's M2L, gpu/fmm_cuda.cu).
ORBIS_HD void truncated_radial_derivatives(double r, double r_s, int order, double* g) {
  constexpr double kInvSqrtPi = 0.56418958354775628695;
  const double a = 0.5 / r_s;
  const double inv_r2 = 1.0 / (r * r);
  const double gauss = exp(-a * a * r * r) * kInvSqrtPi / a;   // e^(-a^2 r^2)/(a sqrt(pi))
  double b = erfc(a * r) / r;
  double two_a2_pow = 1.0;   // (2a^2)^m
  g[0] = b;
  double sign = 1.0;
  for (int m = 1; m <= order; ++m) {
    two_a2_pow *= 2.0 * a * a;
    b = ((2 * m - 1) * b + two_a2_pow * gauss) * inv_r2;
    sign = -sign;
    g[m] = sign * b;
  }
}

// g[m] = ((1/r) d/dr)^m (1/r) = (-1)^m (2m-1)!! / r^(2m+1) for m = 0..order; r > 0: the
// recurrence above without its Gaussian term and with erfc = 1 (r_s -> infinity). With a
// Plummer softening eps (eps2 = eps^2 > 0) the kernel is 1/s, s^2 = r^2 + eps^2, the potential
// of the softened P2P force (fmm/p2p_kernel.hpp), and since (1/r) d/dr = (1/s) d/ds the
// factors are the same with s for r: (-1)^m (2m-1)!! / s^(2m+1). Host and device.
ORBIS_HD void newtonian_radial_derivatives(double r, int order, double* g, double eps2 = 0) {
  const double s2 = r * r + eps2;
  const double inv_r2 = 1.0 / s2;
  double b = eps2 == 0 ? 1.0 / r : 1.0 / sqrt(s2);
  g[0] = b;
  double sign = 1.0;
  for (int m = 1; m <= order; ++m) {
    b = (2 * m - 1) * b * inv_r2;
    sign = -sign;
    g[m] = sign * b;
  }
}

// The shifted cut of the truncated kernel (ShortRangeSettings::shifted_cut, fmm/short_range.hpp):
// psi' = erfc(r/2r_s)/r + a r, whose force T(x)/r^2 - a vanishes at the cut for
// a = T(x_cut)/r_cut^2, adds a ((1/r) d/dr)^m r to g_m: a r for m = 0, a times the Newtonian
// g_(m-1) = (-1)^(m-1) (2m-3)!!/r^(2m-1) for m >= 1. a = 0: nothing. Host and device.
ORBIS_HD void add_cut_shift_derivatives(double r, double a, int order, double* g) {
  if (a == 0) return;
  g[0] += a * r;
  const double inv_r2 = 1.0 / (r * r);
  double b = 1.0 / r, sign = 1.0;
  for (int m = 1; m <= order; ++m) {
    if (m > 1) {
      b = (2 * m - 3) * b * inv_r2;
      sign = -sign;
    }
    g[m] += a * (sign * b);
  }
}

// The radial factors of either kernel; r_s (Mpc/h) and the cut's shift a (1/(Mpc/h)^2, 0: a
// sharp cut) are read by the truncated one only, the softening eps^2 by the Newtonian one only.
ORBIS_HD void radial_derivatives(KernelKind kind, double r, double r_s, int order, double* g, double cut_shift = 0,
                                 double eps2 = 0) {
  if (kind == KernelKind::newtonian) {
    newtonian_radial_derivatives(r, order, g, eps2);
  } else {
    truncated_radial_derivatives(r, r_s, order, g);
    add_cut_shift_derivatives(r, cut_shift, order, g);
  }
}

class KernelDerivatives {
 public:
  // r_s > 0 for the truncated kernel; not read for the Newtonian one. cut_shift: the
  // truncated kernel's shifted cut (add_cut_shift_derivatives; 0: sharp).
  // softening: the Newtonian kernel's Plummer eps (its expansions are those of 1/sqrt(r^2 +
  // eps^2), the softened P2P's potential); not read by the truncated one.
  KernelDerivatives(int order, double r_s, KernelKind kind = KernelKind::truncated, double cut_shift = 0,
                    double softening = 0);
  int order() const { return set_.order(); }
  double r_s() const { return r_s_; }
  KernelKind kind() const { return kind_; }
  const MultiIndexSet& set() const { return set_; }
  // out[i] = D_n(R) for n = set()[i]; R != 0. Not thread-safe (own scratch): one per thread.
  void evaluate(const Vec3d& R, double* out);

 private:
  MultiIndexSet set_;
  double r_s_;
  KernelKind kind_;
  double cut_shift_;
  double eps2_;   // the Newtonian kernel's softening squared
  std::vector<double> g_, levels_;
  // For each index i > 0: the axis the recurrence steps along and the indices of n - e and
  // n - 2e (-1 when absent), and the factor (n_axis - 1).
  struct Step {
    int axis, minus1, minus2;
    double factor;
  };
  std::vector<Step> steps_;
};

}  // namespace orbis
