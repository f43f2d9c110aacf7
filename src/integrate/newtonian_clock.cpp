#include "integrate/newtonian_clock.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"
#include "integrate/step_engine.hpp"
#include "integrate/time_bins.hpp"

namespace orbis {

NewtonianClock::NewtonianClock(const NewtonianLimits& limits) : limits_(limits) {
  if (!(limits.max_dt > 0)) fail("internal: Newtonian clock with max_dt = {}", limits.max_dt);
}

// Linear in the ticks, exact at both ends.
double NewtonianClock::at(double begin, double end, std::uint64_t tick) const {
  if (tick == 0) return begin;
  if (tick >= kPmTicks) return end;
  return begin + (end - begin) * (static_cast<double>(tick) / static_cast<double>(kPmTicks));
}

// eta sqrt(eps / |g|) >= end - begin  <=>  |g| <= eps (eta / (end - begin))^2.
double NewtonianClock::bin0_acceleration(double, double begin, double end) const {
  if (!(limits_.eta > 0 && limits_.softening > 0)) return HUGE_VAL;
  const double x = limits_.eta / (end - begin);
  return limits_.softening * x * x;
}

double NewtonianClock::next_pm_end(double now, double target, StepEngine& engine, bool hierarchical) const {
  double dt = limits_.max_dt;
  if (!hierarchical && limits_.eta > 0 && limits_.softening > 0) {
    const double g = engine.max_acceleration();
    if (g > 0) dt = std::min(dt, limits_.eta * std::sqrt(limits_.softening / g));
  }
  const double remaining = target - now;
  if (remaining <= dt * (1 + 1e-12)) return target;
  const double steps = std::ceil(remaining / dt - 1e-9);
  return now + remaining / steps;
}

double NewtonianClock::progress(double now, double begin, double end) const {
  return end > begin ? (now - begin) / (end - begin) : 1.0;
}

std::string NewtonianClock::describe(double now) const { return fmt::format("t = {:.6g}", now); }

}  // namespace orbis
