// Cartesian multi-indices n = (nx, ny, nz) with |n| = nx + ny + nz <= order, the index set
// of the multipole moments M_n = sum_j m_j s^n / n! and of the local coefficients L_k.
//
// Layout (shared by tree/ and fmm/): grouped by degree |n| = 0, 1, 2, ...; inside a degree
// nx runs from |n| down to 0, then ny from |n| - nx down to 0. So the entries of degree
// <= q are always the first count(q) = (q+1)(q+2)(q+3)/6, and an order-q array can be read
// as the leading part of an order-(q+1) one. Orders up to kMaxOrder (the schema allows
// multipole_order <= 6 and the local expansion needs one more).
#pragma once
#include <array>
#include <vector>

#include "core/error.hpp"

namespace orbis {

class MultiIndexSet {
 public:
  static constexpr int kMaxOrder = 8;

  static constexpr int count(int order) { return (order + 1) * (order + 2) * (order + 3) / 6; }

  explicit MultiIndexSet(int order) : order_(order) {
    if (order < 0 || order > kMaxOrder) fail("multi-index order {} outside [0, {}]", order, kMaxOrder);
    index_.fill(-1);
    for (int deg = 0; deg <= order; ++deg)
      for (int a = deg; a >= 0; --a)
        for (int b = deg - a; b >= 0; --b) {
          const int c = deg - a - b;
          index_[key(a, b, c)] = static_cast<int>(n_.size());
          n_.push_back({a, b, c});
          double f = 1;
          for (int i = 2; i <= a; ++i) f *= i;
          for (int i = 2; i <= b; ++i) f *= i;
          for (int i = 2; i <= c; ++i) f *= i;
          inv_factorial_.push_back(1.0 / f);
        }
  }

  int order() const { return order_; }
  int size() const { return static_cast<int>(n_.size()); }
  const std::array<int, 3>& operator[](int i) const { return n_[i]; }
  int degree(int i) const { return n_[i][0] + n_[i][1] + n_[i][2]; }
  // 1 / (nx! ny! nz!)
  double inv_factorial(int i) const { return inv_factorial_[i]; }
  // Position of (a, b, c) in the layout; -1 when any is negative or a + b + c > order.
  int index(int a, int b, int c) const {
    if (a < 0 || b < 0 || c < 0 || a + b + c > order_) return -1;
    return index_[key(a, b, c)];
  }

 private:
  static constexpr int kSide = kMaxOrder + 1;
  static int key(int a, int b, int c) { return (a * kSide + b) * kSide + c; }

  int order_;
  std::vector<std::array<int, 3>> n_;
  std::vector<double> inv_factorial_;
  std::array<int, kSide * kSide * kSide> index_{};
};

// The scaled monomials s^n / n! for every n of `set`, into out[0 .. set.size()), built by one
// multiplication each from a lower-degree entry (exact recurrences, no pow()).
inline void scaled_monomials(const MultiIndexSet& set, double sx, double sy, double sz, double* out) {
  out[0] = 1.0;
  for (int i = 1; i < set.size(); ++i) {
    const auto& n = set[i];
    if (n[0] > 0) {
      out[i] = out[set.index(n[0] - 1, n[1], n[2])] * sx / n[0];
    } else if (n[1] > 0) {
      out[i] = out[set.index(n[0], n[1] - 1, n[2])] * sy / n[1];
    } else {
      out[i] = out[set.index(n[0], n[1], n[2] - 1)] * sz / n[2];
    }
  }
}

// Triples (n, k, n - k) of `set` indices for every k <= n componentwise: the terms of the
// exact translations M2M (M'_n = sum_k M_k d^(n-k)/(n-k)!) and L2L (L'_k = sum_n L_n
// d^(n-k)/(n-k)!), which need nothing above the order they translate.
struct ShiftTerm {
  int n, k, diff;
};
inline std::vector<ShiftTerm> shift_terms(const MultiIndexSet& set) {
  std::vector<ShiftTerm> terms;
  for (int i = 0; i < set.size(); ++i) {
    const auto& n = set[i];
    for (int a = 0; a <= n[0]; ++a)
      for (int b = 0; b <= n[1]; ++b)
        for (int c = 0; c <= n[2]; ++c)
          terms.push_back({i, set.index(a, b, c), set.index(n[0] - a, n[1] - b, n[2] - c)});
  }
  return terms;
}

}  // namespace orbis
