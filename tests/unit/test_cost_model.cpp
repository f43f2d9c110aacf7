// The step log's ETA (integrate/cost_model.hpp) on made-up run histories whose true remaining
// time is known in closed form: PM steps of equal length in ln a whose sync points cost
// alpha per force evaluation plus beta each.
#include <doctest/doctest.h>

#include <cmath>

#include "integrate/cost_model.hpp"

using namespace orbis;

namespace {

constexpr double kAlpha = 2e-6, kBeta = 0.05;   // seconds per evaluation, per sync point
constexpr double kDln = 0.025;

// A state at the end of `done` PM steps from ln a = -4, each with `evaluations` and `syncs`
// on average (times exp(growth * ln a) per unit ln a), bins as given, the next PM step begun.
RunState state_after(int done, double evaluations, double syncs, double growth, const BinCounts& bins) {
  RunState s;
  double ln_a = -4;
  for (int j = 0; j < done; ++j, ln_a += kDln) {
    // Fewer and more sync points for the same evaluations (as bins fill and empty): without
    // that variety no fit could tell the two prices apart. The pattern 0.5 1.5 1.5 0.5 has no
    // trend over whole periods (the ETA's window below is 5 or 8 of them).
    const double g = std::exp(growth * (ln_a + 0.5 * kDln)), shape = (j % 4 == 0 || j % 4 == 3) ? 0.5 : 1.5;
    CostRecord r{ln_a, kDln, evaluations * g, 0, syncs * g * shape};
    r.seconds = kAlpha * r.particle_steps + kBeta * r.sync_points;
    s.cost_history.push_back(r);
  }
  s.a = std::exp(ln_a);
  s.pm_a_begin = s.a;
  s.pm_a_end = std::exp(ln_a + kDln);
  s.tick = 0;
  s.bins = bins;
  return s;
}

}  // namespace

TEST_CASE("ETA: a fixed cost per sync point and a cost per evaluation, both recovered") {
  // 1000 particles in bin 0, 100 in bin 3: 1800 evaluations and 8 sync points per PM step.
  BinCounts bins{};
  bins[0] = 1000;
  bins[3] = 100;
  const RunState s = state_after(40, 1800, 8, 0, bins);
  const double ln_end = std::log(s.pm_a_end) + 20 * kDln;   // this PM step and 20 more
  const double truth = 21 * (kAlpha * 1800 + kBeta * 8);
  const double eta = predicted_remaining_seconds(s, ln_end);
  CHECK(eta == doctest::Approx(truth).epsilon(1e-6));
  // Bins deeper than in the history (more sync points per PM step from now on): pricing every
  // second per evaluation would be off by 40% here.
  bins[3] = 0;
  bins[5] = 100;   // 1000 + 3200 evaluations, 32 sync points per PM step
  const RunState deeper = state_after(40, 1800, 8, 0, bins);
  const double truth_deeper = 21 * (kAlpha * 4200 + kBeta * 32);
  CHECK(predicted_remaining_seconds(deeper, ln_end) == doctest::Approx(truth_deeper).epsilon(1e-6));
}

TEST_CASE("ETA: the middle of a PM step, and growing cost per unit ln a") {
  BinCounts bins{};
  bins[0] = 1000;
  bins[2] = 200;   // 1800 evaluations, 4 sync points per PM step
  RunState s = state_after(64, 1800, 4, 0, bins);
  s.tick = kPmTicks / 2;   // half of this PM step done: 1000 + 400 evaluations and 2 sync points left
  const double now_left = kAlpha * 1400 + kBeta * 2;
  CHECK(predicted_remaining_seconds(s, std::log(s.pm_a_end)) == doctest::Approx(now_left).epsilon(1e-6));

  // History growing as exp(0.8 ln a) per unit ln a: the later PM steps are predicted to keep
  // growing at that rate (integral of the rate over the span), not at today's rate.
  const double growth = 0.8;
  RunState g = state_after(64, 1800, 4, growth, bins);
  const double ln_end = std::log(g.pm_a_end) + 1.0;
  const double eta = predicted_remaining_seconds(g, ln_end);
  const double flat = kAlpha * 1800 + kBeta * 4;   // this PM step (from the bins)
  const double rate = (kAlpha * 1800 + kBeta * 4) / kDln;
  const double later = rate * std::expm1(growth * 1.0) / growth;
  CHECK(eta == doctest::Approx(flat + later).epsilon(1e-3));
  CHECK(eta > flat + rate * 1.0 * 1.3);   // more than a constant rate would say
}

TEST_CASE("ETA: one global step (every sync point all particles) prices per evaluation") {
  BinCounts bins{};
  bins[0] = 5000;
  RunState s = state_after(30, 5000, 1, 0, bins);
  for (CostRecord& r : s.cost_history) r.seconds = 1e-5 * r.particle_steps;
  const double ln_end = std::log(s.pm_a_end) + 10 * kDln;
  CHECK(predicted_remaining_seconds(s, ln_end) == doctest::Approx(11 * 5000 * 1e-5).epsilon(1e-9));
  CHECK(predicted_remaining_seconds(RunState{}, 0.0) < 0);   // nothing measured yet
}
