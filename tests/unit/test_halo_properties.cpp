// Halo properties of FoF groups: centre of mass and size of a group wrapping around the
// periodic box, mean peculiar velocity and dispersion against direct sums, the
// minimum-potential centre under translation and thread counts (its reference sums:
// test_halo_potential.cpp).
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <random>

#include "analysis/halo_properties.hpp"
#include "cosmology/cosmology.hpp"
#include "support/fof_samples.hpp"

using namespace orbis;

namespace {

constexpr double kSoftening = 0.01;   // Mpc/h

struct Sample {
  Particles p;
  Vec3d com;           // centre of mass of the Plummer sphere's particles (no wrapping needed)
  std::size_t first;   // index of its first particle
  std::size_t count;
};

// A Plummer sphere in the middle of the box (no wrapping) plus a uniform background.
Sample make_sample(std::mt19937_64& rng, double box, const Vec3d& centre, double a) {
  std::vector<Vec3d> pos;
  testing::add_uniform(pos, 2000, box, rng);
  const std::size_t first = pos.size();
  testing::add_plummer(pos, 4000, centre, a, 1.0, box, rng);
  Sample s;
  s.first = first;
  s.count = pos.size() - first;
  for (std::size_t i = first; i < pos.size(); ++i) s.com += pos[i];
  s.com *= 1.0 / static_cast<double>(s.count);
  s.p = testing::make_particles(pos, 0.5, rng);
  std::normal_distribution<double> gauss(0.0, 300.0);
  for (auto& m : s.p.mom) m = Vec3d{gauss(rng) + 100.0, gauss(rng) - 50.0, gauss(rng) + 20.0};
  return s;
}

}  // namespace

TEST_CASE("halo properties: a group wrapping around the box has the unwrapped centre and its size") {
  std::mt19937_64 rng(21);
  const double box = 10.0, a = 0.5;
  const Cosmology cosmo(CosmologyParams{0.3, 0.7, -1.0});
  Sample s = make_sample(rng, box, {5.0, 5.0, 5.0}, 0.1);
  const double link = fof::linking_length(s.p.size(), box, 0.2);

  // Reference: the group found in the middle of the box.
  fof::CellGrid grid0(s.p.pos, box, link);
  const auto groups0 = fof::find_groups(grid0, s.p, 32);
  REQUIRE(groups0.size() >= 1);
  const auto haloes0 = halo::compute_properties(grid0, s.p, groups0, cosmo, a, kSoftening);
  // Plain (unwrapped) mean of the largest group's members, computed here directly.
  Vec3d mean{};
  for (std::uint32_t k = 0; k < groups0.length[0]; ++k) mean += s.p.pos[groups0.members[k]];
  mean *= 1.0 / groups0.length[0];
  CHECK(haloes0[0].cm.x == doctest::Approx(mean.x).epsilon(1e-12));
  CHECK(haloes0[0].cm.y == doctest::Approx(mean.y).epsilon(1e-12));
  CHECK(haloes0[0].cm.z == doctest::Approx(mean.z).epsilon(1e-12));
  CHECK(norm(haloes0[0].cm - s.com) < 0.05);   // the core of the sphere is the group
  CHECK(norm(haloes0[0].pos - Vec3d{5.0, 5.0, 5.0}) < 0.05);   // the minimum potential: its centre

  // The same particles translated so the group sits on a corner of the box.
  for (const Vec3d shift : {Vec3d{5.0, 5.0, 5.0}, Vec3d{-4.98, 5.03, 0.0}, Vec3d{4.99, -5.0, 4.97}}) {
    CAPTURE(shift.x);
    Particles q = s.p;
    for (auto& x : q.pos)
      for (int d = 0; d < 3; ++d) x[d] = periodic_wrap_position(x[d] + shift[d], box);
    fof::CellGrid grid(q.pos, box, link);
    const auto groups = fof::find_groups(grid, q, 32);
    REQUIRE(groups.size() == groups0.size());
    CHECK(groups.length == groups0.length);
    CHECK(groups.members == groups0.members);   // same particles, same canonical order
    const auto haloes = halo::compute_properties(grid, q, groups, cosmo, a, kSoftening);
    for (int d = 0; d < 3; ++d) {
      const double expected = periodic_wrap_position(mean[d] + shift[d], box);
      CHECK(haloes[0].cm[d] >= 0.0);
      CHECK(haloes[0].cm[d] < box);
      CHECK(std::abs(periodic_wrap_delta(haloes[0].cm[d] - expected, box)) < 1e-9);
    }
    CHECK(haloes[0].len == haloes0[0].len);
    CHECK(haloes[0].mass == doctest::Approx(haloes0[0].len * 0.5));
    // The potential depends on separations only: the same member, and the spherical
    // overdensity around it changes by rounding at most (a particle on a sphere's edge).
    CHECK(haloes[0].min_pot_id == haloes0[0].min_pot_id);
    for (int d = 0; d < 3; ++d)
      CHECK(std::abs(periodic_wrap_delta(haloes[0].pos[d] - haloes0[0].pos[d] - shift[d], box)) < 1e-12);
    CHECK(haloes[0].m_crit200 == doctest::Approx(haloes0[0].m_crit200).epsilon(0.002));
    CHECK(haloes[0].m_mean200 == doctest::Approx(haloes0[0].m_mean200).epsilon(0.002));
  }
}

