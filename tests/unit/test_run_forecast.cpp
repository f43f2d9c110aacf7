// The step log's ETA as the run loop feeds it (integrate/run_forecast.hpp): sync points of
// known seconds and active counts go into the cost records a PM step at a time; synthetic runs
// whose steps cost a known amount are forecast to their remaining time, in closed form; the
// outputs, the energy check's W and the background writer's last output are added as
// measured (guessed before). The model behind it has its own tests (test_cost_model.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/timer.hpp"
#include "cosmology/cosmology.hpp"
#include "cosmology/linear_power.hpp"
#include "integrate/block_stepper.hpp"
#include "integrate/run_forecast.hpp"
#include "integrate/run_state.hpp"
#include "integrate/time_bins.hpp"

using namespace orbis;

namespace {

OutputSchedule schedule_of(double a_begin, std::vector<double> outputs, double a_end) {
  OutputSchedule s;
  s.a_begin = a_begin;
  s.a_end = a_end;
  s.a_outputs = std::move(outputs);
  return s;
}

OutputGuess guess_of(bool background, double in_steps, double writer) {
  OutputGuess g;
  g.background = background;
  g.in_steps = in_steps;
  g.writer = writer;
  return g;
}

// Global steps: PM steps of 1/32 in ln a from ln_a0 to ln_a1, one sync point each (every
// particle active) of `seconds`; the state at the end of the last one.
RunState global_steps(RunForecast& forecast, double ln_a0, double ln_a1, double seconds, std::uint64_t n) {
  const int steps = static_cast<int>(std::lround((ln_a1 - ln_a0) * 32));
  for (int i = 0; i < steps; ++i) {
    forecast.pm_step_begun(std::exp(ln_a0 + i / 32.0), std::exp(ln_a0 + (i + 1) / 32.0));
    forecast.sync_point(seconds, SyncPoint{n, true}, 0, PhaseTimes{});
  }
  RunState state;
  state.a = std::exp(ln_a1);
  state.tick = kPmTicks;
  return state;
}

}  // namespace

TEST_CASE("RunForecast: a PM step's sync points go into one cost record, sub-steps into the buckets of their active fraction") {
  const std::uint64_t n = 1000;
  RunForecast forecast(schedule_of(0.1, {1.0}, 1.0), n, OutputGuess{}, 0);
  forecast.pm_step_begun(0.5, 0.5 * std::exp(0.05));
  forecast.sync_point(0.4, SyncPoint{300, false}, 2, PhaseTimes{});   // f = 0.3: [2^-2, 2^-1)
  forecast.sync_point(0.1, SyncPoint{3, false}, 2, PhaseTimes{});     // f = 0.003: [2^-9, 2^-8)
  forecast.sync_point(0.3, SyncPoint{200, false}, 1, PhaseTimes{});   // f = 0.2: [2^-3, 2^-2)
  CHECK(forecast.costs().history.empty());
  CHECK(forecast.costs().pm_step.syncs == 3);
  PhaseTimes phases;
  phases.add("pm", 0.5), phases.add("p2p", 0.6), phases.add("walk", 0.2), phases.add("tree", 0.1);
  phases.add("m2l", 0.05), phases.add("kdk", 0.3);   // the drift and kicks: no phase of the active particles
  forecast.sync_point(2.0, SyncPoint{n, true}, 2, phases);

  REQUIRE(forecast.costs().history.size() == 1);
  const CostRecord& r = forecast.costs().history[0];
  CHECK(r.ln_a == std::log(0.5));
  CHECK(r.dln_a == doctest::Approx(0.05).epsilon(1e-12));
  CHECK(r.particle_steps == 300 + 3 + 200 + 1000);
  CHECK(r.seconds == doctest::Approx(2.8).epsilon(1e-15));
  CHECK(r.syncs == 4);
  CHECK(r.deepest == 2);
  CHECK(r.end_seconds == 2.0);
  CHECK(r.end_pm == 0.5);
  CHECK(r.end_other == doctest::Approx(2.0 - 0.5 - 0.6 - 0.2 - 0.1 - 0.05).epsilon(1e-12));
  CHECK(r.sub_min == 0.1);
  for (int b = 0; b < kSubStepBuckets; ++b) {
    CAPTURE(b);
    const SubStepCost& c = r.sub[static_cast<std::size_t>(b)];
    if (b == 1) {
      CHECK(c.syncs == 1);
      CHECK(c.seconds == 0.4);
      CHECK(c.active == 300);
    } else if (b == 2) {
      CHECK(c.syncs == 1);
      CHECK(c.seconds == 0.3);
      CHECK(c.active == 200);
    } else if (b == 8) {
      CHECK(c.syncs == 1);
      CHECK(c.seconds == 0.1);
      CHECK(c.active == 3);
    } else {
      CHECK(c.syncs == 0);
    }
  }
  // The next PM step starts from nothing; phases beyond the step's seconds leave no "other".
  CHECK(forecast.costs().pm_step.syncs == 0);
  forecast.pm_step_begun(0.5 * std::exp(0.05), 0.5 * std::exp(0.1));
  PhaseTimes slow;
  slow.add("p2p", 3.0);
  forecast.sync_point(2.0, SyncPoint{n, true}, 0, slow);
  REQUIRE(forecast.costs().history.size() == 2);
  CHECK(forecast.costs().history[1].end_other == 0);
  CHECK(forecast.costs().history[1].sub_min == 0);   // no sub-step
}

