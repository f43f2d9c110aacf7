// Test-only isolated systems for the vacuum-boundary force tests and benchmarks, in N-body
// units (G = 1; the Plummer sphere of unit mass and scale radius, Hernquist spheres of unit
// mass and scale radius truncated at 100 a), and their exact forces by direct summation.
#pragma once
#include <cstdint>
#include <vector>

#include "core/vec3.hpp"
#include "ic/hernquist.hpp"
#include "ic/parabolic_orbit.hpp"
#include "ic/plummer.hpp"

namespace orbis::test {

struct VacuumScene {
  const char* name = "";
  std::vector<Vec3d> pos;
  double particle_mass = 0;   // G = 1: g_mass = particle_mass (with `masses`: their mean)
  std::vector<double> masses; // each particle's mass, or empty when all have particle_mass
};

// A Plummer sphere of n particles.
inline VacuumScene plummer_scene(std::size_t n, std::uint64_t seed) {
  SphereSettings s;
  s.n = n;
  s.seed = seed;
  IsolatedSystem p = make_plummer(s);
  return {"Plummer sphere", std::move(p.pos), p.particle_mass, {}};
}

// Two Hernquist spheres of n/2 particles each on a parabolic orbit, 8 a apart with a
// pericentre of 1 a: two cusps, an empty middle, and the tree across both.
inline VacuumScene hernquist_pair_scene(std::size_t n, std::uint64_t seed) {
  SphereSettings s;
  s.n = n / 2;
  s.seed = seed;
  const IsolatedSystem a = make_hernquist(s);
  s.seed = seed + 1;
  const IsolatedSystem b = make_hernquist(s);
  IsolatedSystem pair = place_on_parabolic_orbit(a, b, ParabolicEncounter{8.0, 1.0, 1.0});
  return {"Hernquist pair", std::move(pair.pos), pair.particle_mass, {}};
}

// A galaxy-like system of unequal masses (what DICE or GalIC write): a Hernquist "halo" of
// n/2 particles of total mass 1 and scale radius 1, and a "bulge" of n/2 particles ten times
// lighter each (total 0.1, a Plummer sphere of scale radius 0.1) at its centre, shifted by
// 0.05 so that the two centres differ; masses per particle.
inline VacuumScene halo_bulge_scene(std::size_t n, std::uint64_t seed) {
  SphereSettings s;
  s.n = n / 2;
  s.seed = seed;
  const IsolatedSystem halo = make_hernquist(s);
  s.n = n - n / 2;
  s.seed = seed + 1;
  s.mass = 0.1;
  s.scale_radius = 0.1;
  const IsolatedSystem bulge = make_plummer(s);
  VacuumScene scene{"halo and bulge (masses 10:1)", halo.pos, 0, {}};
  scene.masses.assign(halo.size(), halo.particle_mass);
  for (const Vec3d& x : bulge.pos) scene.pos.push_back(x + Vec3d{0.05, 0, 0});
  scene.masses.insert(scene.masses.end(), bulge.size(), bulge.particle_mass);
  double total = 0;
  for (double m : scene.masses) total += m;
  scene.particle_mass = total / static_cast<double>(scene.masses.size());
  return scene;
}

// The exact acceleration of particle i by direct summation in double over every other
// particle: g_mass sum_j (x_j - x_i) / (r^2 + eps^2)^(3/2) (Plummer softening as in P2P).
Vec3d direct_newtonian(const std::vector<Vec3d>& positions, std::size_t i, double g_mass, double softening);
// The same for particles `sample` (OpenMP over them).
std::vector<Vec3d> direct_newtonian(const std::vector<Vec3d>& positions, const std::vector<std::size_t>& sample,
                                    double g_mass, double softening);
// With each particle's own mass: g sum_j m_j (x_j - x_i) / (r^2 + eps^2)^(3/2) (G = g).
Vec3d direct_newtonian(const std::vector<Vec3d>& positions, const std::vector<double>& masses, std::size_t i, double g,
                       double softening);
std::vector<Vec3d> direct_newtonian(const std::vector<Vec3d>& positions, const std::vector<double>& masses,
                                    const std::vector<std::size_t>& sample, double g, double softening);
// The exact accelerations of a scene's `sample` (its masses, G = 1).
std::vector<Vec3d> direct_newtonian(const VacuumScene& scene, const std::vector<std::size_t>& sample, double softening);

}  // namespace orbis::test
