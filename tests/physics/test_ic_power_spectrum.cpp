// The IC field honours its input spectrum: the measured P(k) of 128^3 realisations matches
// P_lin within cosmic variance (chi^2/dof), the check fails on deliberately wrong fields, the
// realised sigma8 lies within its expected scatter, and the fixed-amplitude and paired
// options do what Angulo & Pontzen (2016) define.
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <string>
#include <vector>

#include "cosmology/cosmology.hpp"
#include "cosmology/linear_power.hpp"
#include "ic/gaussian_field.hpp"
#include "ic/ic_power.hpp"
#include "ic/initial_conditions.hpp"
#include "ic/modes.hpp"
#include "pm/fft_mesh.hpp"

namespace {

using orbis::ic::PowerFunction;

const orbis::LinearPower& linear_power() {
  static const auto p = orbis::LinearPower::eisenstein_hu(0.3144, 0.0494, 0.6732, 0.966, 0.812, true);
  return p;
}

constexpr int kN = 128;
constexpr double kBox = 500.0;   // Mpc/h: k_Nyq = 0.80 h/Mpc
const double kHalfNyquist = 0.5 * M_PI * kN / kBox;

// A field made with `generate` and measured against the true P(k), k < k_Nyq / 2.
orbis::ic::PowerCheck check_field(orbis::FftMesh<double>& mesh, const PowerFunction& generate,
                                  orbis::ic::FieldOptions options) {
  orbis::ic::make_gaussian_field(mesh, kBox, generate, options);
  const PowerFunction truth = [](double k) { return linear_power()(k); };
  const auto bins = orbis::ic::bin_power(mesh, mesh.complex_data(), kBox, 1.0, truth);
  return orbis::ic::check_power(bins, kHalfNyquist, options.fixed_amplitude);
}

}  // namespace

TEST_CASE("measured P(k) of 128^3 IC realisations matches P_lin D^2 within cosmic variance") {
  // The whole IC path (field, 2LPT, particles) with its self-test, three seeds.
  const orbis::Cosmology cosmology({0.3144, 0.6856, -1.0});
  for (std::uint64_t seed : {1ull, 2ull, 1234567ull}) {
    orbis::IcSettings s;
    s.n = kN, s.box_mpc_h = kBox, s.z_init = 49.0, s.lpt_order = 2, s.seed = seed, s.self_test = true;
    orbis::IcReport report;
    orbis::make_initial_conditions(s, cosmology, linear_power(), &report);
    const auto delta = orbis::ic::check_power(report.delta_power, kHalfNyquist, false);
    const auto disp = orbis::ic::check_power(report.displacement_power, kHalfNyquist, false);
    MESSAGE("seed " << seed << ": delta chi^2/dof = " << delta.chi2_per_dof() << " (" << delta.dof
                    << " bins, accepted 1 +- " << delta.tolerance << "); -div(x - q): " << disp.chi2_per_dof());
    CHECK(delta.dof >= 31);   // bins 1..31 (32 sits at k_Nyq / 2)
    CHECK(delta.consistent);
    CHECK(disp.consistent);
    // delta and the particles' displacement describe the same field (2LPT adds ~1e-3 at z = 49).
    for (std::size_t b = 1; b < 33; ++b)
      CHECK(report.displacement_power[b].p_measured == doctest::Approx(report.delta_power[b].p_measured).epsilon(0.01));
  }
}

TEST_CASE("the P(k) check fails on wrong amplitude, wrong k and missing normalisations") {
  orbis::FftMesh<double> mesh(kN);
  const auto& p = linear_power();
  const double volume = kBox * kBox * kBox, n3 = double(kN) * kN * kN;
  struct Mutation { const char* what; PowerFunction generate; };
  const std::vector<Mutation> mutations = {
      {"amplitude x 1.1", [&](double k) { return 1.1 * p(k); }},
      {"amplitude x 0.9", [&](double k) { return 0.9 * p(k); }},
      {"k off by a factor 2", [&](double k) { return p(2 * k); }},
      {"k off by a factor 1/2", [&](double k) { return p(0.5 * k); }},
      // A missing 1/N^(3/2) on the white noise is P x N^3; a missing 1/V in sqrt(P/V) is P x V^2.
      {"missing 1/N^(3/2)", [&](double k) { return p(k) * n3; }},
      {"missing 1/V", [&](double k) { return p(k) * volume * volume; }},
  };
  const auto good = check_field(mesh, [&](double k) { return p(k); }, {77, false, false});
  MESSAGE("correct field: chi^2/dof = " << good.chi2_per_dof());
  CHECK(good.consistent);
  for (const auto& m : mutations) {
    const auto c = check_field(mesh, m.generate, {77, false, false});
    MESSAGE(std::string(m.what) << ": chi^2/dof = " << c.chi2_per_dof());
    CHECK_MESSAGE(!c.consistent, std::string(m.what));
    const auto fixed = check_field(mesh, m.generate, {77, true, false});
    CHECK_MESSAGE(!fixed.consistent, (std::string(m.what) + " (fixed amplitude)"));
  }
}

