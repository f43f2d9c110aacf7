// Derivative tensors of psi(r) = erfc(r/2r_s)/r (and of the Newtonian 1/r, the vacuum
// kernel, against the same references) against independent references:
//  - the radial prefactors g_m against the closed form of Wang (2021) (f_(n)), long double;
//  - every tensor D_n, |n| <= 8, against Taylor-mode automatic differentiation in long
//    double of psi(|R + t u|) along random directions u (d^n/dt^n psi = n! sum_{|m|=n}
//    u^m/m! D_m), enough directions to pin every component;
//  - D_(n+e) against fourth-order central differences of D_n.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "fmm/kernel_derivatives.hpp"

using namespace orbis;
using ld = long double;

namespace {

const ld kPiL = 3.141592653589793238462643383279502884L;

ld double_factorial(int n) {   // n!! with (-1)!! = 1
  ld f = 1;
  for (int k = n; k > 1; k -= 2) f *= k;
  return f;
}

// Wang (2021): (-1)^n r_s^(2n+1) f_(n)(x) = (2n-1)!!/2^(2n+1) erfc(x)/x^(2n+1)
//   + sum_{q=1}^n 2^(-q-n) (2n-1)!!/(2n-2q+1)!! e^(-x^2)/(sqrt(pi) x^(2q)).
ld paper_prefactor(int n, ld r, ld r_s) {
  const ld x = r / (2 * r_s);
  ld v = double_factorial(2 * n - 1) / std::pow(2.0L, 2 * n + 1) * std::erfc(x) / std::pow(x, 2 * n + 1);
  for (int q = 1; q <= n; ++q)
    v += std::pow(2.0L, -q - n) * double_factorial(2 * n - 1) / double_factorial(2 * n - 2 * q + 1) *
         std::exp(-x * x) / (std::sqrt(kPiL) * std::pow(x, 2 * q));
  return ((n % 2) ? -v : v) / std::pow(r_s, 2 * n + 1);
}

using Series = std::vector<ld>;
Series mul(const Series& a, const Series& b) {
  Series c(a.size(), 0);
  for (std::size_t n = 0; n < a.size(); ++n)
    for (std::size_t k = 0; k <= n; ++k) c[n] += a[k] * b[n - k];
  return c;
}

// Taylor coefficients h_n of t -> erfc(|R + t u|/2r_s)/|R + t u|, n = 0..order, or of
// t -> 1/|R + t u| (newtonian).
Series psi_series(const ld R[3], const ld u[3], ld r_s, int order, bool newtonian = false) {
  const std::size_t N = static_cast<std::size_t>(order) + 1;
  Series f(N, 0), s(N, 0), inv(N, 0), z(N, 0), w(N, 0), E(N, 0);
  f[0] = R[0] * R[0] + R[1] * R[1] + R[2] * R[2];
  if (N > 1) f[1] = 2 * (R[0] * u[0] + R[1] * u[1] + R[2] * u[2]);
  if (N > 2) f[2] = u[0] * u[0] + u[1] * u[1] + u[2] * u[2];
  s[0] = std::sqrt(f[0]);   // r(t) = sqrt(f(t))
  for (std::size_t n = 1; n < N; ++n) {
    ld acc = f[n];
    for (std::size_t k = 1; k < n; ++k) acc -= s[k] * s[n - k];
    s[n] = acc / (2 * s[0]);
  }
  inv[0] = 1 / s[0];        // 1/r(t)
  for (std::size_t n = 1; n < N; ++n) {
    ld acc = 0;
    for (std::size_t k = 1; k <= n; ++k) acc += s[k] * inv[n - k];
    inv[n] = -acc / s[0];
  }
  if (newtonian) return inv;
  const ld a = 1 / (2 * r_s);
  for (std::size_t n = 0; n < N; ++n) z[n] = a * s[n];
  Series q = mul(z, z);      // w = exp(-z^2)
  for (auto& v : q) v = -v;
  w[0] = std::exp(q[0]);
  for (std::size_t n = 1; n < N; ++n) {
    ld acc = 0;
    for (std::size_t k = 1; k <= n; ++k) acc += static_cast<ld>(k) * q[k] * w[n - k];
    w[n] = acc / static_cast<ld>(n);
  }
  E[0] = std::erfc(z[0]);    // d erfc(z)/dt = -2/sqrt(pi) w z'
  for (std::size_t n = 1; n < N; ++n) {
    ld acc = 0;
    for (std::size_t k = 0; k < n; ++k) acc += w[n - 1 - k] * static_cast<ld>(k + 1) * z[k + 1];
    E[n] = -2 / std::sqrt(kPiL) * acc / static_cast<ld>(n);
  }
  return mul(E, inv);
}

}  // namespace

TEST_CASE("truncated kernel: radial prefactors g_m match Wang (2021) f_(n)") {
  const double r_s = 0.7;
  double g[9];
  for (double x : {0.02, 0.1, 0.5, 1.0, 1.7, 2.25, 3.0, 4.0}) {
    const double r = 2 * r_s * x;
    truncated_radial_derivatives(r, r_s, 8, g);
    for (int m = 0; m <= 8; ++m) {
      const ld ref = paper_prefactor(m, r, r_s);
      INFO("x = " << x << ", m = " << m);
      CHECK(std::fabs(static_cast<ld>(g[m]) - ref) <= 1e-13L * std::fabs(ref));
    }
  }
}

