// Kick-drift-kick with power-of-two time bins (the scheme of GADGET-4, PKDGRAV3 and SWIFT) over
// a StepEngine, for any time line: the run's (the scale factor, with the exact cosmological
// kick and drift integrals) or a Newtonian one (tests against analytic orbits).
//
// A PM step begins with every particle synchronised: each gets a bin from the criterion
// (bin k: short-range steps of 2^-k of the PM step), the long-range half kick of the PM step
// and the first half kick of its bin's step. Then, sync point by sync point (the next tick at
// which a populated bin's step ends): every particle drifts there; the particles whose steps
// end there (bins >= the coarsest such bin) get their short-range forces (at the PM step's
// end every particle, with the long-range force too) and the second half kick of their step;
// inside the PM step they then get new bins (a finer bin at any sync point, a coarser one
// only where that bin's steps also end: never above the coarsest active bin) and the first
// half kick of the new step. At the PM step's end every particle is synchronised again.
#pragma once
#include <cstdint>

#include "integrate/run_state.hpp"
#include "integrate/step_engine.hpp"

namespace orbis {

// The time line: the variable the steps are measured in (RunState::a, pm_a_begin, pm_a_end
// hold it: the scale factor for a run), the kick and drift factors between two of its values,
// and the step criterion's bin-0 threshold.
class StepTimeline {
 public:
  virtual ~StepTimeline() = default;
  // Its value at `tick` of the PM step [begin, end] (time_bins.hpp: exact at the ends).
  virtual double at(double begin, double end, std::uint64_t tick) const = 0;
  // x += p * drift_factor for a momentum p that stands for `momentum_at` (the PM step's middle,
  // where its long-range half kicks meet).
  virtual double drift_factor(double from, double to, double momentum_at) const = 0;
  // p += g * kick_factor for a force g computed at `force_at` (one of from and to).
  virtual double kick_factor(double from, double to, double force_at) const = 0;
  // BinRule::acc_bin0 at `now` for the PM step [begin, end]: the |g| up to which that whole
  // step is short enough for a particle (infinite: no criterion).
  virtual double bin0_acceleration(double now, double begin, double end) const = 0;
};

// What one sync point did.
struct SyncPoint {
  std::uint64_t active = 0;   // particles whose forces were computed
  bool pm_end = false;        // the PM step ended there (every particle synchronised)
};

class BlockStepper {
 public:
  // max_bin: the deepest bin allowed (0: one global step, every particle in bin 0).
  BlockStepper(StepEngine& engine, const StepTimeline& timeline, int max_bin);

  // Begins a PM step from state.a (every particle synchronised, forces current) to `end`.
  void begin_pm_step(RunState& state, double end) const;
  // The next sync point of the PM step in progress (state.tick < kPmTicks); the force
  // computation's costs go to `stats`.
  SyncPoint sync_step(RunState& state, ForceStats& stats) const;

 private:
  BinRule bin_rule(const RunState& state, int min_active_bin) const;
  KickPlan kicks(const RunState& state, std::uint64_t tick, int min_active_bin, bool opening, bool long_range) const;
  // The PM step's middle: where its long-range half kicks meet, so the time its particles'
  // momenta stand for between them (the drifts' momentum_at).
  double pm_middle(const RunState& state) const;

  StepEngine& engine_;
  const StepTimeline& timeline_;
  int max_bin_;
};

}  // namespace orbis
