#include "ic/parabolic_orbit.hpp"

#include <cmath>

#include "core/error.hpp"

namespace orbis {

IsolatedSystem place_on_parabolic_orbit(const IsolatedSystem& a, const IsolatedSystem& b,
                                        const ParabolicEncounter& o) {
  if (a.size() == 0 || b.size() == 0) fail("parabolic orbit: both systems need particles ({} and {})", a.size(), b.size());
  if (!(o.separation > 0) || !(o.pericentre > 0) || !(o.pericentre <= o.separation) || !(o.g > 0))
    fail("parabolic orbit: separation {} and pericentre {} must satisfy 0 < pericentre <= separation, G = {} > 0",
         o.separation, o.pericentre, o.g);
  const double ma = a.total_mass(), mb = b.total_mass(), m = ma + mb;
  const double mu = o.g * m;
  const double d = o.separation;
  const double cos_f = 2 * o.pericentre / d - 1;
  const double sin_f = -std::sqrt(std::fmax(0.0, 1 - cos_f * cos_f));   // before pericentre: approaching
  const Vec3d r_rel{d * cos_f, d * sin_f, 0};                             // x_b - x_a
  const double v_scale = std::sqrt(mu / (2 * o.pericentre));             // sqrt(mu / p), p = 2 r_p
  const Vec3d v_rel{-v_scale * sin_f, v_scale * (1 + cos_f), 0};
  const Vec3d xa = r_rel * (-mb / m), xb = r_rel * (ma / m);
  const Vec3d va = v_rel * (-mb / m), vb = v_rel * (ma / m);
  IsolatedSystem out;
  const bool one_mass = a.masses.empty() && b.masses.empty() && a.particle_mass == b.particle_mass;
  out.particle_mass = one_mass ? a.particle_mass : m / static_cast<double>(a.size() + b.size());
  if (!one_mass) {
    out.masses.reserve(a.size() + b.size());
    for (std::size_t i = 0; i < a.size(); ++i) out.masses.push_back(a.mass_of(i));
    for (std::size_t i = 0; i < b.size(); ++i) out.masses.push_back(b.mass_of(i));
  }
  out.pos.reserve(a.size() + b.size());
  out.vel.reserve(a.size() + b.size());
  const Vec3d ca = centre_of_mass(a), cb = centre_of_mass(b);
  const Vec3d ua = centre_of_mass_velocity(a), ub = centre_of_mass_velocity(b);
  for (std::size_t i = 0; i < a.size(); ++i) {
    out.pos.push_back(a.pos[i] - ca + xa);
    out.vel.push_back(a.vel[i] - ua + va);
  }
  for (std::size_t i = 0; i < b.size(); ++i) {
    out.pos.push_back(b.pos[i] - cb + xb);
    out.vel.push_back(b.vel[i] - ub + vb);
  }
  return out;
}

}  // namespace orbis
