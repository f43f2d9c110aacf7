// Background and growth against independent references: Einstein-de Sitter in closed form,
// LCDM (flat and open, w = -1) against the Heath (1977) integral evaluated here by plain
// adaptive Simpson quadrature, and the second-order growth against Bouchet et al. (1995).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>

#include "core/error.hpp"
#include "cosmology/cosmology.hpp"
#include "core/units.hpp"

using orbis::Cosmology;
using orbis::CosmologyParams;

namespace {

double simpson(const std::function<double(double)>& f, double a, double b, double tol, int depth = 0) {
  const double m = 0.5 * (a + b), h = b - a;
  const double whole = h / 6 * (f(a) + 4 * f(m) + f(b));
  const double left = h / 12 * (f(a) + 4 * f(0.5 * (a + m)) + f(m));
  const double right = h / 12 * (f(m) + 4 * f(0.5 * (m + b)) + f(b));
  if (depth > 40 || std::abs(left + right - whole) < 15 * tol) return left + right + (left + right - whole) / 15;
  return simpson(f, a, m, tol / 2, depth + 1) + simpson(f, m, b, tol / 2, depth + 1);
}

// Heath (1977): D(a) proportional to E(a) int_0^a da' / (a' E(a'))^3, valid for w = -1.
struct Heath {
  double om, ol;
  double E(double a) const { return std::sqrt(om / (a * a * a) + (1 - om - ol) / (a * a) + ol); }
  double integral(double a) const {
    // Substitute a = u^2 to tame the a^(3/2) behaviour at 0.
    return simpson([&](double u) { double x = u * u; return u == 0 ? 0.0 : 2 * u / std::pow(x * E(x), 3); },
                   0.0, std::sqrt(a), 1e-14);
  }
  double D_unnormalised(double a) const { return E(a) * integral(a); }
  double f(double a) const {
    const double dlnE = (-3 * om / (a * a * a) - 2 * (1 - om - ol) / (a * a)) / (2 * E(a) * E(a));
    return dlnE + 1.0 / (a * a * std::pow(E(a), 3) * integral(a));
  }
};

}  // namespace

TEST_CASE("Einstein-de Sitter: D = a, f = 1, D2 = -3/7 a^2, f2 = 2, exact KDK factors") {
  Cosmology c(CosmologyParams{1.0, 0.0, -1.0});
  for (double a : {0.01, 0.1, 0.5, 1.0, 2.0}) {
    CHECK(c.growth(a) == doctest::Approx(a).epsilon(1e-8));
    CHECK(c.growth_rate(a) == doctest::Approx(1.0).epsilon(1e-8));
    CHECK(c.growth2(a) == doctest::Approx(-3.0 / 7.0 * a * a).epsilon(1e-8));
    CHECK(c.growth_rate2(a) == doctest::Approx(2.0).epsilon(1e-8));
    CHECK(c.hubble(a) == doctest::Approx(orbis::units::H0 * std::pow(a, -1.5)).epsilon(1e-14));
  }
  const double h0 = orbis::units::H0;
  for (auto [a1, a2] : {std::pair{0.02, 0.03}, std::pair{0.1, 1.0}, std::pair{0.5, 0.5001}}) {
    CHECK(c.drift_factor(a1, a2) == doctest::Approx(2 / h0 * (1 / std::sqrt(a1) - 1 / std::sqrt(a2))).epsilon(1e-10));
    CHECK(c.kick_factor(a1, a2) == doctest::Approx(2 / h0 * (std::sqrt(a2) - std::sqrt(a1))).epsilon(1e-10));
    CHECK(c.time_between(a1, a2) == doctest::Approx(2 / (3 * h0) * (std::pow(a2, 1.5) - std::pow(a1, 1.5))).epsilon(1e-10));
    // D = a and G = a^3 H dD/da = H0 a^1.5: the weighted kick int (a / a_f) da / (a^2 H) and
    // drift int (G(a) / G(a_p)) da / (a^3 H) = (a2 - a1) / G(a_p), for a force or momentum
    // taken at either end or elsewhere.
    for (double at : {a1, a2, 0.5 * (a1 + a2), 0.7}) {
      CHECK(c.growth_weighted_kick_factor(a1, a2, at) ==
            doctest::Approx(2 / (3 * h0 * at) * (std::pow(a2, 1.5) - std::pow(a1, 1.5))).epsilon(1e-10));
      CHECK(c.growth_weighted_drift_factor(a1, a2, at) == doctest::Approx((a2 - a1) / (h0 * std::pow(at, 1.5))).epsilon(1e-10));
    }
  }
}

