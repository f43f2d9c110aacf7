// The step log's ETA (integrate/cost_model.hpp) on synthetic cost histories whose remaining
// time is known in closed form: a constant cost per unit ln a, one growing exponentially in
// ln a, one falling, and the outputs still to come.
#include <doctest/doctest.h>

#include <cmath>

#include "integrate/cost_model.hpp"

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
