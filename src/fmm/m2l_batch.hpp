// M2L of many sources into one local expansion, eight sources at a time in SIMD lanes:
// the operator of FmmOperators::m2l (same multi-index layouts, same truncation
// |n| + |k| <= p + 1), written for speed. The multi-index sets, the derivative recurrence
// and the contraction are unrolled at compile time for each multipole order (1..6), so
// every index is a constant; the eight lanes hold eight (source, R) pairs of one target.
// Lanes are summed in a fixed tree at the end, so the result depends on the task order
// (and, in the last bits, on the CPU's build of the loop), never on the thread count.
// The kernel (fmm/kernel_kind.hpp) enters through the radial factors g_m alone, a
// compile-time switch of the same loop.
#pragma once
#include <cstddef>
#include <string>

#include "core/vec3.hpp"
#include "fmm/kernel_kind.hpp"

namespace orbis {

class M2LBatch {
 public:
  static constexpr int kLanes = 8;

  // multipole_order p in 1..6; r_s > 0 (Mpc/h) for the truncated kernel, not read for the
  // Newtonian one.
  // cut_shift: the truncated kernel's shifted cut (fmm/kernel_derivatives.hpp; 0: sharp).
  // softening: the Newtonian kernel's Plummer eps (fmm/kernel_derivatives.hpp).
  M2LBatch(int multipole_order, double r_s, KernelKind kind = KernelKind::truncated, double cut_shift = 0,
           double softening = 0);

  int multipole_order() const { return order_; }
  KernelKind kind() const { return kind_; }
  int local_size() const;   // (p + 2)(p + 3)(p + 4)/6

  // local[k] += sum_{q < n} sum_n (-1)^|n| M_n(q) D_(n+k)(R[q]) for every local index k;
  // multipoles[q] points at a multipole-set array (tree/multipoles.hpp) of order p, R[q] =
  // z_target - z_source (image applied), |R[q]| > 0.
  void apply(const double* const* multipoles, const Vec3d* R, std::size_t n, double* local) const;

  // "x86-64-v4 (AVX-512)", "x86-64-v3 (AVX2)" or "baseline": the build of the loop in use.
  static std::string simd_variant();

  using Kernel = void (*)(const double* const*, const Vec3d*, std::size_t, double*, double, double, double);

 private:
  int order_;
  double r_s_;
  KernelKind kind_;
  double cut_shift_;
  double eps2_;   // the Newtonian kernel's softening squared
  Kernel kernel_;
};

}  // namespace orbis
