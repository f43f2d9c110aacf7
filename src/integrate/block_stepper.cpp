#include "integrate/block_stepper.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "integrate/time_bins.hpp"

namespace orbis {

BlockStepper::BlockStepper(StepEngine& engine, const StepTimeline& timeline, int max_bin)
    : engine_(engine), timeline_(timeline), max_bin_(engine.has_short_range() ? max_bin : 0) {
  if (max_bin < 0 || max_bin > kDeepestBin) fail("block steps: deepest bin {} outside 0..{}", max_bin, kDeepestBin);
}

BinRule BlockStepper::bin_rule(const RunState& state, int min_active_bin) const {
  BinRule rule;
  rule.min_active_bin = min_active_bin;
  rule.max_bin = std::max(max_bin_, min_active_bin);
  if (max_bin_ > 0) rule.acc_bin0 = timeline_.bin0_acceleration(state.a, state.pm_a_begin, state.pm_a_end);
  return rule;
}

// The half kicks at `tick` of the bins from min_active_bin to the deepest populated one:
// opening (tick .. tick + half the bin's step) or closing (tick - half the step .. tick), and
// the PM step's long-range half kick when `long_range` (tick 0 opening, kPmTicks closing).
KickPlan BlockStepper::kicks(const RunState& s, std::uint64_t tick, int min_active_bin, bool opening,
                             bool long_range) const {
  KickPlan plan;
  plan.min_active_bin = min_active_bin;
  const double x = timeline_.at(s.pm_a_begin, s.pm_a_end, tick);
  const int deepest = deepest_bin(s.bins);
  for (int k = min_active_bin; k <= deepest; ++k) {
    const double other = timeline_.at(s.pm_a_begin, s.pm_a_end, opening ? tick + bin_ticks(k) / 2 : tick - bin_ticks(k) / 2);
    plan.short_range[k] = opening ? timeline_.kick_factor(x, other, x) : timeline_.kick_factor(other, x, x);
  }
  if (long_range) {
    const double mid = pm_middle(s);
    plan.long_range = opening ? timeline_.kick_factor(s.pm_a_begin, mid, x) : timeline_.kick_factor(mid, s.pm_a_end, x);
  }
  return plan;
}

double BlockStepper::pm_middle(const RunState& s) const { return timeline_.at(s.pm_a_begin, s.pm_a_end, kPmTicks / 2); }

void BlockStepper::begin_pm_step(RunState& s, double end) const {
  if (s.tick != kPmTicks && s.pm_steps > 0) fail("internal: a PM step begun before the last one ended");
  s.pm_a_begin = s.a;
  s.pm_a_end = end;
  s.tick = 0;
  ++s.pm_steps;
  s.bins = engine_.assign_bins(bin_rule(s, 0));
  engine_.kick(kicks(s, 0, 0, true, true));
}

SyncPoint BlockStepper::sync_step(RunState& s, ForceStats& stats) const {
  if (s.tick >= kPmTicks) fail("internal: a sync point outside a PM step");
  SyncPoint out;
  const std::uint64_t next = next_sync_tick(s.tick, s.bins);
  out.pm_end = next == kPmTicks;
  const int min_active = first_active_bin(next);
  out.active = active_particles(next, s.bins);
  const double x = timeline_.at(s.pm_a_begin, s.pm_a_end, next);
  {
    ScopedPhase phase(stats.times, "kdk");
    engine_.drift(timeline_.drift_factor(s.a, x, pm_middle(s)));
  }
  engine_.compute_forces(out.pm_end, min_active, stats);
  ScopedPhase phase(stats.times, "kdk");
  engine_.kick(kicks(s, next, min_active, false, out.pm_end));
  s.tick = next;
  s.a = x;
  ++s.steps;
  s.particle_steps += static_cast<double>(out.active);
  if (!out.pm_end) {
    s.bins = engine_.assign_bins(bin_rule(s, min_active));
    engine_.kick(kicks(s, next, min_active, true, false));
  }
  return out;
}

}  // namespace orbis
