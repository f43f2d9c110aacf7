// The counter-based generator behind the ICs: Philox4x32-10 against the Random123 known-answer
// vectors, and the Gaussian white noise's moments and distribution.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ic/white_noise.hpp"

using orbis::ic::philox4x32_10;

TEST_CASE("Philox4x32-10 reproduces the Random123 known-answer vectors") {
  CHECK(philox4x32_10({0, 0, 0, 0}, {0, 0}) == orbis::ic::Philox4x32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
        orbis::ic::Philox4x32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
        orbis::ic::Philox4x32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("uniform deviates lie in (0, 1]") {
  CHECK(orbis::ic::uniform_open0(0) > 0);
  CHECK(orbis::ic::uniform_open0(~0ull) == 1.0);
}

TEST_CASE("white noise is unit Gaussian: moments and the distribution function") {
  const int n = 64;   // 262144 deviates
  std::vector<double> g;
  g.reserve(n * n * n);
  double m1 = 0, m2 = 0, m3 = 0, m4 = 0;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      for (int k = 0; k < n; ++k) {
        const double x = orbis::ic::white_noise(2024, i, j, k);
        g.push_back(x);
        m1 += x, m2 += x * x, m3 += x * x * x, m4 += x * x * x * x;
      }
  const double count = static_cast<double>(g.size());
  m1 /= count, m2 /= count, m3 /= count, m4 /= count;
  // Standard errors: 1/sqrt(N) for the mean, sqrt(2/N) for the variance, sqrt(15/N) for the
  // third moment, sqrt(96/N) for the fourth. Bounds at 5 sigma.
  CHECK(std::abs(m1) < 5 / std::sqrt(count));
  CHECK(std::abs(m2 - 1) < 5 * std::sqrt(2 / count));
  CHECK(std::abs(m3) < 5 * std::sqrt(15 / count));
  CHECK(std::abs(m4 - 3) < 5 * std::sqrt(96 / count));
  // Kolmogorov-Smirnov against the normal CDF: D sqrt(N) < 1.95 at 99.9%.
  std::sort(g.begin(), g.end());
  double d = 0;
  for (std::size_t i = 0; i < g.size(); i += 1) {
    const double cdf = 0.5 * std::erfc(-g[i] / std::sqrt(2.0));
    d = std::max({d, std::abs(cdf - i / count), std::abs(cdf - (i + 1) / count)});
  }
  MESSAGE("white noise: mean " << m1 << ", variance " << m2 << ", KS D sqrt(N) = " << d * std::sqrt(count));
  CHECK(d * std::sqrt(count) < 1.95);
  // Neighbouring points are uncorrelated: <g(i,j,k) g(i,j,k+1)> ~ 0.
  double c = 0;
  for (std::size_t i = 0; i + 1 < count; ++i)
    c += orbis::ic::white_noise(2024, i / (n * n), i / n % n, i % n) * orbis::ic::white_noise(2024, i / (n * n), i / n % n, i % n + 1);
  CHECK(std::abs(c / count) < 5 / std::sqrt(count));
}
