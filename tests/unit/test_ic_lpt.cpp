// Zel'dovich and 2LPT displacements and momenta against analytic forms: crossed plane waves
// (whose 2LPT source phi,xx phi,yy is analytic), p = a^2 H f D psi with H and f from
// independent formulae, and the grid layout (IDs, q, mass, wrapping).
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <vector>

#include "cosmology/cosmology.hpp"
#include "cosmology/linear_power.hpp"
#include "ic/initial_conditions.hpp"
#include "ic/lpt.hpp"
#include "pm/fft_mesh.hpp"

namespace {

using Complex = std::complex<double>;

// Linear growth of flat LambdaCDM by Heath's integral, D ~ E(a) int_0^a da' / (a' E(a'))^3,
// and f = dln D / dln a = dln E / dln a + 1 / (a^2 E^3 I): independent of Cosmology's ODE.
double heath_growth_rate(double om, double a) {
  auto e = [om](double x) { return std::sqrt(om / (x * x * x) + 1.0 - om); };
  // I = int_0^a dx / (x E)^3 with x = u^2 (the integrand ~ x^{3/2} near 0), Simpson's rule.
  const int n = 20000;
  const double u_max = std::sqrt(a);
  double sum = 0;
  for (int i = 0; i <= n; ++i) {
    const double u = u_max * i / n, x = u * u;
    const double f = i == 0 ? 0.0 : 2.0 * u / std::pow(x * e(x), 3);
    sum += (i == 0 || i == n ? 1.0 : (i % 2 ? 4.0 : 2.0)) * f;
  }
  const double integral = sum * u_max / n / 3.0;
  const double dlne = -1.5 * om / (a * a * a) / (e(a) * e(a));
  return dlne + 1.0 / (a * a * std::pow(e(a), 3) * integral);
}

}  // namespace

