// The multi-index layout of tree/multi_index.hpp at compile time, for loops the compiler
// unrolls with constant indices (m2l_batch.cpp, the P2M/L2P fast paths). Same layout:
// degree by degree; inside a degree nx from |n| down to 0, then ny from |n| - nx down to 0.
// So position i means the same multi-index in every set that holds it, and
// index(a, b, c) = count(d - 1) + (d - a)(d - a + 1)/2 + (d - a - b), d = a + b + c.
#pragma once
#include <array>
#include <cstddef>
#include <utility>

namespace orbis::ct {

constexpr int kMaxOrder = 8;

constexpr int count(int q) { return q < 0 ? 0 : (q + 1) * (q + 2) * (q + 3) / 6; }

constexpr int index(int a, int b, int c) {
  const int d = a + b + c;
  return count(d - 1) + (d - a) * (d - a + 1) / 2 + (d - a - b);
}

struct MI {
  int a = 0, b = 0, c = 0;
  constexpr int degree() const { return a + b + c; }
};

constexpr std::array<MI, count(kMaxOrder)> make_all() {
  std::array<MI, count(kMaxOrder)> out{};
  int i = 0;
  for (int d = 0; d <= kMaxOrder; ++d)
    for (int a = d; a >= 0; --a)
      for (int b = d - a; b >= 0; --b) out[static_cast<std::size_t>(i++)] = MI{a, b, d - a - b};
  return out;
}
// kAll[i]: the multi-index at position i of any set of order >= its degree.
inline constexpr std::array<MI, count(kMaxOrder)> kAll = make_all();

constexpr bool layout_consistent() {
  for (int i = 0; i < count(kMaxOrder); ++i) {
    const MI& n = kAll[static_cast<std::size_t>(i)];
    if (index(n.a, n.b, n.c) != i) return false;
  }
  return true;
}
static_assert(layout_consistent(), "index() inverts the enumeration");

constexpr int factorial(int n) { return n <= 1 ? 1 : n * factorial(n - 1); }
// 1 / (nx! ny! nz!) of position i.
constexpr double inv_factorial(int i) {
  const MI& n = kAll[static_cast<std::size_t>(i)];
  return 1.0 / (static_cast<double>(factorial(n.a)) * factorial(n.b) * factorial(n.c));
}

// Calls f(std::integral_constant<std::size_t, I>{}) for I = 0 .. N-1 in order (unrolled).
template <std::size_t... I, typename F>
constexpr void unroll_impl(F&& f, std::index_sequence<I...>) {
  (f(std::integral_constant<std::size_t, I>{}), ...);
}
template <std::size_t N, typename F>
constexpr void unroll(F&& f) {
  unroll_impl(f, std::make_index_sequence<N>{});
}

}  // namespace orbis::ct
