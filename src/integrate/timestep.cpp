#include "integrate/timestep.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "cosmology/cosmology.hpp"
#include "integrate/step_engine.hpp"
#include "integrate/time_bins.hpp"

namespace orbis {

double allowed_dln_a(const StepLimits& limits, const Cosmology& cosmology, double a, double max_acc) {
  double dln = limits.max_dln_a;
  if (limits.eta > 0 && limits.softening > 0 && max_acc > 0) {
    const double dt = limits.eta * std::sqrt(limits.softening * a * a * a / max_acc);
    dln = std::min(dln, cosmology.hubble(a) * dt);   // d ln a = H dt
  }
  return dln;
}

double pm_step_dln_a(const StepLimits& limits, const Cosmology& cosmology, double a, double p_rms) {
  double dln = limits.max_dln_a;
  if (limits.pm_rms_displacement > 0 && limits.pm_length > 0 && p_rms > 0)
    dln = std::min(dln, limits.pm_rms_displacement * limits.pm_length * a * a * cosmology.hubble(a) / p_rms);
  return dln;
}

double next_scale_factor(double a, double target, double dln_a) {
  const double remaining = std::log(target / a);
  if (remaining <= dln_a * (1 + 1e-12)) return target;
  const double steps = std::ceil(remaining / dln_a - 1e-9);
  return a * std::exp(remaining / steps);
}

double CosmicTimeline::at(double begin, double end, std::uint64_t tick) const {
  return scale_factor_at(begin, end, tick);
}

// A drift holds the momentum fixed; with growth_weighted_drifts it lets it grow as the linear
// mode's momentum, p = a^3 H dD/da psi, from the middle of the PM step, where the long-range
// half kicks leave it (FastPM's drift). With the weighted kicks the growing mode then moves
// exactly for any PM step, and the linear-regime error of large steps goes (max_dln_a 0.1:
// docs/force_split.md). The pieces of a PM step's drifts add up to its whole drift; for a
// particle on a short bin the weight is 1 + O(PM step) with first-order terms that cancel
// over the PM step, so the scheme stays second order.
double CosmicTimeline::drift_factor(double from, double to, double momentum_at) const {
  return limits_.growth_weighted_drifts ? cosmology_.growth_weighted_drift_factor(from, to, momentum_at)
                                        : cosmology_.drift_factor(from, to);
}

// A kick holds the force of its sync point; with growth_weighted_kicks it lets it grow as the
// linear growth D(a) across the kick, as the force of every linear mode does. The growing
// mode is then kicked exactly whatever the step, and the KDK's linear growth error left is
// the drift's (a 1-mode model from z = 99 with steps of 0.05 in ln a: P(k) 0.14% low with the
// force held, 0.013% weighted; measured at 128^3 in docs/force_split.md). For a force that
// does not grow so (inside haloes) the closing and opening half kicks around a sync point
// take weights below and above 1 whose first-order terms cancel: the scheme stays second order.
double CosmicTimeline::kick_factor(double from, double to, double force_at) const {
  return limits_.growth_weighted_kicks ? cosmology_.growth_weighted_kick_factor(from, to, force_at)
                                       : cosmology_.kick_factor(from, to);
}

// eta sqrt(eps a^3 / |g|) H >= dln_pm  <=>  |g| <= eps a^3 (eta H / dln_pm)^2.
double CosmicTimeline::bin0_acceleration(double a, double begin, double end) const {
  if (!(limits_.eta > 0 && limits_.softening > 0)) return HUGE_VAL;
  const double x = limits_.eta * cosmology_.hubble(a) / std::log(end / begin);
  return limits_.softening * a * a * a * x * x;
}

double CosmicTimeline::next_pm_end(double a, double target, StepEngine& engine, bool hierarchical) const {
  const double dln = hierarchical ? pm_step_dln_a(limits_, cosmology_, a, engine.rms_momentum())
                                  : allowed_dln_a(limits_, cosmology_, a, engine.max_acceleration());
  return next_scale_factor(a, target, dln);
}

double CosmicTimeline::progress(double a, double begin, double end) const {
  return std::log(a / begin) / std::log(end / begin);
}

std::string CosmicTimeline::describe(double a) const { return fmt::format("a = {:.6g} (z = {:.4f})", a, 1 / a - 1); }

}  // namespace orbis
