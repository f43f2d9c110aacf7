// The step criteria of a run, in ln a (docs/design.md, "Time stepping"):
// - the per-particle criterion dt_i <= eta sqrt(eps_phys / |g_phys|) = eta sqrt(eps a^3 / |g_i|)
//   in physical time (eps comoving, so eps_phys = eps a; g comoving, so g_phys = g / a^2),
//   d ln a = H dt. Hierarchical steps put each particle in the bin it needs; a global step
//   takes the most accelerated particle's. (GADGET's dt = sqrt(2 eta_G eps / |a|) is this
//   with eta = sqrt(2 eta_G): eta_G = 0.025 is eta = 0.22.)
// - the PM step (hierarchical): d ln a <= f min(r_s, mean spacing) a^2 H / p_rms, the rms
//   particle moving by at most f of the long-range force's scale (GADGET's
//   MaxRMSDisplacementFac; dx/d ln a = p / (a^2 H));
// - both capped by time.max_dln_a.
// Steps are evened out so that they land exactly on the next output instead of leaving a sliver.
#pragma once
#include <cstdint>

#include "integrate/run_clock.hpp"

namespace orbis {

class Cosmology;

struct StepLimits {
  double max_dln_a = 0.075;
  double eta = 0.25;                // 0: no per-particle criterion
  double softening = 0;             // comoving Mpc/h; 0: no per-particle criterion
  double pm_rms_displacement = 0;   // f; 0: no PM-step criterion
  double pm_length = 0;             // min(r_s, mean spacing), comoving Mpc/h
  bool growth_weighted_kicks = true;   // kicks weigh the force by D(a) / D(a_force) (timestep.cpp)
  bool growth_weighted_drifts = true;  // drifts weigh the momentum by G(a) / G(a_momentum) (timestep.cpp)
};

// A global step: the ln-a step the criteria allow at scale factor a, given the largest |g| of
// any particle.
double allowed_dln_a(const StepLimits& limits, const Cosmology& cosmology, double a, double max_acc);
// The PM step of hierarchical steps at scale factor a, given the rms momentum p_rms (km/s).
double pm_step_dln_a(const StepLimits& limits, const Cosmology& cosmology, double a, double p_rms);
// The end of the next step from a towards `target`, with steps of at most dln_a, all equal.
double next_scale_factor(double a, double target, double dln_a);

// The clock of a cosmological run (run_clock.hpp): the scale factor (ln a linear in the
// ticks), the exact kick and drift integrals, the per-particle criterion above, and the PM
// step's (pm_step_dln_a) or a global step's (allowed_dln_a) length.
class CosmicTimeline final : public RunClock {
 public:
  CosmicTimeline(const Cosmology& cosmology, const StepLimits& limits) : cosmology_(cosmology), limits_(limits) {}
  double at(double begin, double end, std::uint64_t tick) const override;
  double drift_factor(double from, double to, double momentum_at) const override;
  double kick_factor(double from, double to, double force_at) const override;
  double bin0_acceleration(double a, double begin, double end) const override;
  bool comoving() const override { return true; }
  double next_pm_end(double a, double target, StepEngine& engine, bool hierarchical) const override;
  double progress(double a, double begin, double end) const override;
  std::string describe(double a) const override;

 private:
  const Cosmology& cosmology_;
  StepLimits limits_;
};

}  // namespace orbis
