// Everything the run loop carries from one step to the next, besides the particles (which the
// step engine holds, time bins included): one plain struct, so that a checkpoint can save it
// and a restart continue bitwise where the run stopped.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "integrate/step_engine.hpp"
#include "integrate/time_bins.hpp"

namespace orbis {

// The sub-steps (sync points before a PM step's end) whose active fraction f = active / N
// lies in [2^-(b+1), 2^-b), summed: the ETA prices a sync point by its f (cost_model.hpp).
struct SubStepCost {
  double syncs = 0, seconds = 0, active = 0;
};
constexpr int kSubStepBuckets = 48;   // f >= 2^-48: any particle count a run can hold

// The measured cost of one completed PM step (the ETA's history).
struct CostRecord {
  double ln_a = 0;            // ln a at the step's start
  double dln_a = 0;           // its length in ln a
  double particle_steps = 0;  // force evaluations in it (active particles summed over sync points)
  double seconds = 0;         // wall seconds of its sync points (outputs not included)
  // Not in checkpoints (which keep the four above; a restarted run's older records have 0):
  double syncs = 0;           // its sync points
  double deepest = 0;         // the deepest bin populated at any of them
  double end_seconds = 0;     // the seconds of its last sync point (every particle active), of which
  double end_pm = 0;          //   the long-range (PM) phase
  double end_other = 0;       //   and what no phase that follows the active particles or the tree
                              //   holds (the drift and kicks of every particle, the host's waits)
  double sub_min = 0;         // the cheapest sub-step's seconds (0: none)
  std::array<SubStepCost, kSubStepBuckets> sub{};
};

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
  CostRecord pm_cost;                    // the PM step in progress, so far
  std::vector<CostRecord> cost_history;  // the completed PM steps
  EnergyBudget energy;                   // the Layzer-Irvine check's
};

}  // namespace orbis
