// The step log's ETA (integrate/cost_model.hpp). Global steps' trend on synthetic cost
// histories whose remaining time is known in closed form: a constant cost per unit ln a, one
// growing exponentially in ln a, one falling, and the outputs still to come. Hierarchical
// steps' forecast: its pieces against independent references (the Press-Schechter collapsed
// fraction, the isothermal sphere's |g| distribution, Gaussian accelerations binned by the
// engines' own bin rule), and a synthetic run whose cost grows as the forecast says.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "core/units.hpp"
#include "cosmology/cosmology.hpp"
#include "cosmology/linear_power.hpp"
#include "integrate/cost_model.hpp"
#include "integrate/time_bins.hpp"

using namespace orbis;

namespace {

// PM steps of dln from ln_a0 to ln_a1, each costing rate(x_mid) * dln seconds.
// (Steps of 1/32 keep every ln a exact, so the recent window's edge is unambiguous.)
template <class Rate>
RunState history(double ln_a0, double ln_a1, double dln, Rate rate) {
  RunState s;
  const int steps = static_cast<int>(std::lround((ln_a1 - ln_a0) / dln));
  for (int i = 0; i < steps; ++i) {
    const double x = ln_a0 + i * dln;
    s.cost_history.push_back(CostRecord{x, dln, 1e6, rate(x + 0.5 * dln) * dln});
  }
  s.a = std::exp(ln_a1);
  return s;
}

// The mean rate over the recent window of history(-2, -1, 1/32, rate): ln a from -1.5 to -1.
template <class Rate>
double recent_mean(Rate rate) {
  double mean = 0;
  for (int i = 0; i < 16; ++i) mean += rate(-1.5 + (i + 0.5) / 32) / 16;
  return mean;
}

}  // namespace

TEST_CASE("ETA: nothing measured yet says unknown") {
  RunState s;
  s.a = 0.02;
  CHECK(predicted_remaining_seconds(s, 0.0, OutputCost{}) < 0);
}

TEST_CASE("ETA: a constant cost per ln a, and the outputs still to come") {
  const RunState s = history(-4.0, -2.0, 1.0 / 32, [](double) { return 2.0; });   // 2 s per unit ln a
  CHECK(predicted_remaining_seconds(s, 0.0, OutputCost{}) == doctest::Approx(4.0).epsilon(1e-9));
  CHECK(predicted_remaining_seconds(s, 0.0, OutputCost{3, 1.5}) == doctest::Approx(8.5).epsilon(1e-9));
}

TEST_CASE("ETA: a cost per ln a growing as e^(0.3 ln a) is integrated to the end, not held flat") {
  const double beta = 0.3;
  auto rate = [&](double x) { return 2.0 * std::exp(beta * x); };
  const RunState s = history(-4.0, -2.0, 1.0 / 32, rate);
  // Exact: the integral of the rate from ln a = -2 to 0.
  const double exact = 2.0 * (std::exp(0.0) - std::exp(beta * -2.0)) / beta;
  const double flat = rate(-2.0) * 2.0;
  const double eta = predicted_remaining_seconds(s, 0.0, OutputCost{});
  CHECK(eta == doctest::Approx(exact).epsilon(0.01));   // the window's mean rate: Jensen's 1e-3
  CHECK(eta > 1.15 * flat);
}

TEST_CASE("ETA: a faster growth is capped, a falling cost is held at its recent rate") {
  // e^(3 ln a): the trend is capped at kMaxCostGrowth, from the window's mean rate at its
  // middle (ln a = -1.25) to now (-1) and on to the end (0).
  auto steep = [](double x) { return std::exp(3.0 * x); };
  const RunState s = history(-2.0, -1.0, 1.0 / 32, steep);
  const double g = kMaxCostGrowth;
  const double capped = recent_mean(steep) * std::exp(g * 0.25) * std::expm1(g * 1.0) / g;
  CHECK(predicted_remaining_seconds(s, 0.0, OutputCost{}) == doctest::Approx(capped).epsilon(1e-9));
  CHECK(capped < 0.5 * steep(-1.0) * std::expm1(3.0) / 3.0);   // far below the uncapped trend

  // e^(-ln a): held at the window's mean rate, never extrapolated down.
  auto falling = [](double x) { return std::exp(-x); };
  const RunState f = history(-2.0, -1.0, 1.0 / 32, falling);
  CHECK(predicted_remaining_seconds(f, 0.0, OutputCost{}) == doctest::Approx(recent_mean(falling)).epsilon(1e-9));
}

