// EH98 transfer functions against the authors' reference code and against the physics they
// fit: the sound horizon as an integral of c_s/H, the acoustic period and Silk damping.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "cosmology/linear_power_eh.hpp"

using orbis::EisensteinHu;

namespace {

struct Reference {
  double k_h_mpc, t_full, t_nowiggle;
};

// Output of Eisenstein's tf_fit.c (TFset_parameters + TFfit_onek, and TF_nowiggles), run
// with T_CMB = 2.7255 K; k in h/Mpc.
const std::vector<Reference> kPlanckLike = {   // omega_m = 0.3144, omega_b = 0.0494, h = 0.6732
    {0.001, 9.923665904e-01, 9.921823140e-01}, {0.01, 7.821247151e-01, 7.880459321e-01},
    {0.05, 2.737099003e-01, 2.810428122e-01},  {0.1, 1.329837752e-01, 1.349781355e-01},
    {0.15, 8.206998179e-02, 8.161942555e-02},  {0.2, 5.586295997e-02, 5.546223811e-02},
    {0.3, 3.083237761e-02, 3.108233132e-02},   {0.5, 1.433106266e-02, 1.432967726e-02},
    {1, 4.767911000e-03, 4.736472478e-03},     {3, 7.566837162e-04, 7.485479473e-04},
    {10, 9.151101238e-05, 9.052915095e-05}};
const std::vector<Reference> kOther = {   // omega_m = 0.25, omega_b = 0.045, h = 0.7
    {0.001, 9.893010808e-01, 9.891157615e-01}, {0.01, 7.374240881e-01, 7.437315252e-01},
    {0.05, 2.225258147e-01, 2.284847408e-01},  {0.1, 9.992554988e-02, 1.039396929e-01},
    {0.15, 5.972027403e-02, 6.119046561e-02},  {0.2, 4.062429879e-02, 4.092104230e-02},
    {0.3, 2.250580967e-02, 2.251886210e-02},   {0.5, 1.021853371e-02, 1.020765242e-02},
    {1, 3.345154834e-03, 3.320374104e-03},     {3, 5.208751545e-04, 5.154415606e-04},
    {10, 6.212938700e-05, 6.148913865e-05}};

}  // namespace

TEST_CASE("EH98 full and no-wiggle transfer functions match Eisenstein's tf_fit.c") {
  struct Case { double om, ob, h; const std::vector<Reference>* ref; double s, s_fit, k_silk, z_d; };
  for (const Case& c : {Case{0.3144, 0.0494, 0.6732, &kPlanckLike, 150.9445995, 149.9497372, 0.0903260783, 1020.712107},
                        Case{0.25, 0.045, 0.7, &kOther, 157.1857069, 155.6260833, 0.08530472907, 1017.951981}}) {
    const EisensteinHu eh(c.om, c.ob, c.h, 2.7255);
    CHECK(eh.sound_horizon_mpc() == doctest::Approx(c.s).epsilon(1e-8));
    CHECK(eh.sound_horizon_fit_mpc() == doctest::Approx(c.s_fit).epsilon(1e-8));
    CHECK(eh.k_silk_per_mpc() == doctest::Approx(c.k_silk).epsilon(1e-8));
    CHECK(eh.z_drag() == doctest::Approx(c.z_d).epsilon(1e-8));
    for (const auto& r : *c.ref) {
      INFO("k = " << r.k_h_mpc << " h/Mpc");
      // tf_fit.c uses e = 2.718282 in the logarithm: a relative effect below 1e-6.
      CHECK(eh.transfer(r.k_h_mpc) == doctest::Approx(r.t_full).epsilon(2e-6));
      CHECK(eh.transfer_nowiggle(r.k_h_mpc) == doctest::Approx(r.t_nowiggle).epsilon(2e-6));
    }
  }
}

