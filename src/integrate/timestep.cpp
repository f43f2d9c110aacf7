#include "integrate/timestep.hpp"

#include <algorithm>
#include <cmath>

#include "cosmology/cosmology.hpp"

namespace orbis {

double allowed_dln_a(const StepLimits& limits, const Cosmology& cosmology, double a, double max_acc) {
  double dln = limits.max_dln_a;
  if (limits.eta > 0 && limits.softening > 0 && max_acc > 0) {
    const double dt = limits.eta * std::sqrt(limits.softening * a * a * a / max_acc);
    dln = std::min(dln, cosmology.hubble(a) * dt);   // d ln a = H dt
  }
  return dln;
}

double next_scale_factor(double a, double target, double dln_a) {
  const double remaining = std::log(target / a);
  if (remaining <= dln_a * (1 + 1e-12)) return target;
  const double steps = std::ceil(remaining / dln_a - 1e-9);
  return a * std::exp(remaining / steps);
}

}  // namespace orbis