TEST_CASE("ETA: a PM step that begins within 1e-4 of the recent window's edge is in it, one 2e-4 before is not") {
  // Rate 2 per unit ln a, but 10 in the step at the edge (ln a = -1.5): first in the window,
  // it makes the trend fall (held flat), so the ETA to ln a = 0 is the window's mean rate.
  auto with_edge_step = [](double shift) {
    RunState s = history(-2.0, -1.0, 1.0 / 32, [](double) { return 2.0; });
    CostRecord& edge = s.cost_history[16];
    REQUIRE(edge.ln_a == -1.5);
    edge.ln_a += shift;   // as the step log's 6 digits of a move it (eta_accuracy.py --replay)
    edge.seconds *= 5;
    return predicted_remaining_seconds(s, 0.0, OutputCost{});
  };
  const double in = (10.0 + 15 * 2.0) / 16, out = 2.0;
  CHECK(with_edge_step(0.0) == doctest::Approx(in).epsilon(1e-9));
  CHECK(with_edge_step(-5e-5) == doctest::Approx(in).epsilon(1e-9));
  CHECK(with_edge_step(5e-5) == doctest::Approx(in).epsilon(1e-9));
  CHECK(with_edge_step(-2e-4) == doctest::Approx(out).epsilon(1e-9));
}

namespace {

// Only the field (no haloes): |g| Gaussian with 3D rms 3/2 Omega_m H0^2 D sigma_psi.
ClusteringInputs field_only(double sigma_psi) {
  ClusteringInputs in;
  in.omega_m = 0.3;
  in.softening = 0.05;
  in.eta = 0.3;
  in.max_dln_a = 0.05;
  in.particles = 1e6;
  in.particle_mass = 1.0;
  in.sigma_psi = sigma_psi;
  return in;
}

}  // namespace

TEST_CASE("ETA forecast: the field's fraction above |g| is the Maxwell tail (direct integral of its density)") {
  const ClusteringInputs in = field_only(5.0);
  const double growth = 0.4;
  const double s = 1.5 * in.omega_m * units::H0 * units::H0 * growth * in.sigma_psi, sigma1 = s / std::sqrt(3.0);
  for (double g : {0.3 * s, s, 2.0 * s}) {
    // int_g^inf 4 pi v^2 (2 pi sigma1^2)^(-3/2) exp(-v^2 / (2 sigma1^2)) dv, midpoint rule.
    double tail = 0;
    const int n = 200000;
    const double top = g + 12 * sigma1, dv = (top - g) / n;
    for (int i = 0; i < n; ++i) {
      const double v = g + (i + 0.5) * dv;
      tail += 4 * units::pi * v * v * std::exp(-v * v / (2 * sigma1 * sigma1)) * dv;
    }
    tail /= std::pow(2 * units::pi * sigma1 * sigma1, 1.5);
    CHECK(fraction_above(in, growth, g) == doctest::Approx(tail).epsilon(1e-6));
  }
}

TEST_CASE("ETA forecast: the haloes' mass is the Press-Schechter collapsed fraction, their |g| the isothermal sphere's") {
  ClusteringInputs in = field_only(0.0);
  in.softening = 1e-9;   // no softening cap
  // sigma(M_0) = delta_c at D = 1 (nu = 1), falling to nothing: PS puts erfc(1/sqrt 2) = 31.73% of
  // the mass in haloes above M_0 (the textbook value: 1 - the 1-sigma Gaussian probability).
  in.sigma_m = {1.686, 1e-3};
  const double rho = in.omega_m * units::rho_crit0;
  const double m = in.particle_mass * std::pow(10.0, 0.125);   // the bin's middle mass
  const double r_vir = std::cbrt(3 * m / (4 * units::pi * 200 * rho));
  const double g_vir = units::G * m / (r_vir * r_vir);
  CHECK(fraction_above(in, 1.0, 0.5 * g_vir) == doctest::Approx(0.317311).epsilon(1e-5));   // the whole halo
  // Beyond g_vir, the mass within r = G M / (r_vir g) of a 1/r^2 profile: the fraction g_vir / g.
  CHECK(fraction_above(in, 1.0, 4 * g_vir) == doctest::Approx(0.317311 / 4).epsilon(1e-5));
  in.softening = 0;   // none at all: the same
  CHECK(fraction_above(in, 1.0, 4 * g_vir) == doctest::Approx(std::erfc(1 / std::sqrt(2.0)) / 4).epsilon(1e-12));
  // Softened: nothing above 2 / (3 sqrt 3) G M / (r_vir eps) ...
  in.softening = 0.1 * r_vir;
  CHECK(fraction_above(in, 1.0, 0.38 * g_vir * 10) > 0);
  CHECK(fraction_above(in, 1.0, 0.39 * g_vir * 10) == 0);
  // ... and below it the mass of the sphere (uniform in r) where the Plummer-softened
  // G M(<r) r / (r^2 + eps^2)^(3/2) exceeds g: a direct scan over r.
  for (double g : {0.8 * g_vir, 2 * g_vir, 3 * g_vir, 3.7 * g_vir}) {
    const int n = 1000000;
    int above = 0;
    for (int i = 0; i < n; ++i) {
      const double r = (i + 0.5) / n * r_vir;
      above += units::G * m * (r / r_vir) * r / std::pow(r * r + in.softening * in.softening, 1.5) > g;
    }
    CHECK(fraction_above(in, 1.0, g) == doctest::Approx(0.317311 * above / n).epsilon(1e-4));
  }
}