TEST_CASE("halo properties: velocities are peculiar (p / a), dispersion is 1D") {
  std::mt19937_64 rng(22);
  const double box = 10.0, a = 0.25;
  const Cosmology cosmo(CosmologyParams{0.3, 0.7, -1.0});
  Sample s = make_sample(rng, box, {2.0, 7.0, 4.0}, 0.1);
  fof::CellGrid grid(s.p.pos, box, fof::linking_length(s.p.size(), box, 0.2));
  const auto groups = fof::find_groups(grid, s.p, 32);
  const auto haloes = halo::compute_properties(grid, s.p, groups, cosmo, a, kSoftening);
  for (std::size_t g = 0; g < std::min<std::size_t>(groups.size(), 3); ++g) {
    const std::uint32_t* mem = groups.members.data() + groups.offset[g];
    const std::uint32_t n = groups.length[g];
    Vec3d vbar{};
    for (std::uint32_t k = 0; k < n; ++k) vbar += s.p.mom[mem[k]] * (1.0 / a);
    vbar *= 1.0 / n;
    double var = 0;   // two-pass, per component
    for (int d = 0; d < 3; ++d)
      for (std::uint32_t k = 0; k < n; ++k) var += std::pow(s.p.mom[mem[k]][d] / a - vbar[d], 2);
    CHECK(haloes[g].vel_pec.x == doctest::Approx(vbar.x).epsilon(1e-10));
    CHECK(haloes[g].vel_pec.y == doctest::Approx(vbar.y).epsilon(1e-10));
    CHECK(haloes[g].vel_pec.z == doctest::Approx(vbar.z).epsilon(1e-10));
    CHECK(haloes[g].vel_disp == doctest::Approx(std::sqrt(var / (3.0 * n))).epsilon(1e-10));
  }
  // The momenta were drawn with sigma 300 km/s per component: sigma_pec = 300 / a.
  CHECK(haloes[0].vel_disp == doctest::Approx(300.0 / a).epsilon(0.05));
}

TEST_CASE("halo properties: identical for any thread count") {
  std::mt19937_64 rng(24);
  const double box = 10.0;
  const Cosmology cosmo(CosmologyParams{0.3, 0.7, -1.0});
  Sample s = make_sample(rng, box, {9.9, 0.2, 5.0}, 0.15);
  fof::CellGrid grid(s.p.pos, box, fof::linking_length(s.p.size(), box, 0.2));
  const auto groups = fof::find_groups(grid, s.p, 8);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = halo::compute_properties(grid, s.p, groups, cosmo, 0.7, kSoftening);
  omp_set_num_threads(3);
  const auto three = halo::compute_properties(grid, s.p, groups, cosmo, 0.7, kSoftening);
  omp_set_num_threads(saved);
  REQUIRE(one.size() == three.size());
  for (std::size_t g = 0; g < one.size(); ++g) {
    CHECK(one[g].m_crit200 == three[g].m_crit200);
    CHECK(one[g].r_mean200 == three[g].r_mean200);
    CHECK(one[g].min_pot_id == three[g].min_pot_id);
    CHECK(one[g].vel_disp == three[g].vel_disp);
    CHECK(one[g].pos.x == three[g].pos.x);
    CHECK(one[g].cm.x == three[g].cm.x);
  }
}