TEST_CASE("RunForecast: global steps of a known cost per ln a are forecast to the end, with the outputs guessed, then measured") {
  // 64 PM steps of 1/32 from ln a = -4 to -2 at 1/16 s each: 2 s per unit ln a, 4 s to a = 1.
  const std::uint64_t n = 4096;
  RunForecast forecast(schedule_of(std::exp(-4.0), {std::exp(-3.0), std::exp(-1.0), 1.0}, 1.0), n,
                       guess_of(false, 3.0, 100.0), 0);
  CHECK(forecast.remaining_seconds(RunState{}) < 0);   // nothing measured yet
  RunState state = global_steps(forecast, -4.0, -2.0, 1.0 / 16, n);
  state.output_index = 1;   // the output at ln a = -3 is written, two to come
  CHECK(forecast.remaining_seconds(state) == doctest::Approx(4.0 + 2 * 3.0).epsilon(1e-9));
  // Outputs measured: their mean from then on (several ranks: no wait for a writer at the end).
  forecast.output_written(5.0);
  forecast.output_written(6.0);
  CHECK(forecast.remaining_seconds(state, 3, 50.0) == doctest::Approx(4.0 + 2 * 5.5).epsilon(1e-9));
  state.output_index = 3;
  CHECK(forecast.remaining_seconds(state) == doctest::Approx(4.0).epsilon(1e-9));
}

TEST_CASE("RunForecast: the energy check's W and the background writer's last output add their measured seconds") {
  // 2 s per unit ln a as above, 64 PM steps to come (as long as the measured ones), W every
  // 10 of them: 6 more; two outputs to come, the last at the end.
  const std::uint64_t n = 4096;
  const OutputSchedule schedule = schedule_of(std::exp(-4.0), {std::exp(-3.0), std::exp(-1.0), 1.0}, 1.0);
  RunForecast forecast(schedule, n, guess_of(true, 0.5, 6.0), 10);
  RunState state = global_steps(forecast, -4.0, -2.0, 1.0 / 16, n);
  state.output_index = 1;
  // One rank: the copies guessed at 0.5 s, the wait at the end for the writer's 6 s.
  CHECK(forecast.remaining_seconds(state) == doctest::Approx(4.0 + 2 * 0.5 + 6.0).epsilon(1e-9));
  CHECK(forecast.remaining_seconds(state, 2, 3.0) == doctest::Approx(4.0 + 2 * 0.5 + 3.0).epsilon(1e-9));
  // W timed at 1 and 2 s: at the two outputs (the last is the end) and 6 times on the way; the
  // writer's wait less the check that runs meanwhile.
  forecast.energy_check_timed(1.0);
  forecast.energy_check_timed(2.0);
  CHECK(forecast.remaining_seconds(state, 2, 3.0) ==
        doctest::Approx(4.0 + 2 * 0.5 + (2 + 6) * 1.5 + (3.0 - 1.5)).epsilon(1e-9));
  CHECK(forecast.remaining_seconds(state, 2, 1.0) == doctest::Approx(4.0 + 2 * 0.5 + (2 + 6) * 1.5).epsilon(1e-9));
  // At the end of a PM step that lands on an output, that output's W is still to come (after
  // the log line); inside a PM step there is none.
  RunState at_output = state;
  at_output.a = std::exp(-1.0);
  const double ended = forecast.remaining_seconds(at_output, 2, 3.0);
  at_output.tick = kPmTicks / 2;
  CHECK(ended - forecast.remaining_seconds(at_output, 2, 3.0) == doctest::Approx(1.5).epsilon(1e-9));
  // A schedule whose end is no output: a check of its own there, and no writer to wait for.
  RunForecast no_end(schedule_of(std::exp(-4.0), {std::exp(-3.0), std::exp(-1.0)}, 1.0), n, guess_of(true, 0.5, 6.0), 0);
  RunState s = global_steps(no_end, -4.0, -2.0, 1.0 / 16, n);
  s.output_index = 1;
  no_end.energy_check_timed(1.0);
  CHECK(no_end.remaining_seconds(s, 2, 3.0) == doctest::Approx(4.0 + 0.5 + (1 + 1) * 1.0).epsilon(1e-9));
}

