// The step log's ETA as one object: the run loop feeds it what each sync point cost and tells
// it when a PM step begins, an output holds the steps and the energy check evaluates W; it
// keeps all it measured and answers the wall seconds until the run ends. The model that turns
// those measurements into seconds is cost_model.hpp; this object only collects them and puts
// the model's inputs together. Nothing it does changes the run.
//
// It measures a run's progress in ln of the time line's variable (RunState::a: the scale
// factor), from the output schedule's a_begin to its a_end.
#pragma once
#include <cstdint>

#include "integrate/cost_model.hpp"
#include "integrate/output_schedule.hpp"

namespace orbis {

class Cosmology;
class LinearPower;
class Params;
class PhaseTimes;
class StepEngine;
struct RunState;
struct SyncPoint;

// What an output costs the run before one has been measured.
struct OutputGuess {
  // One rank: the steps wait only for the copy that the background writer takes
  // (integrate/outputs.hpp), and the run's end for the writer's last output. Several ranks
  // write in the steps.
  bool background = true;
  double in_steps = 0;   // wall seconds an output holds the steps
  double writer = 0;     // the background writer's wall seconds for one output

  // Guessed from the output's size: on one rank the snapshot's particle bytes at 2 GB/s (a
  // download and a host copy; guessing the files' seconds there put the ETA 20-30 s over on a
  // 256^3 run whose outputs took 0.6-0.9 s each in the step loop); the files at 1 GB/s plus
  // 0.015 us per particle (the P(k) and FoF groups come from the GPU or the PM's threads; at
  // 256^3 on an H200 machine the writer took 0.8-1.0 s an output on one rank and a snapshot
  // over 2 ranks 1.1-1.3 s: the guess is 1.2 s; 200 MB/s and 0.15 us, when the host made
  // P(k) and FoF, put it at 7.7 s and the ETA 50% over for the run's first tenth), which is
  // what the steps wait for on several ranks and the writer takes on one.
  static OutputGuess for_run(const Params& params, std::uint64_t particles, int ranks);
};

class RunForecast {
 public:
  RunForecast() = default;
  // A run of `particles` (every rank's) over the schedule's span, writing its outputs; the
  // energy check's W (integrate/energy.hpp) at the outputs, at the end and every
  // `energy_check_every` PM steps (0: only there), once it has been timed.
  RunForecast(const OutputSchedule& schedule, std::uint64_t particles, const OutputGuess& guess,
              std::int64_t energy_check_every);

  // Hierarchical steps: how the time bins will deepen (clustering_forecast). Without it (global
  // steps, or no P(k)) the ETA follows the trend of the measured cost.
  void expect_clustering(ClusteringForecast clustering) { clustering_ = std::move(clustering); }

  // What it measured, which a checkpoint keeps; a restart gives it back.
  const MeasuredCosts& costs() const { return costs_; }
  void restore(MeasuredCosts costs) { costs_ = std::move(costs); }

  // A PM step from scale factor a to a_end begins.
  void pm_step_begun(double a, double a_end);
  // A sync point took `seconds` of wall time (the step alone: no output), computed the forces
  // of sync.active particles (all of them where sync.pm_end), left `deepest_bin` the deepest
  // populated time bin, and spent `phases` (the engine's: pm, tree, walk, m2l, p2p, ...).
  void sync_point(double seconds, const SyncPoint& sync, int deepest_bin, const PhaseTimes& phases);
  // An output held the steps for `seconds` (on one rank: the background writer's copy).
  void output_written(double seconds);
  // The energy check evaluated W in `seconds`.
  void energy_check_timed(double seconds);

  // The wall seconds from the sync point `state` is at to the run's end; negative while no PM
  // step has been measured. `writer_outputs`, `writer_seconds`: the outputs that the background
  // writer has finished so far and their mean wall seconds (one rank; BackgroundOutputs).
  double remaining_seconds(const RunState& state, int writer_outputs = 0, double writer_seconds = 0) const;

 private:
  OutputSchedule schedule_;
  std::uint64_t particles_ = 0;
  OutputGuess guess_;
  std::int64_t energy_check_every_ = 0;
  ClusteringForecast clustering_;
  MeasuredCosts costs_;
  double output_seconds_ = 0;   // the outputs' seconds in the steps, and their count
  int outputs_timed_ = 0;
  double energy_seconds_ = 0;   // the energy check's W evaluations, and their count
  int energy_timed_ = 0;
};

// The forecast of how the time bins of the run of `params` deepen (cost_model.hpp), over the
// schedule's span, from the P(k) of its ICs: `ic_power` when the run made them, else that of
// [ic] (a run from an IC file or a checkpoint). Where that cannot be had (a power file that is
// gone) it is empty, and the ETA falls back on the measured trend rather than stopping a run
// that needs no P(k). `engine`: its softening, and whether it computes whole leaves (then an
// active particle costs a leaf of this rank's tree, of the particles over `ranks`). Logs the
// forecast's inputs, or why there is none.
ClusteringForecast clustering_forecast(const Params& params, const Cosmology& cosmology, const OutputSchedule& schedule,
                                       const StepEngine& engine, int ranks, const LinearPower* ic_power);

}  // namespace orbis