TEST_CASE("2LPT of two crossed plane waves matches the analytic psi1 and psi2") {
  // phi1 = A cos(kx x) + B cos(ky y), delta = lap phi1. psi1 = -grad phi1. The 2LPT source
  // S = phi,xx phi,yy - phi,xy^2 = A B kx^2 ky^2 cos(kx x) cos(ky y), so
  // phi2 = -S / (kx^2 + ky^2) and psi2 = grad phi2.
  const int n = 32;
  const double box = 100.0, kx = 2 * M_PI * 2 / box, ky = 2 * M_PI * 3 / box, amp_a = 20.0, amp_b = -9.0;
  orbis::FftMesh<double> mesh(n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      for (int k = 0; k < n; ++k) {
        const double x = i * box / n, y = j * box / n;
        mesh.real(i, j, k) = -amp_a * kx * kx * std::cos(kx * x) - amp_b * ky * ky * std::cos(ky * y);
      }
  mesh.forward();
  std::vector<Complex> delta_k(mesh.complex_data(), mesh.complex_data() + std::size_t(n) * n * mesh.nz_complex());
  for (auto& v : delta_k) v /= double(n) * n * n;   // ic/gaussian_field.hpp convention

  // Coefficients chosen so that mom = psi2 alone, and pos = q + 0.3 psi1 - 0.7 psi2.
  const orbis::ic::LptCoefficients c{0.3, -0.7, 0.0, 1.0};
  orbis::Particles p;
  orbis::ic::make_grid_particles(n, box, p);
  orbis::ic::displace_particles(delta_k, mesh, box, 2, c, p);
  orbis::Particles p1;   // Zel'dovich: mom = psi1
  orbis::ic::make_grid_particles(n, box, p1);
  orbis::ic::displace_particles(delta_k, mesh, box, 1, {1.0, 0.0, 1.0, 0.0}, p1);

  const double s2 = amp_a * amp_b * kx * kx * ky * ky / (kx * kx + ky * ky);
  double err1 = 0, err2 = 0, err_pos = 0, psi2_max = 0;
  for (std::size_t idx = 0; idx < p.size(); ++idx) {
    const int i = int(idx / (n * n)), j = int(idx / n % n), k = int(idx % n);
    const double x = i * box / n, y = j * box / n, z = k * box / n;
    const orbis::Vec3d psi1{amp_a * kx * std::sin(kx * x), amp_b * ky * std::sin(ky * y), 0.0};
    const orbis::Vec3d psi2{s2 * kx * std::sin(kx * x) * std::cos(ky * y), s2 * ky * std::cos(kx * x) * std::sin(ky * y), 0.0};
    psi2_max = std::max(psi2_max, std::abs(psi2.x));
    for (int d = 0; d < 3; ++d) {
      err1 = std::max(err1, std::abs(p1.mom[idx][d] - psi1[d]));
      err2 = std::max(err2, std::abs(p.mom[idx][d] - psi2[d]));
      const double q = d == 0 ? x : d == 1 ? y : z;
      const double expected = orbis::periodic_wrap_position(q + 0.3 * psi1[d] - 0.7 * psi2[d], box);
      err_pos = std::max(err_pos, std::abs(orbis::periodic_wrap_delta(p.pos[idx][d] - expected, box)));
    }
    CHECK(p.id[idx] == idx + 1);
  }
  MESSAGE("crossed waves: max |psi1 error| " << err1 << ", max |psi2 error| " << err2 << " (|psi2| up to "
                                             << psi2_max << " Mpc/h), position error " << err_pos);
  CHECK(psi2_max > 0.1);   // the test has teeth: psi2 is not small
  CHECK(err1 < 1e-11 * amp_a * kx);
  CHECK(err2 < 1e-11 * psi2_max);
  CHECK(err_pos < 1e-11 * box);
}

TEST_CASE("Zel'dovich momenta: p = a^2 H f D psi, with H and f from independent formulae") {
  const double om = 0.3144;
  const orbis::Cosmology cosmology({om, 1.0 - om, -1.0});
  const auto power = orbis::LinearPower::eisenstein_hu(om, 0.0494, 0.6732, 0.966, 0.812, false);
  for (double z : {49.0, 3.0}) {
    orbis::IcSettings s;
    s.n = 32, s.box_mpc_h = 64.0, s.z_init = z, s.lpt_order = 1, s.seed = 7;
    const orbis::Particles p = orbis::make_initial_conditions(s, cosmology, power);
    const double a = 1.0 / (1.0 + z);
    const double hubble = 100.0 * std::sqrt(om / (a * a * a) + 1.0 - om);   // km/s/(Mpc/h)
    const double expected = a * a * hubble * heath_growth_rate(om, a);      // p / (D psi)
    const double spacing = s.box_mpc_h / s.n;
    double worst = 0;
    int used = 0;
    for (std::size_t idx = 0; idx < p.size(); ++idx) {
      const int q[3] = {int(idx / (32 * 32)), int(idx / 32 % 32), int(idx % 32)};
      for (int d = 0; d < 3; ++d) {
        const double dx = orbis::periodic_wrap_delta(p.pos[idx][d] - q[d] * spacing, s.box_mpc_h);
        if (std::abs(dx) < 1e-3 * spacing) continue;   // ratio of two tiny numbers
        worst = std::max(worst, std::abs(p.mom[idx][d] / dx / expected - 1.0));
        ++used;
      }
    }
    INFO("z = " << z << ": a^2 H f = " << expected << " km/s per Mpc/h");
    CHECK(used > 0.9 * 3 * p.size());
    CHECK(worst < 1e-6);
  }
}

TEST_CASE("grid ICs: IDs in grid order, mass omega_m rho_crit L^3 / N^3, positions wrapped into [0, L)") {
  const orbis::Cosmology cosmology({0.3, 0.7, -1.0});
  const auto power = orbis::LinearPower::eisenstein_hu(0.3, 0.05, 0.7, 1.0, 0.9, true);
  orbis::IcSettings s;
  s.n = 16, s.box_mpc_h = 20.0, s.z_init = 2.0, s.lpt_order = 2;   // displacements ~ spacings: many wrap
  orbis::IcReport report;
  const orbis::Particles p = orbis::make_initial_conditions(s, cosmology, power, &report);
  REQUIRE(p.size() == 16u * 16u * 16u);
  // 3 H0^2 / (8 pi G) with H0 = 100 km/s/(Mpc/h), G = 43.0071 (Mpc/h)(km/s)^2/(1e10 Msun/h).
  const double rho_crit = 3.0 * 100.0 * 100.0 / (8.0 * M_PI * 43.0071);
  CHECK(p.mass == doctest::Approx(0.3 * rho_crit * 20.0 * 20.0 * 20.0 / 4096.0).epsilon(1e-12));
  int wrapped = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    CHECK(p.id[i] == i + 1);
    for (int d = 0; d < 3; ++d) {
      CHECK(p.pos[i][d] >= 0.0);
      CHECK(p.pos[i][d] < 20.0);
    }
    const int iz = int(i % 16);
    if (iz == 0 && p.pos[i].z > 10.0) ++wrapped;   // moved below z = 0 and wrapped
  }
  CHECK(wrapped > 0);
  CHECK(report.displacement_max_mpc_h > 20.0 / 16.0 * 0.5);
  CHECK(report.d2 / (report.d1 * report.d1) == doctest::Approx(-3.0 / 7.0).epsilon(0.02));
}