TEST_CASE("Newtonian kernel: radial prefactors g_m = (-1)^m (2m-1)!! / r^(2m+1)") {
  double g[9];
  for (double r : {1e-3, 0.02, 0.7, 1.0, 3.0, 40.0, 1e4}) {
    newtonian_radial_derivatives(r, 8, g);
    for (int m = 0; m <= 8; ++m) {
      const ld ref = ((m % 2) ? -1 : 1) * double_factorial(2 * m - 1) / std::pow(static_cast<ld>(r), 2 * m + 1);
      INFO("r = " << r << ", m = " << m);
      CHECK(std::fabs(static_cast<ld>(g[m]) - ref) <= 1e-14L * std::fabs(ref));
    }
  }
}

namespace {
// Every tensor D_n to order 8 of the kernel at a few distances (in units of `length`)
// against Taylor-mode AD along random directions; returns how many (point, direction,
// order) were compared.
int check_tensors_against_ad(KernelKind kind, double r_s, double length) {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> uni(-1, 1);
  const int order = 8;
  KernelDerivatives kd(order, r_s, kind);
  const MultiIndexSet& set = kd.set();
  std::vector<double> D(static_cast<std::size_t>(set.size()));
  int checked = 0;
  for (double dist : {0.05, 0.4, 1.1, 2.0, 3.5}) {   // truncated: r / r_s from 0.14 to 10
    for (int trial = 0; trial < 3; ++trial) {
      Vec3d R{uni(rng), uni(rng), uni(rng)};
      R = R * (dist * length / norm(R));
      kd.evaluate(R, D.data());
      const ld RL[3] = {R.x, R.y, R.z};
      // 3 x the number of order-8 components (45) of random directions per point.
      for (int dir = 0; dir < 135; ++dir) {
        Vec3d u{uni(rng), uni(rng), uni(rng)};
        u = u * (1.0 / norm(u));
        const ld uL[3] = {u.x, u.y, u.z};
        const Series h = psi_series(RL, uL, r_s, order, kind == KernelKind::newtonian);
        for (int n = 0; n <= order; ++n) {
          ld sum = 0, scale = 0;
          for (int i = 0; i < set.size(); ++i) {
            if (set.degree(i) != n) continue;
            const auto& m = set[i];
            const ld term = std::pow(static_cast<ld>(u.x), m[0]) * std::pow(static_cast<ld>(u.y), m[1]) *
                            std::pow(static_cast<ld>(u.z), m[2]) * set.inv_factorial(i) * D[static_cast<std::size_t>(i)];
            sum += term;
            scale += std::fabs(term);
          }
          if (std::fabs(sum - h[static_cast<std::size_t>(n)]) > 1e-12L * scale) {
            FAIL_CHECK("r = " << dist << " order " << n << ": " << static_cast<double>(sum) << " vs "
                              << static_cast<double>(h[static_cast<std::size_t>(n)]));
          }
          ++checked;
        }
      }
    }
  }
  return checked;
}
}  // namespace

TEST_CASE("truncated kernel: D tensors to order 8 match Taylor-mode AD in long double") {
  CHECK(check_tensors_against_ad(KernelKind::truncated, 0.35, 1.0) == 5 * 3 * 135 * 9);
}

TEST_CASE("Newtonian kernel: D tensors to order 8 match Taylor-mode AD in long double") {
  // Scale-free: distances from 0.05 to 3.5 in units of 1 and of 1e3.
  CHECK(check_tensors_against_ad(KernelKind::newtonian, 0.0, 1.0) == 5 * 3 * 135 * 9);
  CHECK(check_tensors_against_ad(KernelKind::newtonian, 0.0, 1e3) == 5 * 3 * 135 * 9);
}

TEST_CASE("truncated kernel: D_(n+e) is the derivative of D_n (finite differences)") {
  const double r_s = 1.3;
  const int order = 7;   // p + 1 for the largest multipole order of the schema
  KernelDerivatives kd(order, r_s);
  const MultiIndexSet& set = kd.set();
  const std::size_t nc = static_cast<std::size_t>(set.size());
  std::vector<double> D(nc), Dp(nc), Dm(nc), Dp2(nc), Dm2(nc);
  for (Vec3d R : {Vec3d{1.0, 0.3, -0.7}, Vec3d{-2.0, 3.1, 0.4}, Vec3d{0.2, -0.1, 5.0}}) {
    kd.evaluate(R, D.data());
    std::vector<double> max_order(static_cast<std::size_t>(order) + 1, 0.0);
    for (int i = 0; i < set.size(); ++i)
      max_order[static_cast<std::size_t>(set.degree(i))] =
          std::max(max_order[static_cast<std::size_t>(set.degree(i))], std::fabs(D[static_cast<std::size_t>(i)]));
    const double h = 2e-3 * norm(R);
    for (int axis = 0; axis < 3; ++axis) {
      Vec3d e{0, 0, 0};
      e[axis] = h;
      kd.evaluate(R + e, Dp.data());
      kd.evaluate(R - e, Dm.data());
      kd.evaluate(R + 2.0 * e, Dp2.data());
      kd.evaluate(R - 2.0 * e, Dm2.data());
      for (int i = 0; i < set.size(); ++i) {
        if (set.degree(i) == order) continue;
        auto n = set[i];
        n[axis] += 1;
        const auto up = static_cast<std::size_t>(set.index(n[0], n[1], n[2]));
        const auto s = static_cast<std::size_t>(i);
        const double fd = (8 * (Dp[s] - Dm[s]) - (Dp2[s] - Dm2[s])) / (12 * h);
        INFO("axis " << axis << " n = (" << set[i][0] << "," << set[i][1] << "," << set[i][2] << ")");
        CHECK(std::fabs(fd - D[up]) <= 2e-7 * max_order[static_cast<std::size_t>(set.degree(i) + 1)]);
      }
    }
  }
}