TEST_CASE("fixed amplitude: |delta_k|^2 = P(k)/V exactly; paired: every mode flipped") {
  orbis::FftMesh<double> mesh(kN);
  const PowerFunction p = [](double k) { return linear_power()(k); };
  const auto fixed = check_field(mesh, p, {5, true, false});
  CHECK(fixed.consistent);
  CHECK(fixed.max_relative_deviation < 1e-12);
  const std::vector<std::complex<double>> a(mesh.complex_data(), mesh.complex_data() + std::size_t(kN) * kN * (kN / 2 + 1));
  check_field(mesh, p, {5, true, true});
  const std::complex<double>* b = mesh.complex_data();
  // Same seed, fixed amplitude: the phases of the Gaussian field; paired: shifted by pi.
  std::size_t same = 0;
  for (std::size_t i = 0; i < a.size(); ++i) same += (b[i] == -a[i]);
  CHECK(same == a.size());
  orbis::ic::make_gaussian_field(mesh, kBox, p, {5, false, false});
  double phase_err = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::abs(a[i]) > 0) phase_err = std::max(phase_err, std::abs(std::arg(mesh.complex_data()[i] / a[i])));
  CHECK(phase_err < 1e-12);
}

TEST_CASE("sigma8 of the realised field lies within its expected scatter") {
  // sigma8^2 of the realisation = sum_k |delta_k|^2 W(8k)^2 over the full k space; its mean is
  // sum_k P(k)/V W^2, and each (k, -k) pair, exponential with mean P/V, adds variance
  // 4 (P/V)^2 W^4. The discrete mean is also close to LinearPower's integral (this box
  // misses only k < k_f and k > k_Nyq, where W^2 is small).
  orbis::FftMesh<double> mesh(kN);
  const auto& p = linear_power();
  const double k_f = 2 * M_PI / kBox, volume = kBox * kBox * kBox;
  for (std::uint64_t seed : {11ull, 12ull}) {
    orbis::ic::make_gaussian_field(mesh, kBox, [&](double k) { return p(k); }, {seed, false, false});
    const auto* modes = mesh.complex_data();
    std::vector<double> realised(kN, 0.0), expected(kN, 0.0), variance(kN, 0.0);   // per x plane
    orbis::ic::for_each_mode(mesh, [&](const orbis::ic::Mode& m) {
      if (m.dropped) return;
      const double k = k_f * std::sqrt(double(m.k2())), x = 8.0 * k;
      const double w = 3 * (std::sin(x) - x * std::cos(x)) / (x * x * x), pv = p(k) / volume;
      const int plane = m.kx < 0 ? m.kx + kN : m.kx;
      realised[plane] += m.weight * std::norm(modes[m.index]) * w * w;
      expected[plane] += m.weight * pv * w * w;
      variance[plane] += 2.0 * m.weight * pv * pv * w * w * w * w;
    });
    double r = 0, e = 0, v = 0;
    for (int i = 0; i < kN; ++i) r += realised[i], e += expected[i], v += variance[i];
    MESSAGE("seed " << seed << ": sigma8 realised " << std::sqrt(r) << ", expected " << std::sqrt(e) << " +- "
                    << 0.5 * std::sqrt(v) / std::sqrt(e) << ", LinearPower " << p.sigma8());
    CHECK(std::abs(r - e) < 4 * std::sqrt(v));
    CHECK(std::sqrt(e) == doctest::Approx(p.sigma8()).epsilon(0.03));
  }
}