namespace {

// A 256^3 run in 1 Gpc/h on the host engine (an active particle costs itself: A = f), whose
// sync points cost exactly s0 + e f (f the active fraction), the full step E = s0 + e + its PM.
struct SyntheticRun {
  double fixed = 0.006, work = 0.13, pm = 0.01;
  double full() const { return fixed + work + pm; }
  double step_seconds(const BinForecast& f) const {
    double s = full();
    for (int k = 1; k <= f.deepest; ++k) s += std::ldexp(fixed + work * f.above[static_cast<std::size_t>(k)], k - 1);
    return s;
  }
};

ClusteringInputs inputs_256() {
  const LinearPower power = LinearPower::eisenstein_hu(0.3144, 0.0494, 0.6732, 0.966, 0.812, false);
  return ClusteringInputs::from_power(power, 0.3144, 1000.0, 256, 0.1, 0.3, 0.05);
}

}  // namespace

TEST_CASE("RunForecast: hierarchical steps fed sync point by sync point are forecast to their remaining time") {
  const Cosmology cosmology(CosmologyParams{});
  const double ln_begin = std::log(0.01), ln_end = 0.0, dln = 1.0 / 32;
  const ClusteringForecast clustering(inputs_256(), cosmology, ln_begin, ln_end);
  const auto n = static_cast<std::uint64_t>(clustering.particles());
  const SyntheticRun run;
  RunForecast forecast(schedule_of(0.01, {1.0}, 1.0), n, guess_of(false, 0, 0), 0);
  forecast.expect_clustering(clustering);
  // Each PM step as the forecast's bins have it: 2^(k-1) sub-steps with the bins >= k active
  // (k = 1 .. deepest), then the full step (its phases: the PM, and the short-range work).
  RunState state;
  state.tick = kPmTicks;
  double x = ln_begin;
  for (; x < std::log(0.4) - 1e-12; x += dln) {
    forecast.pm_step_begun(std::exp(x), std::exp(x + dln));
    const BinForecast f = clustering.at(x + 0.5 * dln);
    for (int k = f.deepest; k >= 1; --k) {
      const double active = std::max(1.0, std::round(f.above[static_cast<std::size_t>(k)] * static_cast<double>(n)));
      const double seconds = run.fixed + run.work * active / static_cast<double>(n);
      for (int j = 0; j < (1 << (k - 1)); ++j)
        forecast.sync_point(seconds, SyncPoint{static_cast<std::uint64_t>(active), false}, f.deepest, PhaseTimes{});
    }
    PhaseTimes phases;
    phases.add("pm", run.pm);
    phases.add("p2p", run.work);
    forecast.sync_point(run.full(), SyncPoint{n, true}, f.deepest, phases);
  }
  state.a = std::exp(x);
  REQUIRE(forecast.costs().history.size() > 100);
  double exact = 0;   // the PM steps to come, each as the law prices it
  for (double y = x; y < ln_end - 1e-9; y += dln) {
    const double d = std::min(dln, ln_end - y);
    exact += run.step_seconds(clustering.at(y + 0.5 * d)) * d / dln;
  }
  CHECK(exact > 3 * run.full() * (ln_end - x) / dln);   // far dearer than full steps alone
  CHECK(forecast.remaining_seconds(state) == doctest::Approx(exact).epsilon(2e-3));

  // A restart: the checkpoint's costs keep four numbers a record; given back, the ETA is the
  // recent seconds per force evaluation times the kicks to come (a fallback, not the model).
  MeasuredCosts kept = forecast.costs();
  for (CostRecord& r : kept.history) r = CostRecord{r.ln_a, r.dln_a, r.particle_steps, r.seconds};
  RunForecast restarted(schedule_of(0.01, {1.0}, 1.0), n, guess_of(false, 0, 0), 0);
  restarted.expect_clustering(clustering);
  restarted.restore(kept);
  CHECK(restarted.costs().history.size() == kept.history.size());
  const double eta = restarted.remaining_seconds(state);
  CHECK(eta > 0);
  CHECK(eta == doctest::Approx(exact).epsilon(0.5));
}
