#include "integrate/run_forecast.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "core/timer.hpp"
#include "cosmology/cosmology.hpp"
#include "cosmology/linear_power.hpp"
#include "integrate/block_stepper.hpp"
#include "integrate/outputs.hpp"
#include "integrate/run_state.hpp"
#include "integrate/step_engine.hpp"

namespace orbis {

OutputGuess OutputGuess::for_run(const Params& params, std::uint64_t particles, int ranks) {
  const double n = static_cast<double>(particles);
  OutputGuess guess;
  guess.background = ranks == 1;
  guess.writer = output_file_bytes(params, particles) / 1e9 + 1.5e-8 * n;
  guess.in_steps = guess.background ? n * particle_record_bytes(params) / 2e9 : guess.writer;
  return guess;
}

RunForecast::RunForecast(const OutputSchedule& schedule, std::uint64_t particles, const OutputGuess& guess,
                         std::int64_t energy_check_every)
    : schedule_(schedule), particles_(particles), guess_(guess), energy_check_every_(energy_check_every) {}

void RunForecast::pm_step_begun(double a, double a_end) {
  costs_.pm_step = CostRecord{std::log(a), std::log(a_end / a), 0, 0};
}

void RunForecast::sync_point(double seconds, const SyncPoint& sync, int deepest_bin, const PhaseTimes& phases) {
  CostRecord& step = costs_.pm_step;
  step.particle_steps += static_cast<double>(sync.active);
  step.seconds += seconds;
  step.syncs += 1;
  step.deepest = std::max(step.deepest, static_cast<double>(deepest_bin));
  if (sync.pm_end) {
    // The full step: its PM phase, and what none of the phases that follow the active
    // particles or the tree holds (cost_model.hpp's s0 before any sub-step is measured).
    step.end_seconds = seconds;
    step.end_pm = phases.get("pm");
    double follows = 0;
    for (const char* phase : {"p2p", "walk", "m2l", "pm", "tree"}) follows += phases.get(phase);
    step.end_other = std::max(0.0, seconds - follows);
    costs_.history.push_back(step);
    step = CostRecord{};
    return;
  }
  // A sub-step, into the bucket of its active fraction f: [2^-(b+1), 2^-b).
  const double f = static_cast<double>(sync.active) / static_cast<double>(std::max<std::uint64_t>(1, particles_));
  const int b = f > 0 ? std::clamp(static_cast<int>(std::floor(-std::log2(f))), 0, kSubStepBuckets - 1)
                      : kSubStepBuckets - 1;
  SubStepCost& bucket = step.sub[static_cast<std::size_t>(b)];
  bucket.syncs += 1, bucket.seconds += seconds, bucket.active += static_cast<double>(sync.active);
  if (step.sub_min == 0 || seconds < step.sub_min) step.sub_min = seconds;
}

void RunForecast::output_written(double seconds) {
  output_seconds_ += seconds;
  ++outputs_timed_;
}

void RunForecast::energy_check_timed(double seconds) {
  energy_seconds_ += seconds;
  ++energy_timed_;
}

double RunForecast::remaining_seconds(const RunState& state, int writer_outputs, double writer_seconds) const {
  const double a = state.a;
  const bool at_end = a >= schedule_.a_end * (1 - 1e-12);
  const bool end_output = schedule_.is_output(schedule_.a_end);
  OutputCost outputs;
  outputs.remaining = static_cast<int>(schedule_.a_outputs.size()) - state.output_index;
  outputs.seconds_each = outputs_timed_ > 0 ? output_seconds_ / outputs_timed_ : guess_.in_steps;
  // The energy check's W, once timed, at the outputs still to come and at the end (one check
  // where the end is an output), at this sync point's own (it runs after the log line, at a
  // PM step's end that is an output or the end), and every energy_check_every PM steps.
  if (energy_timed_ > 0) {
    const bool here = state.tick == kPmTicks && (schedule_.is_output(a) || at_end);
    outputs.checks = outputs.remaining + (end_output || at_end ? 0 : 1) + (here ? 1 : 0);
    outputs.check_every = energy_check_every_;
    outputs.check_seconds = energy_seconds_ / energy_timed_;
  }
  // On one rank the run ends waiting for the background writer's output at the end, which
  // begins after its copy, less the energy check that runs meanwhile.
  if (guess_.background && end_output) {
    const double writer = writer_outputs > 0 ? writer_seconds : guess_.writer;
    outputs.final_wait = std::max(0.0, writer - outputs.check_seconds);
  }
  const double ln_a_end = std::log(schedule_.a_end);
  return !clustering_.empty() ? forecast_remaining_seconds(costs_.history, a, clustering_, ln_a_end, outputs)
                              : predicted_remaining_seconds(costs_.history, a, ln_a_end, outputs);
}

ClusteringForecast clustering_forecast(const Params& params, const Cosmology& cosmology, const OutputSchedule& schedule,
                                       const StepEngine& engine, int ranks, const LinearPower* ic_power) {
  std::optional<LinearPower> own;
  if (!ic_power) {
    try {
      own = LinearPower::from_params(params);
    } catch (const Error& e) {
      log::info("ETA: the measured trend of the step costs (no forecast without the linear P(k): {})", e.what());
      return {};
    }
  }
  const double side = static_cast<double>(params.get_int("box.particles_per_side"));
  ClusteringInputs inputs =
      ClusteringInputs::from_power(ic_power ? *ic_power : *own, cosmology.params().omega_m, params.get_real("box.size_mpc_h"),
                                   side, engine.softening(), params.get_real("time.eta"), params.get_real("time.max_dln_a"));
  // An engine that computes whole leaves prices an active particle at a leaf of this rank's tree.
  if (engine.computes_whole_leaves())
    inputs.work_particles =
        leaf_particles(side * side * side / ranks, static_cast<int>(params.get_int("gravity.max_leaf")));
  ClusteringForecast forecast(inputs, cosmology, std::log(schedule.a_begin), std::log(schedule.a_end));
  log::info("{}", inputs.describe());
  return forecast;
}

}  // namespace orbis
