// Isolated N-body systems (vacuum boundaries, [gravity] boundary = "vacuum"): particles of one
// mass (the generators' spheres) or of several (a merger of unequal spheres), with positions
// and velocities in the system's own units. The generators
// (ic/plummer.hpp, ic/hernquist.hpp) work in any consistent units: N-body units (G = M =
// a = 1, velocities in sqrt(G M / a)) or physical ones with the G of those units given
// (GADGET's kpc, km/s, 1e10 Msun: G = 43007.1). Velocities are physical, dx/dt.
//
// Reproducible: a system depends only on its settings and seed, the same on every platform
// (UniformDeviates below) and independent of the thread count (generated serially).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "core/vec3.hpp"

namespace orbis {

struct IsolatedSystem {
  std::vector<Vec3d> pos;     // length unit of the model
  std::vector<Vec3d> vel;     // velocity unit of the model (dx/dt)
  double particle_mass = 0;   // every particle's mass, mass unit of the model (with `masses`: their mean)
  std::vector<double> masses; // each particle's mass, or empty when all have particle_mass

  std::size_t size() const { return pos.size(); }
  double mass_of(std::size_t i) const { return masses.empty() ? particle_mass : masses[i]; }
  double total_mass() const {
    if (masses.empty()) return particle_mass * static_cast<double>(pos.size());
    double sum = 0;
    for (double m : masses) sum += m;
    return sum;
  }
};

// Uniform deviates in [0, 1) from a seed: mt19937_64 (whose sequence the C++ standard fixes)
// and its 53 high bits, not std::uniform_real_distribution (whose algorithm it does not).
class UniformDeviates {
 public:
  explicit UniformDeviates(std::uint64_t seed) : engine_(seed) {}
  double operator()() { return static_cast<double>(engine_() >> 11) * 0x1p-53; }
  // In (0, 1): for logarithms and inverse powers.
  double open() {
    double u;
    do u = (*this)(); while (u == 0.0);
    return u;
  }
  // A direction uniform on the unit sphere.
  Vec3d direction();

 private:
  std::mt19937_64 engine_;
};

// The mass-weighted mean position and velocity (equal masses: the plain means).
Vec3d centre_of_mass(const IsolatedSystem& system);
Vec3d centre_of_mass_velocity(const IsolatedSystem& system);
// Moves the system into its centre-of-mass frame (mean position and velocity 0).
void to_centre_of_mass_frame(IsolatedSystem& system);

// What the spherical models (Plummer, Hernquist) are sampled from.
struct SphereSettings {
  std::size_t n = 0;          // particles, >= 1
  double mass = 1;            // total mass M of the (untruncated) model
  double scale_radius = 1;    // a
  double g = 1;               // the gravitational constant in the units of mass, length, velocity
  std::uint64_t seed = 1;
  // Particles are drawn within r_max only (the model's mass inside it, M(r_max), is shared
  // among them, so the sampled profile is the model's up to r_max); velocities still come
  // from the untruncated distribution function. 0: the model's default (its .hpp).
  double r_max = 0;
  // Move the sample into its centre-of-mass frame (mean position and velocity 0). Off: the
  // model's centre stays at the origin, and the sample's centre of mass lies off it by
  // about sqrt(<r^2> / 3N) (0.1 a for 4096 Hernquist particles within 100 a: its far
  // particles weigh in the mean).
  bool centre_of_mass_frame = true;
};

}  // namespace orbis