TEST_CASE("LCDM: the growth-weighted drift is the linear mode's displacement over its momentum") {
  // x = q + D(a) psi and p = a^3 H dD/da psi (p = a^2 dx/dt): a drift from a1 to a2 with the
  // momentum of a_p moves the particle by exactly (D(a2) - D(a1)) psi. Checked against the
  // Heath integral's D and f, and for a drift cut in three pieces.
  const double om = 0.3144, ol = 0.6856;
  Cosmology c(CosmologyParams{om, ol, -1.0});
  Heath heath{om, ol};
  const double norm = heath.D_unnormalised(1.0);
  auto D = [&](double a) { return heath.D_unnormalised(a) / norm; };
  auto G = [&](double a) { return a * a * c.hubble(a) * heath.f(a) * D(a); };
  for (auto [a1, a2] : {std::pair{0.01, 0.0105}, std::pair{0.1, 0.2}, std::pair{0.5, 1.0}}) {
    const double ap = std::sqrt(a1 * a2);
    CAPTURE(a1);
    CHECK(c.growth_weighted_drift_factor(a1, a2, ap) == doctest::Approx((D(a2) - D(a1)) / G(ap)).epsilon(2e-6));
    const double b = a1 + 0.3 * (a2 - a1), d = a1 + 0.8 * (a2 - a1);
    const double pieces = c.growth_weighted_drift_factor(a1, b, ap) + c.growth_weighted_drift_factor(b, d, ap) +
                          c.growth_weighted_drift_factor(d, a2, ap);
    CHECK(pieces == doctest::Approx(c.growth_weighted_drift_factor(a1, a2, ap)).epsilon(1e-11));
    // and it differs from the plain drift int da/(a^3 H) at first order in the step
    CHECK(std::abs(c.growth_weighted_drift_factor(a1, a2, a1) / c.drift_factor(a1, a2) - 1) > 1e-3);
  }
}

TEST_CASE("LCDM growth and growth rate match the Heath integral to 1e-6") {
  for (auto [om, ol] : {std::pair{0.3144, 0.6856}, std::pair{0.25, 0.6}, std::pair{0.3, 0.0}}) {
    Cosmology c(CosmologyParams{om, ol, -1.0});
    Heath heath{om, ol};
    const double norm = heath.D_unnormalised(1.0);
    for (double a : {0.001, 0.02, 0.1, 0.3, 0.6, 1.0, 1.5}) {
      CAPTURE(om);
      CAPTURE(ol);
      CAPTURE(a);
      CHECK(c.growth(a) == doctest::Approx(heath.D_unnormalised(a) / norm).epsilon(1e-6));
      CHECK(c.growth_rate(a) == doctest::Approx(heath.f(a)).epsilon(1e-6));
    }
  }
}

TEST_CASE("second-order growth follows Bouchet et al. (1995) fits") {
  Cosmology c(CosmologyParams{0.3144, 0.6856, -1.0});
  for (double a : {0.02, 0.5, 1.0}) {
    const double om = c.omega_m_of_a(a);
    const double d1 = c.growth(a);
    // D2 ~ -3/7 D1^2 Om^(-1/143) and f2 ~ 2 Om^(6/11): fits good to a few 1e-3.
    CHECK(c.growth2(a) == doctest::Approx(-3.0 / 7.0 * d1 * d1 * std::pow(om, -1.0 / 143)).epsilon(3e-3));
    CHECK(c.growth_rate2(a) == doctest::Approx(2 * std::pow(om, 6.0 / 11)).epsilon(1e-2));
  }
}

TEST_CASE("w0 != -1: growth rate follows Linder's gamma fit") {
  Cosmology c(CosmologyParams{0.3, 0.7, -0.8});
  for (double a : {0.5, 1.0}) {
    const double gamma = 0.55 + 0.05 * (1 + (-0.8));   // Linder (2005), w > -1
    CHECK(c.growth_rate(a) == doctest::Approx(std::pow(c.omega_m_of_a(a), gamma)).epsilon(5e-3));
  }
}

TEST_CASE("impossible universes are rejected") {
  CHECK_THROWS_AS(Cosmology(CosmologyParams{0.0, 0.7, -1.0}), orbis::Error);
  CHECK_THROWS_AS(Cosmology(CosmologyParams{0.3, 3.0, -1.0}), orbis::Error);   // bounces
}
