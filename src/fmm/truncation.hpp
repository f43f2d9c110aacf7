// The short-range truncation function of the force split (docs/design.md, "Force split"):
//   T(x) = erfc(x) + (2x/sqrt(pi)) exp(-x^2),  x = r / 2r_s,
// exactly, and as the tabulated Taylor series of PhotoNs-GPU eq. 2, which replaces erfc and
// exp (about 70 GPU instructions) by two table loads and a short polynomial.
//
// The table: nodes x_i = i * h, h = 3 / (size - 1), i = 0 .. size-1, covering [0, 3];
//   E_i = -4 exp(-x_i^2) / sqrt(pi)      (so that T'(x_i) = x_i^2 E_i)
//   T_i = erfc(x_i) - x_i E_i / 2        (= T(x_i))
// and with eps = x - x_i for the NEAREST node (|eps| <= h/2, 4-8x more accurate than the
// floor node at the same cost, tests/unit/test_truncation.cpp):
//   T = T_i + x_i^2 E_i eps - x_i (x_i^2 - 1) E_i eps^2
//         + (2/3 x_i^4 - 5/3 x_i^2 + 1/3) E_i eps^3 - x_i (1/3 x_i^4 - 3/2 x_i^2 + 1) E_i eps^4
// truncated after the term of the requested order (0..4). The error of order n is
// O(h^(n+1)); order 3 with 512 nodes reaches float precision.
//
// Beyond the table (x > 3, where T < 4.3e-4) the table path is not defined: the P2P
// kernel cuts pairs at min(r_cut, 6 r_s) (p2p_kernel.hpp), and truncation_table_eval()
// returns 0 there. The exact path is valid for every x >= 0.
//
// Everything that runs per pair is ORBIS_HD, shared by the CPU evaluator and the CUDA kernel
// (core/hostdevice.hpp). Tables are built in double on the host and stored in float or double.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "core/hostdevice.hpp"

