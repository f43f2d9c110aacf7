#include "ic/plummer.hpp"

#include <cmath>

#include "core/error.hpp"

namespace orbis {

double plummer_enclosed_mass(double r, double mass, double a) {
  return mass * r * r * r / std::pow(r * r + a * a, 1.5);
}

double plummer_potential(double r, double mass, double a, double g) { return -g * mass / std::sqrt(r * r + a * a); }

double plummer_dispersion2(double r, double mass, double a, double g) {
  return g * mass / (6 * std::sqrt(r * r + a * a));
}

namespace {
void check(const SphereSettings& s, const char* model) {
  if (s.n < 1) fail("{} sphere: {} particles; at least one is needed", model, s.n);
  if (!(s.mass > 0) || !(s.scale_radius > 0) || !(s.g > 0))
    fail("{} sphere: mass {}, scale radius {} and G {} must all be > 0", model, s.mass, s.scale_radius, s.g);
  if (!(s.r_max >= 0)) fail("{} sphere: r_max = {} must be >= 0 (0: the model's default)", model, s.r_max);
}
}  // namespace

IsolatedSystem make_plummer(const SphereSettings& s) {
  check(s, "Plummer");
  const double a = s.scale_radius;
  // The mass fraction inside r_max: X is drawn below it.
  const double x_max = s.r_max > 0 ? plummer_enclosed_mass(s.r_max, 1.0, a) : 1.0;
  UniformDeviates uniform(s.seed);
  IsolatedSystem out;
  out.pos.resize(s.n);
  out.vel.resize(s.n);
  out.particle_mass = s.mass * x_max / static_cast<double>(s.n);
  // q^2 (1 - q^2)^(7/2) peaks at q^2 = 2/9 with 0.0922: 0.1 bounds it.
  constexpr double kBound = 0.1;
  for (std::size_t i = 0; i < s.n; ++i) {
    double r;   // +inf where X rounds to 1: drawn again
    do r = a / std::sqrt(std::pow(x_max * uniform.open(), -2.0 / 3.0) - 1.0); while (!std::isfinite(r));
    double q;
    do q = uniform(); while (kBound * uniform() > q * q * std::pow(1 - q * q, 3.5));
    const double v_esc = std::sqrt(-2 * plummer_potential(r, s.mass, a, s.g));
    out.pos[i] = r * uniform.direction();
    out.vel[i] = (q * v_esc) * uniform.direction();
  }
  if (s.centre_of_mass_frame) to_centre_of_mass_frame(out);
  return out;
}

}  // namespace orbis
