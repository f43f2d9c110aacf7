// Sums of non-negative doubles that give the same bits in any order, on any number of
// threads, ranks or GPU blocks: each term is rounded to a 64-bit integer on a scale that puts
// the largest term (over all ranks) at 2^62 / N (N the terms in all), and integers add
// exactly. The fixed-point mass assignment of the PM and of P(k) (pm/fixed_point_mesh.hpp)
// rounds its weights with the same two functions. What the run loop's decisions read (the rms momentum that sizes the PM step) must
// not depend on how the particles are shared out, or a run on several ranks would leave the
// one-rank run's path at the first rounding. Terms below 2^-62 N of the largest are lost, and
// each term errs by at most half a unit of 2^-62 N of the largest.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/hostdevice.hpp"

namespace orbis {

// 2^S, S = 62 - ceil(log2 N): N values of at most 1 each, rounded at this scale, sum below 2^62.
inline double fixed_point_scale(std::uint64_t n) {
  int bits = 0;
  while ((std::uint64_t{1} << bits) < n) ++bits;
  return std::ldexp(1.0, 62 - bits);
}

// round(w * scale) to nearest, ties to even, for 0 <= w <= 1 and a scale from
// fixed_point_scale. The device's conversion instruction; on the host the same rounding by
// adding and removing 2^52 (below it a double rounds to an integer there; above, w * scale is
// an integer already): no libm call in the PM assignment's innermost loop (baseline x86-64 has
// no rounding instruction).
ORBIS_HD std::uint64_t fixed_point_round(double w, double scale) {
  const double x = w * scale;
#ifdef __CUDA_ARCH__
  return __double2ull_rn(x);
#else
  // x <= 2^62 fits a signed 64-bit integer: one conversion instruction, where an unsigned
  // one takes a compare and a branch on x86-64.
  constexpr double two52 = 4503599627370496.0;
  return static_cast<std::uint64_t>(static_cast<std::int64_t>(x < two52 ? (x + two52) - two52 : x));
#endif
}

struct ExactSumScale {
  int exponent = 0;    // the largest term < 2^exponent
  double scale = 0;    // 2^(62 - ceil(log2 N))
};

// The scale for `count` terms whose largest is `largest` (> 0; both over every rank).
inline ExactSumScale exact_sum_scale(double largest, std::uint64_t count) {
  ExactSumScale s;
  std::frexp(largest, &s.exponent);
  s.scale = fixed_point_scale(count);
  return s;
}

// One term (0 <= term <= largest) as an integer; the sum of all of them stays below 2^62.
ORBIS_HD std::uint64_t exact_sum_term(double term, const ExactSumScale& s) {
  return fixed_point_round(ldexp(term, -s.exponent), s.scale);
}

// The sum's value.
inline double exact_sum_value(std::uint64_t sum, const ExactSumScale& s) {
  return std::ldexp(static_cast<double>(sum) / s.scale, s.exponent);
}

}  // namespace orbis
