// The truncation function and its Taylor table against independent references: T(x) by
// quadrature of its integral form, and the table's error falling as h^(order+1) (nearest
// node, PhotoNs-GPU eq. 2).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "fmm/truncation.hpp"

using namespace orbis;

namespace {

// T(x) = (4/sqrt(pi)) int_x^inf u^2 e^{-u^2} du by composite Simpson on [x, x+8].
double t_by_quadrature(double x) {
  const int n = 4000;
  const double a = x, b = x + 8, h = (b - a) / n;
  auto f = [](double u) { return u * u * std::exp(-u * u); };
  double s = f(a) + f(b);
  for (int i = 1; i < n; ++i) s += f(a + i * h) * (i % 2 ? 4 : 2);
  return 4 / std::sqrt(M_PI) * s * h / 3;
}

// Max |T_table - T| over a dense sample of [0, 3].
template <typename R>
double max_table_error(int size, int order) {
  const TruncationTable<R> table(size);
  const auto view = table.view();
  double worst = 0;
  const int n = 60001;
  for (int k = 0; k < n; ++k) {
    const double x = 3.0 * k / (n - 1);
    const double t = static_cast<double>(truncation_table_eval(static_cast<R>(x), order, view));
    worst = std::max(worst, std::fabs(t - (std::erfc(x) + 2 * x / std::sqrt(M_PI) * std::exp(-x * x))));
  }
  return worst;
}

}  // namespace

TEST_CASE("exact T(x) equals the integral form and its limits") {
  for (double x : {0.0, 0.1, 0.5, 1.0, 1.7, 2.25, 3.0, 4.0}) {
    CAPTURE(x);
    CHECK(truncation_exact(x) == doctest::Approx(t_by_quadrature(x)).epsilon(1e-10));
    CHECK(truncation_exact(static_cast<float>(x)) ==
          doctest::Approx(t_by_quadrature(x)).epsilon(2e-6));
  }
  CHECK(truncation_exact(0.0) == 1.0);
  CHECK(truncation_exact(6.0) < 1e-14);
}

TEST_CASE("table nodes hold T(x_i) and E_i = -4 exp(-x_i^2)/sqrt(pi)") {
  const TruncationTable<double> table(512);
  REQUIRE(table.size() == 512);
  CHECK(table.spacing() == doctest::Approx(3.0 / 511));
  for (int i : {0, 1, 100, 255, 511}) {
    const double x = i * table.spacing();
    CHECK(table.t()[i] == doctest::Approx(t_by_quadrature(x)).epsilon(1e-10));
    CHECK(table.e()[i] == doctest::Approx(-4 * std::exp(-x * x) / std::sqrt(M_PI)).epsilon(1e-14));
  }
  CHECK_THROWS_AS(TruncationTable<float>(1), Error);
}

TEST_CASE("table error falls as h^(order+1), orders 0..4") {
  // Double tables of 16..128 nodes: order 4 at 512 nodes would sit near double rounding
  // (1e-14), so the sizes stop where every order's error is still far above it.
  const std::vector<int> sizes = {16, 24, 32, 48, 64, 96, 128};
  for (int order = 0; order <= 4; ++order) {
    CAPTURE(order);
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    double previous = 1;
    for (int size : sizes) {
      const double h = 3.0 / (size - 1);
      const double err = max_table_error<double>(size, order);
      CAPTURE(size);
      CAPTURE(err);
      CHECK(err < previous);
      CHECK(err > 1e-14);   // still measurable in double
      previous = err;
      const double lx = std::log(h), ly = std::log(err);
      sx += lx; sy += ly; sxx += lx * lx; sxy += lx * ly;
    }
    const double n = static_cast<double>(sizes.size());
    const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
    CAPTURE(slope);
    CHECK(std::fabs(slope - (order + 1)) < 0.5);
  }
}

TEST_CASE("float table of 512 nodes: orders >= 2 reach float precision, order 4 adds nothing") {
  // float rounding of T ~ 1 is 6e-8; order 3 on 512 nodes reaches 1.2e-7.
  const double e3 = max_table_error<float>(512, 3);
  const double e4 = max_table_error<float>(512, 4);
  const double e1 = max_table_error<float>(512, 1);
  CAPTURE(e1);
  CAPTURE(e3);
  CAPTURE(e4);
  CHECK(e3 < 2.5e-7);
  CHECK(e4 < 2.5e-7);
  CHECK(e4 > 0.3 * e3);   // at the float floor: no further gain
  CHECK(e1 > 3 * e3);     // order 1 is still above it (orders 2..4 all sit at ~1.6e-7)
}

TEST_CASE("nearest node, range and order checks") {
  const TruncationTable<double> table(64);
  const auto view = table.view();
  // At a node the series is exact for every order; just below the midpoint to the next
  // node the nearest (lower) node is used, just above it the upper one: both stay accurate.
  const double h = table.spacing();
  for (int order = 0; order <= 4; ++order) {
    CHECK(truncation_table_eval(10 * h, order, view) == doctest::Approx(truncation_exact(10 * h)).epsilon(1e-15));
    const double lo = (10.5 - 1e-9) * h, hi = (10.5 + 1e-9) * h;
    CHECK(std::fabs(truncation_table_eval(lo, order, view) - truncation_exact(lo)) <
          std::pow(h, order + 1));
    CHECK(std::fabs(truncation_table_eval(hi, order, view) - truncation_exact(hi)) <
          std::pow(h, order + 1));
  }
  CHECK(truncation_table_eval(3.0001, 3, view) == 0.0);   // beyond the table: 0
  CHECK(truncation_table_eval(3.0, 3, view) == doctest::Approx(truncation_exact(3.0)).epsilon(1e-12));
  CHECK_THROWS_AS(truncation_table_eval(1.0, 5, view), Error);
}

TEST_CASE("coefficient form equals eq. 2's form (the CUDA kernel's table)") {
  for (int size : {16, 64, 512}) {
    const TruncationTable<double> table(size);
    const auto view = table.view();
    const auto coef = table.coef_reader();
    for (int order = 0; order <= 4; ++order) {
      double worst = 0;
      for (int k = 0; k <= 20000; ++k) {
        const double x = 3.0 * k / 20000;
        const double u = x * view.inv_spacing;   // as truncation_table_eval does (same node at ties)
        double c = 0;
        switch (order) {
          case 0: c = truncation_taylor_coef<0>(u, coef, size - 1.0); break;
          case 1: c = truncation_taylor_coef<1>(u, coef, size - 1.0); break;
          case 2: c = truncation_taylor_coef<2>(u, coef, size - 1.0); break;
          case 3: c = truncation_taylor_coef<3>(u, coef, size - 1.0); break;
          default: c = truncation_taylor_coef<4>(u, coef, size - 1.0); break;
        }
        worst = std::max(worst, std::fabs(c - truncation_table_eval(x, order, view)));
      }
      CAPTURE(size);
      CAPTURE(order);
      CHECK(worst < 1e-14);
    }
  }
}
