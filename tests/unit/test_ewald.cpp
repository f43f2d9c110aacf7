// The Ewald reference itself against an independent computation: the spherically ordered
// sum over images converges to the tin-foil (Ewald) result plus the vacuum-boundary dipole
// term (4 pi / 3 L^3) m dx (de Leeuw, Perram & Smith 1980).
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "support/ewald.hpp"

using orbis::Vec3d;

namespace {
Vec3d spherical_image_sum(const Vec3d& dx, double box, int radius) {
  Vec3d sum;
  for (int i = -radius; i <= radius; ++i)
    for (int j = -radius; j <= radius; ++j)
      for (int k = -radius; k <= radius; ++k) {
        if (i * i + j * j + k * k > radius * radius) continue;
        Vec3d d{dx.x + i * box, dx.y + j * box, dx.z + k * box};
        const double r = orbis::norm(d);
        sum += d * (1.0 / (r * r * r));
      }
  return sum;
}
}  // namespace

TEST_CASE("Ewald pair force equals the spherical image sum minus the dipole term") {
  const double box = 2.0;
  const double dipole = 4.0 * M_PI / (3.0 * box * box * box);
  for (Vec3d dx : {Vec3d{0.2, 0.1, -0.04}, Vec3d{0.6, 0.4, 0.2}, Vec3d{0.9, -0.6, 0.4}}) {
    const Vec3d ewald = orbis::test::ewald_acceleration(dx, box);
    const Vec3d spherical = spherical_image_sum(dx, box, 40);
    for (int d = 0; d < 3; ++d)
      CHECK(std::abs(spherical[d] - dipole * dx[d] - ewald[d]) < 2e-4 * orbis::norm(ewald));
  }
}

TEST_CASE("Ewald force vanishes where symmetry demands and superposes") {
  const double box = 1.0;
  const Vec3d half = orbis::test::ewald_acceleration({0.5, 0.0, 0.0}, box);
  CHECK(std::abs(half.x) < 1e-7);
  const Vec3d a = orbis::test::ewald_acceleration({0.1, 0.2, 0.3}, box);
  const Vec3d b = orbis::test::ewald_acceleration({-0.1, -0.2, -0.3}, box);
  for (int d = 0; d < 3; ++d) CHECK(a[d] == doctest::Approx(-b[d]).epsilon(1e-9));

  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, box);
  std::vector<Vec3d> pos(20);
  std::vector<double> mass(20);
  for (int i = 0; i < 20; ++i) pos[i] = {u(rng), u(rng), u(rng)}, mass[i] = 0.5 + u(rng);
  orbis::test::EwaldSum sum(pos, mass, box);
  const Vec3d target{0.3, 0.7, 0.1};
  Vec3d expected;
  for (int i = 0; i < 20; ++i) expected += orbis::test::ewald_acceleration(pos[i] - target, box) * mass[i];
  const Vec3d got = sum.acceleration(target);
  for (int d = 0; d < 3; ++d) CHECK(got[d] == doctest::Approx(expected[d]).epsilon(1e-9));
}
