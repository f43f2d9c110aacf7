// The run loop's clock: what a run's time line is beside the kicks and drifts of its block
// steps (StepTimeline, block_stepper.hpp). RunState::a holds the clock's variable: the scale
// factor of a cosmological run (CosmicTimeline, timestep.hpp: the exact drift and kick
// integrals, p = a^2 dx/dt), the time t of an isolated system (NewtonianClock,
// newtonian_clock.hpp: drift = kick = dt, p = dx/dt). The run loop asks the clock, never the
// cosmology, so one loop serves both.
#pragma once
#include <string>

#include "integrate/block_stepper.hpp"

namespace orbis {

class StepEngine;

class RunClock : public StepTimeline {
 public:
  // True for a's comoving time line (the snapshots' GADGET ComovingIntegrationOn).
  virtual bool comoving() const = 0;
  // The end of the PM step (bin 0's step) that begins at `now`, every particle synchronised
  // with current forces, on its way to `target` (the next output or the run's end, which it
  // lands on exactly with steps evened out): hierarchical steps take the PM step's own
  // criterion (each particle's sets its bin); a global step also the most accelerated
  // particle's (engine.max_acceleration()).
  virtual double next_pm_end(double now, double target, StepEngine& engine, bool hierarchical) const = 0;
  // The fraction of the run [begin, end] done at `now` (the progress bar).
  virtual double progress(double now, double begin, double end) const = 0;
  // `now` for the log: "a = 0.5 (z = 1.0000)", "t = 1.5".
  virtual std::string describe(double now) const = 0;
};

}  // namespace orbis