namespace orbis {

inline constexpr double kTruncationTableXMax = 3.0;   // the table covers x in [0, 3]

// erfc/exp overloads so that one template serves float and double on host and device
// (unqualified erfcf/expf are the CUDA device functions under nvcc, glibc's on the host).
ORBIS_HD float trunc_erfc(float x) { return erfcf(x); }
ORBIS_HD double trunc_erfc(double x) { return erfc(x); }
ORBIS_HD float trunc_exp(float x) { return expf(x); }
ORBIS_HD double trunc_exp(double x) { return exp(x); }

// Exact T(x) in the arithmetic of R (the reference path, taylor_order = -1).
template <typename R>
ORBIS_HD R truncation_exact(R x) {
  const R two_over_sqrt_pi = R(1.1283791670955126);   // 2 / sqrt(pi)
  return trunc_erfc(x) + two_over_sqrt_pi * x * trunc_exp(-x * x);
}

// What the per-pair code needs to read a table: arrays T_i and E_i (host or shared
// memory), the node spacing h and its inverse, and the last node index.
template <typename R>
struct TruncationTableView {
  const R* t = nullptr;
  const R* e = nullptr;
  R spacing = 0;       // h
  R inv_spacing = 0;   // 1 / h
  int last = 0;        // size - 1
};

// Nearest node by adding 1.5 * 2^mantissa: the sum's low bits hold round-to-nearest(u), so
// the node costs two adds and no float<->int conversion (those run at a quarter of the FMA
// rate on the GPU). rounded_bits() returns the sum's bits (the GPU table reader turns them
// into a shared-memory address in one multiply-add), node_from_bits() the node index.
ORBIS_HD std::int32_t rounded_bits(float u, float& fi) {
  const float magic = 12582912.0f;   // 1.5 * 2^23: exact for 0 <= u < 2^22
  const float t = u + magic;
  fi = t - magic;
#if defined(__CUDA_ARCH__)
  return __float_as_int(t);
#else
  std::int32_t bits;
  std::memcpy(&bits, &t, sizeof bits);
  return bits;
#endif
}
ORBIS_HD std::int64_t rounded_bits(double u, double& fi) {
  const double magic = 6755399441055744.0;   // 1.5 * 2^52
  const double t = u + magic;
  fi = t - magic;
#if defined(__CUDA_ARCH__)
  return __double_as_longlong(t);
#else
  std::int64_t bits;
  std::memcpy(&bits, &t, sizeof bits);
  return bits;
#endif
}
inline constexpr std::int32_t kRoundedBitsZeroF = 0x4B400000;
inline constexpr std::int64_t kRoundedBitsZeroD = 0x4338000000000000LL;
ORBIS_HD int node_from_bits(std::int32_t bits) { return bits - kRoundedBitsZeroF; }
ORBIS_HD int node_from_bits(std::int64_t bits) { return static_cast<int>(bits - kRoundedBitsZeroD); }

// min(u, u_max): one FMNMX on the GPU, a select the CPU loop vectorises on the host.
ORBIS_HD float clamp_top(float u, float u_max) {
#if defined(__CUDA_ARCH__)
  return fminf(u, u_max);
#else
  return u < u_max ? u : u_max;
#endif
}
ORBIS_HD double clamp_top(double u, double u_max) {
#if defined(__CUDA_ARCH__)
  return fmin(u, u_max);
#else
  return u < u_max ? u : u_max;
#endif
}

// Nearest node of u >= 0 after clamping u to u_max (<= the last node): fi = that node as R.
template <typename R>
ORBIS_HD int nearest_node(R u, R u_max, R& fi) {
  return node_from_bits(rounded_bits(clamp_top(u, u_max), fi));
}

// Reads node i of a table kept as two arrays (host tables; the CUDA kernel has its own
// reader for an interleaved {T_i, E_i} copy in shared memory: one 8-byte load per pair).
template <typename R>
struct SplitTableReader {
  static constexpr bool kCoefficients = false;
  const R* t;
  const R* e;
  ORBIS_HD void operator()(int i, R& ti, R& ei) const {
    ti = t[i];
    ei = e[i];
  }
};

// Taylor value at u = x / h (x in node units, u >= 0). Order is a compile-time constant so
// the kernel carries no dead terms. No range check: u is clamped to u_max (at most the last
// node) so a stray x never reads outside the table, and callers cut at x <= 3.
// read(i, T_i, E_i) loads a node.
template <int Order, typename R, typename Reader>
ORBIS_HD R truncation_taylor_u(R u, const Reader& read, R spacing, R u_max) {
  static_assert(Order >= 0 && Order <= 4, "Taylor order 0..4");
  R fi;
  const int i = nearest_node(u, u_max, fi);
  R ti, ei;
  read(i, ti, ei);
  if constexpr (Order == 0) {
    return ti;
  } else {
    const R eps = (u - fi) * spacing;   // x - x_i
    const R xi = fi * spacing;
    const R x2 = xi * xi;
    // Horner in eps of the bracket p with T = T_i + E_i * eps * p.
    R p;
    if constexpr (Order == 1) {
      p = x2;
    } else {
      const R c2 = xi * (R(1) - x2);                                   // -x_i (x_i^2 - 1)
      if constexpr (Order == 2) {
        p = c2 * eps + x2;
      } else {
        const R c3 = (R(2.0 / 3.0) * x2 - R(5.0 / 3.0)) * x2 + R(1.0 / 3.0);
        if constexpr (Order == 3) {
          p = (c3 * eps + c2) * eps + x2;
        } else {
          const R c4 = -xi * ((R(1.0 / 3.0) * x2 - R(1.5)) * x2 + R(1));
          p = ((c4 * eps + c3) * eps + c2) * eps + x2;
        }
      }
    }
    return ti + ei * eps * p;
  }
}

// The same series with its per-node factors multiplied out once, in double, on the host:
//   c_0 = T_i, c_1 = x_i^2 E_i h, c_2 = -x_i (x_i^2 - 1) E_i h^2,
//   c_3 = (2/3 x_i^4 - 5/3 x_i^2 + 1/3) E_i h^3, c_4 = -x_i (1/3 x_i^4 - 3/2 x_i^2 + 1) E_i h^4,
//   T = c_0 + e (c_1 + e (c_2 + e (c_3 + e c_4))),  e = u - i = (x - x_i) / h, |e| <= 1/2.
// Same values as eq. 2 up to rounding, about 10 fewer operations per pair than deriving
// the factors from x_i: the CUDA kernel's form. read.load<Order>(bits, c) fills c[0..Order]
// for the node whose rounded_bits() are bits.
template <int Order, typename R, typename Reader>
ORBIS_HD R truncation_taylor_coef(R u, const Reader& read, R u_max) {
  static_assert(Order >= 0 && Order <= 4, "Taylor order 0..4");
  R fi;
  const auto bits = rounded_bits(clamp_top(u, u_max), fi);
  R c[Order + 1];
  read.template load<Order>(bits, c);
  if constexpr (Order == 0) {
    return c[0];
  } else {
    const R e = u - fi;
    R p = c[Order];
    for (int m = Order - 1; m >= 0; --m) p = p * e + c[m];
    return p;
  }
}

// Coefficient tables kept as five arrays c0..c4 (host).
template <typename R>
struct CoefTableReader {
  static constexpr bool kCoefficients = true;
  const R* c[5];
  template <int Order, typename Bits>
  ORBIS_HD void load(Bits bits, R* out) const {
    const int i = node_from_bits(bits);
    for (int m = 0; m <= Order; ++m) out[m] = c[m][i];
  }
};

template <int Order, typename R>
ORBIS_HD R truncation_taylor(R x, const TruncationTableView<R>& tab) {
  return truncation_taylor_u<Order>(x * tab.inv_spacing, SplitTableReader<R>{tab.t, tab.e},
                                    tab.spacing, static_cast<R>(tab.last));
}

// Run-time order (tests, host callers); 0 beyond the table range x > 3, T(0) at x < 0.
template <typename R>
inline R truncation_table_eval(R x, int order, const TruncationTableView<R>& tab) {
  if (!(x <= R(kTruncationTableXMax))) return R(0);
  if (x < R(0)) x = R(0);
  switch (order) {
    case 0: return truncation_taylor<0>(x, tab);
    case 1: return truncation_taylor<1>(x, tab);
    case 2: return truncation_taylor<2>(x, tab);
    case 3: return truncation_taylor<3>(x, tab);
    case 4: return truncation_taylor<4>(x, tab);
    default: fail("truncation_table_eval: Taylor order {} is not in 0..4", order);
  }
}

// The table, built in double and stored as R. size >= 2 ([gravity] taylor_table_size).
template <typename R>
class TruncationTable {
 public:
  explicit TruncationTable(int size) {
    if (size < 2) fail("the T(x) table needs at least 2 nodes, got {}", size);
    t_.resize(size);
    e_.resize(size);
    spacing_ = kTruncationTableXMax / (size - 1);
    for (auto& c : coef_) c.resize(size);
    const double h = spacing_;
    for (int i = 0; i < size; ++i) {
      const double x = i * h, x2 = x * x;
      const double e = -4.0 * std::exp(-x * x) / std::sqrt(M_PI);
      const double t = std::erfc(x) - 0.5 * x * e;
      e_[i] = static_cast<R>(e);
      t_[i] = static_cast<R>(t);
      coef_[0][i] = static_cast<R>(t);
      coef_[1][i] = static_cast<R>(x2 * e * h);
      coef_[2][i] = static_cast<R>(-x * (x2 - 1) * e * h * h);
      coef_[3][i] = static_cast<R>((2.0 / 3.0 * x2 * x2 - 5.0 / 3.0 * x2 + 1.0 / 3.0) * e * h * h * h);
      coef_[4][i] = static_cast<R>(-x * (x2 * x2 / 3.0 - 1.5 * x2 + 1) * e * h * h * h * h);
    }
  }
  int size() const { return static_cast<int>(t_.size()); }
  double spacing() const { return spacing_; }
  const std::vector<R>& t() const { return t_; }
  const std::vector<R>& e() const { return e_; }
  const std::vector<R>& coef(int m) const { return coef_[m]; }   // c_m of every node, m = 0..4
  CoefTableReader<R> coef_reader() const {
    return {{coef_[0].data(), coef_[1].data(), coef_[2].data(), coef_[3].data(), coef_[4].data()}};
  }
  TruncationTableView<R> view() const {
    return {t_.data(), e_.data(), static_cast<R>(spacing_), static_cast<R>(1.0 / spacing_),
            size() - 1};
  }

 private:
  std::vector<R> t_, e_;
  std::vector<R> coef_[5];
  double spacing_ = 0;
};

}  // namespace orbis
