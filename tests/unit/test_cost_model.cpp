// The step log's ETA (integrate/cost_model.hpp). Global steps' trend on synthetic cost
// histories whose remaining time is known in closed form: a constant cost per unit ln a, one
// growing exponentially in ln a, one falling, and the outputs still to come. Hierarchical
// steps' forecast: its pieces against independent references (the Press-Schechter collapsed
// fraction, the isothermal sphere's |g| distribution, Gaussian accelerations binned by the
// engines' own bin rule, the ORB tree's leaves counted directly), a sync point's price
// recovered from synthetic sub-steps of a known law, and synthetic runs whose sync points cost
// as that law says, forecast to their remaining time.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "core/units.hpp"
#include "cosmology/cosmology.hpp"
#include "cosmology/linear_power.hpp"
#include "integrate/cost_model.hpp"
#include "integrate/time_bins.hpp"

using namespace orbis;

namespace {

// What the ETA is given: the completed PM steps' costs, and the scale factor now.
struct Measured {
  double a = 0;
  std::vector<CostRecord> history;
};

// PM steps of dln from ln_a0 to ln_a1, each costing rate(x_mid) * dln seconds.
// (Steps of 1/32 keep every ln a exact, so the recent window's edge is unambiguous.)
template <class Rate>
Measured history(double ln_a0, double ln_a1, double dln, Rate rate) {
  Measured s;
  const int steps = static_cast<int>(std::lround((ln_a1 - ln_a0) / dln));
  for (int i = 0; i < steps; ++i) {
    const double x = ln_a0 + i * dln;
    s.history.push_back(CostRecord{x, dln, 1e6, rate(x + 0.5 * dln) * dln});
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
  Measured s;
  s.a = 0.02;
  CHECK(predicted_remaining_seconds(s.history, s.a, 0.0, OutputCost{}) < 0);
}

TEST_CASE("ETA: a constant cost per ln a, and the outputs still to come") {
  const Measured s = history(-4.0, -2.0, 1.0 / 32, [](double) { return 2.0; });   // 2 s per unit ln a
  CHECK(predicted_remaining_seconds(s.history, s.a, 0.0, OutputCost{}) == doctest::Approx(4.0).epsilon(1e-9));
  CHECK(predicted_remaining_seconds(s.history, s.a, 0.0, OutputCost{3, 1.5}) == doctest::Approx(8.5).epsilon(1e-9));
}

TEST_CASE("ETA: a cost per ln a growing as e^(0.3 ln a) is integrated to the end, not held flat") {
  const double beta = 0.3;
  auto rate = [&](double x) { return 2.0 * std::exp(beta * x); };
  const Measured s = history(-4.0, -2.0, 1.0 / 32, rate);
  // Exact: the integral of the rate from ln a = -2 to 0.
  const double exact = 2.0 * (std::exp(0.0) - std::exp(beta * -2.0)) / beta;
  const double flat = rate(-2.0) * 2.0;
  const double eta = predicted_remaining_seconds(s.history, s.a, 0.0, OutputCost{});
  CHECK(eta == doctest::Approx(exact).epsilon(0.01));   // the window's mean rate: Jensen's 1e-3
  CHECK(eta > 1.15 * flat);
}

TEST_CASE("ETA: a faster growth is capped, a falling cost is held at its recent rate") {
  // e^(3 ln a): the trend is capped at kMaxCostGrowth, from the window's mean rate at its
  // middle (ln a = -1.25) to now (-1) and on to the end (0).
  auto steep = [](double x) { return std::exp(3.0 * x); };
  const Measured s = history(-2.0, -1.0, 1.0 / 32, steep);
  const double g = kMaxCostGrowth;
  const double capped = recent_mean(steep) * std::exp(g * 0.25) * std::expm1(g * 1.0) / g;
  CHECK(predicted_remaining_seconds(s.history, s.a, 0.0, OutputCost{}) == doctest::Approx(capped).epsilon(1e-9));
  CHECK(capped < 0.5 * steep(-1.0) * std::expm1(3.0) / 3.0);   // far below the uncapped trend

  // e^(-ln a): held at the window's mean rate, never extrapolated down.
  auto falling = [](double x) { return std::exp(-x); };
  const Measured f = history(-2.0, -1.0, 1.0 / 32, falling);
  CHECK(predicted_remaining_seconds(f.history, f.a, 0.0, OutputCost{}) == doctest::Approx(recent_mean(falling)).epsilon(1e-9));
}

TEST_CASE("ETA: a PM step that begins within 1e-4 of the recent window's edge is in it, one 2e-4 before is not") {
  // Rate 2 per unit ln a, but 10 in the step at the edge (ln a = -1.5): first in the window,
  // it makes the trend fall (held flat), so the ETA to ln a = 0 is the window's mean rate.
  auto with_edge_step = [](double shift) {
    Measured s = history(-2.0, -1.0, 1.0 / 32, [](double) { return 2.0; });
    CostRecord& edge = s.history[16];
    REQUIRE(edge.ln_a == -1.5);
    edge.ln_a += shift;   // as the step log's 6 digits of a move it (eta_accuracy.py --replay)
    edge.seconds *= 5;
    return predicted_remaining_seconds(s.history, s.a, 0.0, OutputCost{});
  };
  const double in = (10.0 + 15 * 2.0) / 16, out = 2.0;
  CHECK(with_edge_step(0.0) == doctest::Approx(in).epsilon(1e-9));
  CHECK(with_edge_step(-5e-5) == doctest::Approx(in).epsilon(1e-9));
  CHECK(with_edge_step(5e-5) == doctest::Approx(in).epsilon(1e-9));
  CHECK(with_edge_step(-2e-4) == doctest::Approx(out).epsilon(1e-9));
}

TEST_CASE("ETA: a PM step without measured seconds or length is left out of the trend and its count") {
  // 0.5 s per unit ln a (a negative log rate, where a miscounted fit tilts upwards), and one
  // step of the recent window without seconds, or without length: the others give the rate.
  for (const bool zero_length : {false, true}) {
    CAPTURE(zero_length);
    Measured s = history(-2.0, -1.0, 1.0 / 32, [](double) { return 0.5; });
    CostRecord& odd = s.history[20];
    (zero_length ? odd.dln_a : odd.seconds) = 0;
    CHECK(predicted_remaining_seconds(s.history, s.a, 0.0, OutputCost{}) == doctest::Approx(0.5).epsilon(1e-9));
    // PM steps to come as long as the measured ones (1/32): 32 to ln a = 0, 4 checks of 1 s.
    OutputCost o;
    o.check_every = 8, o.check_seconds = 1.0;
    CHECK(predicted_remaining_seconds(s.history, s.a, 0.0, o) == doctest::Approx(0.5 + 4).epsilon(1e-9));
  }
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

namespace {

// A run of 256^3 in 1 Gpc/h whose sync points cost exactly E + s0 + work f^alpha (f the active
// fraction): its PM steps of 1/32 in ln a from a = 0.01 to ln a = ln_now, each with the
// forecast's bins (2^(k-1) sub-steps with bins >= k active, k = 1 .. deepest).
struct SyntheticRun {
  double pm = 0.01, fixed = 0.006, work = 0.13, alpha = 0.4, other = 0.002;
  double full = fixed + work + pm;   // the full step: a sync point with every particle active, and the PM
  bool subs = true;   // false: the sub-steps' seconds not recorded (a log before the buckets)
  double step_seconds(const BinForecast& f) const {
    double s = full;
    for (int k = 1; k <= f.deepest; ++k) s += std::ldexp(fixed + work * std::pow(f.above[static_cast<std::size_t>(k)], alpha), k - 1);
    return s;
  }
  Measured history(const ClusteringForecast& forecast, double ln_begin, double ln_now, double dln) const {
    Measured s;
    double x = ln_begin;
    for (; x < ln_now - 1e-12; x += dln) {
      const BinForecast f = forecast.at(x + 0.5 * dln);
      CostRecord r{x, dln, f.kicks * forecast.particles(), step_seconds(f)};
      r.syncs = std::ldexp(1.0, f.deepest);
      r.deepest = f.deepest;
      r.end_seconds = full;
      r.end_pm = pm;
      r.end_other = other;
      for (int k = 1; k <= f.deepest && subs; ++k) {
        const double p = f.above[static_cast<std::size_t>(k)];
        const double seconds = fixed + work * std::pow(p, alpha);
        SubStepCost& c = r.sub[static_cast<std::size_t>(std::clamp(static_cast<int>(std::floor(-std::log2(p))), 0, kSubStepBuckets - 1))];
        c.syncs += std::ldexp(1.0, k - 1), c.seconds += std::ldexp(seconds, k - 1), c.active += std::ldexp(p, k - 1) * forecast.particles();
        if (r.sub_min == 0 || seconds < r.sub_min) r.sub_min = seconds;
      }
      s.history.push_back(r);
    }
    s.a = std::exp(x);
    return s;
  }
  double remaining(const ClusteringForecast& forecast, double ln_a, double ln_end, double dln) const {
    double exact = 0;
    for (double y = ln_a; y < ln_end - 1e-9; y += dln) {
      const double d = std::min(dln, ln_end - y);
      exact += step_seconds(forecast.at(y + 0.5 * d)) * d / dln;
    }
    return exact;
  }
};

ClusteringInputs inputs_256(double work_particles) {
  const LinearPower power = LinearPower::eisenstein_hu(0.3144, 0.0494, 0.6732, 0.966, 0.812, false);
  ClusteringInputs in = ClusteringInputs::from_power(power, 0.3144, 1000.0, 256, 0.1, 0.3, 0.05);
  in.work_particles = work_particles;
  return in;
}

}  // namespace

TEST_CASE("ETA forecast: a leaf's particles are those of the ORB tree's shape (a direct count of its leaves)") {
  const std::function<double(double, int)> leaves = [&](double n, int max_leaf) {
    return n <= max_leaf ? 1.0 : leaves(std::floor(n / 2), max_leaf) + leaves(n - std::floor(n / 2), max_leaf);
  };
  for (double n : {100.0, 1000.0, 32768.0, 1e5 + 7})
    for (int max_leaf : {1, 8, 32})
      CHECK(leaf_particles(n, max_leaf) == doctest::Approx(n / leaves(n, max_leaf)).epsilon(1e-12));
  CHECK(leaf_particles(16777216.0, 32) == 32.0);   // 256^3 in leaves of at most 32: 2^19 leaves of 32
  CHECK(leaf_particles(0.0, 32) == 1.0);
}

namespace {

// The leaves of an ORB tree over `points` (x, y, z, r): halves at the median of the longest
// extent until at most max_leaf remain (tree/orb_tree.hpp's rule, written out again here).
void orb_leaves(std::vector<std::array<double, 4>> points, int max_leaf, std::vector<std::vector<std::array<double, 4>>>& out) {
  if (static_cast<int>(points.size()) <= max_leaf) {
    out.push_back(std::move(points));
    return;
  }
  int axis = 0;
  double widest = -1;
  for (int d = 0; d < 3; ++d) {
    const auto [lo, hi] = std::minmax_element(points.begin(), points.end(), [d](const auto& a, const auto& b) { return a[d] < b[d]; });
    if ((*hi)[d] - (*lo)[d] > widest) widest = (*hi)[d] - (*lo)[d], axis = d;
  }
  const auto half = points.begin() + static_cast<std::ptrdiff_t>(points.size() / 2);
  std::nth_element(points.begin(), half, points.end(), [axis](const auto& a, const auto& b) { return a[axis] < b[axis]; });
  orb_leaves({points.begin(), half}, max_leaf, out);
  orb_leaves({half, points.end()}, max_leaf, out);
}

}  // namespace

TEST_CASE("ETA forecast: the prior share of work lies between f and 1 - (1 - f)^L, is f for L = 1, and tends to L f and 1") {
  const Cosmology cosmology(CosmologyParams{});
  for (double leaf : {1.0, 8.0, 32.0}) {
    ClusteringInputs in = inputs_256(leaf);
    for (double a : {0.1, 0.3, 1.0}) {
      const double growth = cosmology.growth(a);
      for (double g = 1e-3; g < 1e7; g *= 3) {
        const ActiveShare p = active_above(in, growth, g);
        CHECK(p.fraction == fraction_above(in, growth, g));
        if (!(p.fraction > 0)) {
          CHECK(p.work == 0);
          continue;
        }
        const double random = -std::expm1(leaf * std::log1p(-p.fraction));
        if (leaf == 1) {
          CHECK(p.work == doctest::Approx(p.fraction).epsilon(1e-12));   // the host engine: exactly the active ones
        } else {
          CHECK(p.work >= p.fraction * (1 - 1e-12));
          CHECK(p.work <= random * (1 + 1e-12));
        }
      }
      // f -> 1 (no threshold): every leaf.
      CHECK(active_above(in, growth, 1e-9).work == doctest::Approx(1.0).epsilon(1e-6));
    }
    // f -> 0 (a thin shell at the haloes' softened peak, the field far below it): the few
    // active particles each in a leaf of their own, A -> L f.
    const double growth = cosmology.growth(1.0);
    double g = 1e3;
    while (fraction_above(in, growth, 2 * g) > 0) g *= 2;
    while (fraction_above(in, growth, 1.05 * g) > 0) g *= 1.05;
    const ActiveShare p = active_above(in, growth, g);
    REQUIRE(p.fraction > 0);
    REQUIRE(p.fraction < 1e-6);
    CHECK(p.work == doctest::Approx(leaf * p.fraction).epsilon(1e-3));
  }
}

TEST_CASE("ETA forecast: the leaves a halo's active shell touches match an ORB tree over an isothermal sphere's particles") {
  // Haloes of one mass only: sigma(M_j) = delta_c up to M_15, nothing above (PS: 31.73% of the
  // mass in haloes of 10^(15.5/4) = 7499 particles), no field.
  ClusteringInputs in = field_only(0.0);
  in.sigma_m.assign(16, 1.686);
  in.sigma_m.push_back(1e-3);
  const int n_h = 7499;
  const double m = in.particle_mass * std::pow(10.0, 15.5 / 4), rho = in.omega_m * units::rho_crit0;
  const double r_vir = std::cbrt(3 * m / (4 * units::pi * 200 * rho)), g_vir = units::G * m / (r_vir * r_vir);
  in.softening = 0.02 * r_vir;   // the shells below lie inside r_vir
  in.work_particles = leaf_particles(n_h, 32);
  // The halo's particles: r uniform in (0, r_vir) (M(<r) = M r / r_vir), directions at random.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> uniform(-1, 1);
  std::vector<std::array<double, 4>> points;
  for (int i = 0; i < n_h; ++i) {
    const double r = (i + 0.5) / n_h * r_vir, z = uniform(rng), phi = units::pi * uniform(rng), s = std::sqrt(1 - z * z);
    points.push_back({r * s * std::cos(phi), r * s * std::sin(phi), r * z, r});
  }
  std::vector<std::vector<std::array<double, 4>>> leaves;
  orb_leaves(points, 32, leaves);
  for (double x : {2.0, 8.0, 15.0}) {
    const double g = x * g_vir;
    const auto active = [&](const std::array<double, 4>& q) {   // the Plummer-softened |g| of the sphere
      return units::G * m * (q[3] / r_vir) * q[3] / std::pow(q[3] * q[3] + in.softening * in.softening, 1.5) > g;
    };
    double touched = 0, count = 0;
    for (const auto& leaf : leaves) {
      touched += std::any_of(leaf.begin(), leaf.end(), active);
      count += static_cast<double>(std::count_if(leaf.begin(), leaf.end(), active));
    }
    // The share of all leaves: the haloes' mass fraction times a halo's touched leaves per its leaves.
    const double direct = 0.317311 * touched / static_cast<double>(leaves.size());
    const ActiveShare p = active_above(in, 1.0, g);
    REQUIRE(p.fraction == doctest::Approx(0.317311 * count / n_h).epsilon(0.01));
    CHECK(p.work == doctest::Approx(direct).epsilon(0.15));   // seen: within 1-8% for these shells
    // Active particles at random over the leaves would touch far more of them (1.5-7x here).
    const double random = -std::expm1(in.work_particles * std::log1p(-count / n_h));
    CHECK(random > 1.4 * touched / static_cast<double>(leaves.size()));
  }
}

TEST_CASE("ETA forecast: the bins' fractions add up to the kicks, and fall with the bin") {
  const Cosmology cosmology(CosmologyParams{});
  const ClusteringInputs in = inputs_256(1);
  const ClusteringForecast forecast(in, cosmology, std::log(0.01), 0.0);
  for (double a : {0.2, 0.5, 1.0}) {
    const BinForecast f = forecast.at(std::log(a));
    REQUIRE(f.deepest >= 2);
    double kicks = 1;
    for (int k = 1; k <= f.deepest; ++k) {
      kicks += std::ldexp(f.above[static_cast<std::size_t>(k)], k - 1);
      if (k > 1) CHECK(f.above[static_cast<std::size_t>(k)] <= f.above[static_cast<std::size_t>(k - 1)]);
    }
    CHECK(f.kicks == doctest::Approx(kicks).epsilon(1e-12));
    for (int k = f.deepest + 1; k <= kDeepestBin; ++k) CHECK(f.above[static_cast<std::size_t>(k)] == 0);
  }
}

TEST_CASE("ETA forecast: a sync point's price from measured sub-steps recovers their law") {
  const Cosmology cosmology(CosmologyParams{});
  const ClusteringInputs in = inputs_256(32);
  const ClusteringForecast forecast(in, cosmology, std::log(0.01), 0.0);
  const SyntheticRun run;
  const Measured s = run.history(forecast, std::log(0.01), std::log(0.4), 1.0 / 32);
  const SyncPointPrice p = sync_point_price(s.history, s.history.size() / 2, forecast.particles());
  REQUIRE(p.valid);
  CHECK(p.full == doctest::Approx(run.full));
  // s0: the cheapest sub-step, whose few active particles add work (its f ~ 1e-7) ^ 0.4.
  CHECK(p.fixed == doctest::Approx(run.fixed).epsilon(0.01));
  CHECK(p.work == doctest::Approx(run.full - p.fixed - run.pm).epsilon(1e-12));
  CHECK(p.alpha == doctest::Approx(run.alpha).epsilon(0.03));   // f^alpha on each bucket's mean f
  CHECK(p.weight > 0.9);   // many full steps' worth of measured sub-step work
  // A(f): the weights' mixture of f^alpha and the forecast's prior, A(1) = 1.
  for (double f : {1e-4, 0.01, 0.3}) {
    const double prior = 1 - std::pow(1 - f, 32.0);
    CHECK(p.at(f, prior) == doctest::Approx(p.work * (p.weight * std::pow(f, p.alpha) + (1 - p.weight) * prior)).epsilon(1e-9));
  }
  CHECK(p.at(1.0, 1.0) == doctest::Approx(p.work).epsilon(1e-12));
  CHECK(p.at(0.0, 0.0) == 0);

  // No sub-step measured yet: s0 from the full step (what no active phase or the tree holds),
  // A the prior alone.
  SyntheticRun early = run;
  early.subs = false;
  const Measured e = early.history(forecast, std::log(0.01), std::log(0.4), 1.0 / 32);
  const SyncPointPrice q = sync_point_price(e.history, 0, forecast.particles());
  CHECK(q.fixed == doctest::Approx(run.other));
  CHECK(q.weight == 0);
  CHECK(q.at(0.01, 0.2) == doctest::Approx(q.work * 0.2).epsilon(1e-12));
  // A restart's records (no full step): no price.
  Measured restarted = e;
  for (CostRecord& r : restarted.history) r = CostRecord{r.ln_a, r.dln_a, r.particle_steps, r.seconds};
  CHECK_FALSE(sync_point_price(restarted.history, 0, forecast.particles()).valid);
}

TEST_CASE("ETA forecast: a run whose sync points cost as the model says is forecast to its remaining time") {
  const Cosmology cosmology(CosmologyParams{});
  const double ln_begin = std::log(0.01), ln_end = 0.0, dln = 1.0 / 32;
  // Priced as the host engine's (L = 1) with alpha = 1: the prior is the law, so the forecast
  // is exact from the first PM step on, sub-steps measured or not.
  {
    const ClusteringForecast forecast(inputs_256(1), cosmology, ln_begin, ln_end);
    SyntheticRun run;
    run.alpha = 1;
    run.other = run.fixed;   // the full step's share of what every sync point pays
    for (double ln_now : {std::log(0.05), std::log(0.3), std::log(0.6)}) {
      const Measured s = run.history(forecast, ln_begin, ln_now, dln);
      const double exact = run.remaining(forecast, std::log(s.a), ln_end, dln);
      CHECK(forecast_remaining_seconds(s.history, s.a, forecast, ln_end, OutputCost{}) == doctest::Approx(exact).epsilon(2e-3));
    }
  }
  // Leaves of 32 and alpha = 0.4: once the sub-steps are measured, to within 1%; the outputs,
  // the energy check's W and the last output's wait added.
  const ClusteringForecast forecast(inputs_256(32), cosmology, ln_begin, ln_end);
  const SyntheticRun run;
  const Measured s = run.history(forecast, ln_begin, std::log(0.4), dln);
  const double exact = run.remaining(forecast, std::log(s.a), ln_end, dln);
  CHECK(exact > 3 * run.full * (ln_end - std::log(s.a)) / dln);   // far dearer than full steps alone
  CHECK(forecast_remaining_seconds(s.history, s.a, forecast, ln_end, OutputCost{}) == doctest::Approx(exact).epsilon(0.01));
  OutputCost other{2, 3.0};
  other.checks = 3, other.check_seconds = 1.5, other.final_wait = 4.0;
  CHECK(forecast_remaining_seconds(s.history, s.a, forecast, ln_end, other) -
            forecast_remaining_seconds(s.history, s.a, forecast, ln_end, OutputCost{}) ==
        doctest::Approx(2 * 3.0 + 3 * 1.5 + 4.0).epsilon(1e-9));
  // A restart's records: the recent seconds per force evaluation times the kicks to come.
  Measured restarted = s;
  for (CostRecord& r : restarted.history) r = CostRecord{r.ln_a, r.dln_a, r.particle_steps, r.seconds};
  const double eta = forecast_remaining_seconds(restarted.history, restarted.a, forecast, ln_end, OutputCost{});
  CHECK(eta > 0);
  CHECK(eta == doctest::Approx(exact).epsilon(0.5));   // a fallback, not the model
  // Nothing measured yet: unknown.
  Measured empty;
  empty.a = 0.02;
  CHECK(forecast_remaining_seconds(empty.history, empty.a, forecast, ln_end, OutputCost{}) < 0);
}

TEST_CASE("ETA: the energy check's W every few PM steps counts the PM steps to come") {
  OutputCost o;
  o.checks = 2, o.check_every = 4, o.check_seconds = 1.0;
  CHECK(other_seconds(o, 10.0) == doctest::Approx(2 + 2));   // two landmarks, floor(10 / 4) more
  o.check_every = 0;
  CHECK(other_seconds(o, 10.0) == doctest::Approx(2));
  o.check_every = (std::int64_t{1} << 32) + 4;   // [analysis] energy_check_every goes to 1e12
  CHECK(other_seconds(o, 10.0) == doctest::Approx(2));
  // Global steps add the same: PM steps to come as long as the recent ones.
  const Measured s = history(-2.0, -1.0, 1.0 / 32, [](double) { return 2.0; });
  o.check_every = 8;
  CHECK(predicted_remaining_seconds(s.history, s.a, 0.0, o) - predicted_remaining_seconds(s.history, s.a, 0.0, OutputCost{}) ==
        doctest::Approx(2 + 4).epsilon(1e-9));   // 32 PM steps of 1/32 to ln a = 0: 4 checks
}