TEST_CASE("2LPT raises the density skewness S3 over Zel'dovich by 6/7 (the sign of D2 psi2)") {
  // Tree-level perturbation theory: S3 = <delta^3> / <delta^2>^2 is 34/7 - (n + 3) for the exact
  // dynamics and 4 - (n + 3) for the Zel'dovich approximation (top-hat smoothing; Bernardeau
  // et al. 2002, Phys. Rep. 367, 1, sec. 5). 2LPT reproduces the exact second order, so the
  // same seed gives S3(2LPT) - S3(ZA) ~ 6/7; a wrong sign of psi2 would give ~ -6/7.
  const orbis::Cosmology cosmology({0.3144, 0.6856, -1.0});
  const auto power = orbis::LinearPower::eisenstein_hu(0.3144, 0.0494, 0.6732, 0.966, 0.812, false);
  const int n = 64, cells = 32;
  const double box = 400.0;
  double s3[2];
  for (int order : {1, 2}) {
    orbis::IcSettings s;
    s.n = n, s.box_mpc_h = box, s.z_init = 3.0, s.lpt_order = order, s.seed = 12345;
    const orbis::Particles p = orbis::make_initial_conditions(s, cosmology, power);
    std::vector<double> rho(cells * cells * cells, 0.0);   // cloud-in-cell density
    for (const auto& x : p.pos) {
      int i0[3];
      double f[3];
      for (int d = 0; d < 3; ++d) {
        const double g = x[d] / box * cells;
        i0[d] = static_cast<int>(std::floor(g));
        f[d] = g - i0[d];
      }
      for (int c = 0; c < 8; ++c) {
        double w = 1;
        int idx[3];
        for (int d = 0; d < 3; ++d) {
          const int bit = (c >> d) & 1;
          w *= bit ? f[d] : 1 - f[d];
          idx[d] = (i0[d] + bit) % cells;
        }
        rho[(idx[0] * cells + idx[1]) * cells + idx[2]] += w;
      }
    }
    const double mean = double(p.size()) / rho.size();
    double m2 = 0, m3 = 0;
    for (double r : rho) {
      const double delta = r / mean - 1;
      m2 += delta * delta, m3 += delta * delta * delta;
    }
    m2 /= rho.size(), m3 /= rho.size();
    s3[order - 1] = m3 / (m2 * m2);
    MESSAGE("LPT order " << order << ": sigma_cell = " << std::sqrt(m2) << ", S3 = " << s3[order - 1]);
  }
  CHECK(s3[1] - s3[0] == doctest::Approx(6.0 / 7.0).epsilon(0.25));
}
