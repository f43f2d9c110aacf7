// The clock of an isolated system ([gravity] boundary = "vacuum"): Newtonian time t in the
// run's units, no expansion. The variable is t itself (linear in the ticks of a PM step),
// the momentum p = dx/dt, drift x += p dt and kick p += g dt (the plain KDK leapfrog), and
// the per-particle criterion dt_i <= eta sqrt(eps / |g_i|) (GADGET's, as the cosmic clock's
// with a = 1). There is no PM step: bin 0's step is [time] max_dt (hierarchical), or for a
// global step the most accelerated particle's criterion capped by max_dt.
#pragma once
#include "integrate/run_clock.hpp"

namespace orbis {

struct NewtonianLimits {
  double max_dt = 0;      // the largest step, > 0
  double eta = 0;         // 0: no per-particle criterion
  double softening = 0;   // eps, length unit; 0: no per-particle criterion
};

class NewtonianClock final : public RunClock {
 public:
  explicit NewtonianClock(const NewtonianLimits& limits);
  double at(double begin, double end, std::uint64_t tick) const override;
  double drift_factor(double from, double to, double) const override { return to - from; }
  double kick_factor(double from, double to, double) const override { return to - from; }
  double bin0_acceleration(double now, double begin, double end) const override;
  bool comoving() const override { return false; }
  double next_pm_end(double now, double target, StepEngine& engine, bool hierarchical) const override;
  double progress(double now, double begin, double end) const override;
  std::string describe(double now) const override;

 private:
  NewtonianLimits limits_;
};

}  // namespace orbis