TEST_CASE("EH98 sound horizon: eq. (6) is the integral of c_s/H, eq. (26) fits it to 2%") {
  // s = int_0^{a_d} c_s da / (a^2 H), c_s = c / sqrt(3 (1 + R)), in a universe of matter and
  // radiation with a_eq = 1/(1+z_eq) and R = 3 rho_b / (4 rho_gamma) = 31.5 omega_b theta^-4 a * 1e3
  // (EH98 eqs. 2 and 5), H^2 = H0^2 (omega_m a^-3 + omega_r a^-4). An independent route to eq. (6).
  for (double om : {0.2, 0.3144, 0.45}) {
    const double ob = 0.0494, h = 0.6732;
    const EisensteinHu eh(om, ob, h, 2.7255);
    const double c_km_s = 299792.458, h0 = 100.0 * h;   // km/s/Mpc
    const double a_eq = 1.0 / eh.z_equality(), a_d = 1.0 / (1.0 + eh.z_drag());
    const double theta4 = std::pow(eh.theta_cmb(), 4);
    auto integrand = [&](double a) {   // da -> c_s / (a^2 H)
      const double r = 31.5 * eh.omega_b_h2() / theta4 * a * 1000.0;
      const double hubble = h0 * std::sqrt(om / (a * a * a) + om * a_eq / (a * a * a * a));
      return c_km_s / std::sqrt(3.0 * (1.0 + r)) / (a * a * hubble);
    };
    // Substituting a = u^2 removes the integrable behaviour at a -> 0 (integrand -> const).
    const int n = 200000;
    double sum = 0;
    const double u_max = std::sqrt(a_d);
    for (int i = 0; i <= n; ++i) {
      const double u = u_max * i / n;
      const double f = i == 0 ? 0.0 : integrand(u * u) * 2.0 * u;
      sum += (i == 0 || i == n ? 0.5 : 1.0) * f;
    }
    const double s_numeric = sum * u_max / n;
    INFO("omega_m = " << om << ": eq. 6 " << eh.sound_horizon_mpc() << " Mpc, integral " << s_numeric
                      << " Mpc, eq. 26 " << eh.sound_horizon_fit_mpc() << " Mpc");
    // 0.0746 in eq. (3) is sqrt(2 omega_m z_eq) 100/c rounded: 1e-4 relative.
    CHECK(eh.sound_horizon_mpc() == doctest::Approx(s_numeric).epsilon(1e-3));
    CHECK(eh.sound_horizon_fit_mpc() == doctest::Approx(eh.sound_horizon_mpc()).epsilon(0.02));
  }
}

TEST_CASE("EH98 wiggle and no-wiggle forms agree on large and small scales") {
  const EisensteinHu eh(0.3144, 0.0494, 0.6732);
  for (double k : {1e-5, 1e-4, 1e-3}) {
    CHECK(eh.transfer(k) == doctest::Approx(1.0).epsilon(1e-2));
    CHECK(eh.transfer(k) / eh.transfer_nowiggle(k) == doctest::Approx(1.0).epsilon(5e-4));
  }
  for (double k : {1.0, 3.0, 10.0, 100.0}) CHECK(std::abs(eh.transfer(k) / eh.transfer_nowiggle(k) - 1) < 0.02);
  // In between, the wiggles are there: a few per cent in T.
  double max_dev = 0;
  for (double k = 0.03; k < 0.3; k += 1e-3) max_dev = std::max(max_dev, std::abs(eh.transfer(k) / eh.transfer_nowiggle(k) - 1));
  CHECK(max_dev > 0.02);
  CHECK(max_dev < 0.1);
}

TEST_CASE("EH98 acoustic oscillations: period 2 pi / s, damped beyond k_silk") {
  const double h = 0.6732;
  const EisensteinHu eh(0.3144, 0.0494, h);
  std::vector<double> maxima, amplitude;
  double lo = 1, hi = -1;
  std::vector<double> r;
  const double dk = 2e-5;
  for (double k = 0.02; k < 0.6; k += dk) r.push_back(eh.transfer(k) / eh.transfer_nowiggle(k) - 1);
  for (std::size_t i = 1; i + 1 < r.size(); ++i) {
    lo = std::min(lo, r[i]), hi = std::max(hi, r[i]);
    if (r[i] > r[i - 1] && r[i] > r[i + 1]) {
      maxima.push_back(0.02 + dk * i);
      amplitude.push_back(hi - lo);   // peak to trough over the last period
      lo = 1, hi = -1;
    }
  }
  REQUIRE(maxima.size() >= 6);
  const double period = 2.0 * M_PI / (eh.sound_horizon_mpc() * h);   // h/Mpc
  // Past the first peaks, where s~(k) -> s (eq. 22), successive peaks are 2 pi / s apart.
  for (std::size_t i = 2; i + 1 < maxima.size() && maxima[i + 1] < 0.4; ++i)
    CHECK(maxima[i + 1] - maxima[i] == doctest::Approx(period).epsilon(0.03));
  // Silk damping: the oscillation near 3 k_silk is < 10% of the one near k_silk / 2.
  const double k_silk = eh.k_silk_per_mpc() / h;
  auto amplitude_near = [&](double k) {
    std::size_t best = 0;
    for (std::size_t i = 0; i < maxima.size(); ++i)
      if (std::abs(maxima[i] - k) < std::abs(maxima[best] - k)) best = i;
    return amplitude[best];
  };
  CHECK(amplitude_near(3 * k_silk) < 0.1 * amplitude_near(0.5 * k_silk));
}
