// Everything the run loop carries from one step to the next, besides the particles (which the
// step engine holds, time bins included): one plain struct, so that a checkpoint can save it
// and a restart continue bitwise where the run stopped. (The ETA's measurements, which a
// checkpoint keeps too, are the forecast's: integrate/run_forecast.hpp.)
#pragma once
#include <cstdint>

#include "integrate/step_engine.hpp"
#include "integrate/time_bins.hpp"

namespace orbis {

// The Layzer-Irvine energy budget (integrate/energy.hpp), comoving code units: what it
// started at and the running integral of K da over the ends of the PM steps so far.
struct EnergyBudget {
  std::uint64_t started = 0;   // 1 once it has (not a bool: checkpoints store these bytes, no padding)
  double a_start = 0;      // where the budget starts (the run's start, or the restart that turned it on)
  double ak_start = 0;     // a K and a W there
  double aw_start = 0;
  double a_last = 0;       // the last end of a PM step, and K there
  double k_last = 0;
  double k_integral = 0;   // int K da from a_start to a_last (trapezoids between PM-step ends)
};

struct RunState {
  double a = 0;                          // scale factor now (a sync point)
  double pm_a_begin = 0, pm_a_end = 0;   // the PM step in progress: a = scale_factor_at(.., tick)
  std::uint64_t tick = kPmTicks;         // position in it; kPmTicks: ended, the next not begun
  BinCounts bins{};                      // particles per time bin
  std::int64_t steps = 0;                // sync points (force computations) since the start
  std::int64_t pm_steps = 0;             // PM steps begun
  double particle_steps = 0;             // force evaluations since the start
  int output_index = 0;                  // number of the next output (snapshot_NNN)
  double seconds = 0;                    // wall seconds spent in steps (outputs not included)
  EnergyBudget energy;                   // the Layzer-Irvine check's
};

}  // namespace orbis
