#include "support/vacuum_scenes.hpp"

#include <cmath>

namespace orbis::test {

Vec3d direct_newtonian(const std::vector<Vec3d>& positions, std::size_t i, double g_mass, double softening) {
  const double eps2 = softening * softening;
  Vec3d a{0, 0, 0};
  for (std::size_t j = 0; j < positions.size(); ++j) {
    if (j == i) continue;
    const Vec3d d = positions[j] - positions[i];
    const double s2 = norm2(d) + eps2;
    a += d * (1.0 / (s2 * std::sqrt(s2)));
  }
  return a * g_mass;
}

std::vector<Vec3d> direct_newtonian(const std::vector<Vec3d>& positions, const std::vector<std::size_t>& sample,
                                    double g_mass, double softening) {
  std::vector<Vec3d> out(sample.size());
#pragma omp parallel for schedule(dynamic, 16)
  for (long q = 0; q < static_cast<long>(sample.size()); ++q)
    out[static_cast<std::size_t>(q)] = direct_newtonian(positions, sample[static_cast<std::size_t>(q)], g_mass, softening);
  return out;
}

Vec3d direct_newtonian(const std::vector<Vec3d>& positions, const std::vector<double>& masses, std::size_t i, double g,
                       double softening) {
  const double eps2 = softening * softening;
  Vec3d a{0, 0, 0};
  for (std::size_t j = 0; j < positions.size(); ++j) {
    if (j == i) continue;
    const Vec3d d = positions[j] - positions[i];
    const double s2 = norm2(d) + eps2;
    a += d * (masses[j] / (s2 * std::sqrt(s2)));
  }
  return a * g;
}

std::vector<Vec3d> direct_newtonian(const std::vector<Vec3d>& positions, const std::vector<double>& masses,
                                    const std::vector<std::size_t>& sample, double g, double softening) {
  std::vector<Vec3d> out(sample.size());
#pragma omp parallel for schedule(dynamic, 16)
  for (long q = 0; q < static_cast<long>(sample.size()); ++q)
    out[static_cast<std::size_t>(q)] =
        direct_newtonian(positions, masses, sample[static_cast<std::size_t>(q)], g, softening);
  return out;
}

std::vector<Vec3d> direct_newtonian(const VacuumScene& scene, const std::vector<std::size_t>& sample, double softening) {
  if (scene.masses.empty()) return direct_newtonian(scene.pos, sample, scene.particle_mass, softening);
  return direct_newtonian(scene.pos, scene.masses, sample, 1.0, softening);
}

}  // namespace orbis::test
