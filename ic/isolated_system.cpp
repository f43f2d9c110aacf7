#include "ic/isolated_system.hpp"

#include <algorithm>
#include <cmath>

namespace orbis {

Vec3d UniformDeviates::direction() {
  const double cos_theta = 2 * (*this)() - 1;
  const double phi = 2 * 3.14159265358979323846 * (*this)();
  const double sin_theta = std::sqrt(std::max(0.0, 1 - cos_theta * cos_theta));
  return {sin_theta * std::cos(phi), sin_theta * std::sin(phi), cos_theta};
}

namespace {
// The plain mean with one mass (the generators' spheres, bit for bit as before masses existed),
// else the mass-weighted one.
Vec3d mean_of(const std::vector<Vec3d>& v, const IsolatedSystem& system) {
  Vec3d sum{0, 0, 0};
  if (system.masses.empty()) {
    for (const Vec3d& x : v) sum += x;
    return v.empty() ? sum : sum * (1.0 / static_cast<double>(v.size()));
  }
  for (std::size_t i = 0; i < v.size(); ++i) sum += v[i] * system.masses[i];
  return v.empty() ? sum : sum * (1.0 / system.total_mass());
}
}  // namespace

Vec3d centre_of_mass(const IsolatedSystem& system) { return mean_of(system.pos, system); }
Vec3d centre_of_mass_velocity(const IsolatedSystem& system) { return mean_of(system.vel, system); }

void to_centre_of_mass_frame(IsolatedSystem& system) {
  const Vec3d x0 = centre_of_mass(system), v0 = centre_of_mass_velocity(system);
  for (Vec3d& x : system.pos) x -= x0;
  for (Vec3d& v : system.vel) v -= v0;
}

}  // namespace orbis