TEST_CASE("ETA forecast: kicks per PM step and the deepest bin equal Gaussian accelerations binned by the engines' rule") {
  const ClusteringInputs in = field_only(3.0);
  const Cosmology cosmology(CosmologyParams{});
  const double a = 0.5, growth = cosmology.growth(a), hubble = cosmology.hubble(a);
  const BinForecast f = forecast_bins(in, growth, hubble, a, in.max_dln_a);
  // Sample the field's accelerations and bin them with bin_for_acceleration, as assign_bins does.
  const double s = 1.5 * in.omega_m * units::H0 * units::H0 * growth * in.sigma_psi, sigma1 = s / std::sqrt(3.0);
  BinRule rule;
  rule.max_bin = kDeepestBin;
  const double x = in.eta * hubble / in.max_dln_a;
  rule.acc_bin0 = in.softening * a * a * a * x * x;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, sigma1);
  const int n = 400000;
  double kicks = 0;
  int deepest = 0;
  for (int i = 0; i < n; ++i) {
    const double gx = normal(rng), gy = normal(rng), gz = normal(rng);
    const int bin = bin_for_acceleration(gx * gx + gy * gy + gz * gz, rule);
    kicks += std::ldexp(1.0, bin);
    deepest = std::max(deepest, bin);
  }
  kicks /= n;
  REQUIRE(kicks > 1.5);   // a regime where the bins matter
  CHECK(f.kicks == doctest::Approx(kicks).epsilon(0.01));
  // The sample has 4e5 particles, the forecast 1e6: the same deepest bin or one deeper.
  CHECK(f.deepest >= deepest);
  CHECK(f.deepest <= deepest + 1);
}

TEST_CASE("ETA forecast: a run whose cost grows as the forecast says is forecast to within 1%") {
  const Cosmology cosmology(CosmologyParams{});
  const LinearPower power = LinearPower::eisenstein_hu(0.3144, 0.0494, 0.6732, 0.966, 0.812, false);
  const ClusteringInputs in = ClusteringInputs::from_power(power, 0.3144, 100.0, 32, 0.078, 0.3, 0.05);
  CHECK(in.sigma_m.size() == 19);   // 10^(j/4) particles up to N = 32^3
  // sigma(M) against LinearPower's adaptive integral for the top hat holding M.
  for (std::size_t j = 0; j < in.sigma_m.size(); j += 6) {
    const double m = in.particle_mass * std::pow(10.0, j / 4.0);
    CHECK(in.sigma_m[j] == doctest::Approx(power.sigma_r(std::cbrt(3 * m / (4 * units::pi * 0.3144 * units::rho_crit0)))).epsilon(1e-4));
  }
  const double ln_begin = std::log(0.02), ln_end = 0.0;
  const ClusteringForecast forecast(in, cosmology, ln_begin, ln_end);
  // The bins deepen as structure forms: more kicks per PM step at z = 0 than at z = 9.
  CHECK(forecast.at(std::log(0.1)).kicks < forecast.at(-0.2).kicks);
  CHECK(forecast.at(ln_begin).kicks == doctest::Approx(1.0));

  // Seconds per PM step: 0.8 (kicks + 0.05 (syncs - 1)), recorded up to ln a = -1.
  const double c = 0.8, lambda = 0.05, dln = 1.0 / 32;
  auto cost = [&](double x) {
    const BinForecast f = forecast.at(x);
    return c * (f.kicks + lambda * (std::ldexp(1.0, f.deepest) - 1));
  };
  RunState s;
  double x = ln_begin;
  for (; x < -1.0 - 1e-12; x += dln) {
    const BinForecast f = forecast.at(x + 0.5 * dln);
    CostRecord r{x, dln, f.kicks * in.particles, cost(x + 0.5 * dln)};
    r.syncs = std::ldexp(1.0, f.deepest);
    r.deepest = f.deepest;
    r.end_seconds = 1.0;
    r.end_fixed = lambda;
    s.cost_history.push_back(r);
  }
  s.a = std::exp(x);
  double exact = 0;
  for (double y = x; y < ln_end - 1e-9; y += dln) exact += cost(y + 0.5 * std::min(dln, ln_end - y)) * std::min(dln, ln_end - y) / dln;
  CHECK(exact > 2 * c * (ln_end - x) / dln);   // dearer than the steps so far
  CHECK(forecast_remaining_seconds(s, forecast, ln_end, OutputCost{}) == doctest::Approx(exact).epsilon(0.01));
  CHECK(forecast_remaining_seconds(s, forecast, ln_end, OutputCost{2, 3.0}) ==
        doctest::Approx(exact + 6.0).epsilon(0.01));
  // Nothing measured yet: unknown.
  RunState empty;
  empty.a = 0.02;
  CHECK(forecast_remaining_seconds(empty, forecast, ln_end, OutputCost{}) < 0);
}
