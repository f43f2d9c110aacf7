// A plane-wave (Zel'dovich pancake) collapse run with the real PM force and the KDK loop,
// against the analytic Zel'dovich solution, exact in one dimension before shell crossing for
// any background: x = q + D(a) psi(q), p = a^2 H(a) f(a) D(a) psi(q), psi = -sin(kq)/(k D_c).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/params.hpp"
#include "core/units.hpp"
#include "integrate/simulation.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;

namespace {

struct PancakeErrors {
  double position = 0, momentum = 0, transverse = 0;   // largest errors over the amplitudes
};

// The pancake run from z = 49 to a_cross / 2 with the given [time] settings; its largest errors
// against the analytic solution.
PancakeErrors run_pancake(const std::string& time_settings, const std::string& dir) {
  const double box = 64.0;
  // 64 particles along the wave, 32 across it. The PM mesh is the production default, 2 x
  // particles_per_side = 64 cells, so the box-sized wave spans 64 cells (this test ran on a
  // 32-cell mesh before the PM-only force moved to two interlaced meshes; on 32 cells its
  // reference smoothing, 1 - S = 0.165 (k cell)^2, costs 1.2% / 2.0%).
  const int nx = 64, nt = 32;
  const double a_init = 1.0 / 50, a_cross = 1.0, a_end = 0.5 * a_cross;
  Params params = Params::parse(
      "[box]\nsize_mpc_h = 64.0\nparticles_per_side = 32\n"
      "[ic]\nz_init = 49.0\n"
      "[gravity]\nsolver = \"pm\"\nmass_assignment = \"tsc\"\n"
      "[time]\nz_final = 1.0\noutput_redshifts = []\n" + time_settings + "\n"
      "[output]\nsnapshots = false\ndirectory = \"" + dir + "\"\n"
      "[analysis]\npk = false\nfof = false\n",
      "pancake.toml");
  Simulation sim(params);
  const Cosmology& c = sim.cosmology();
  const double k = 2 * units::pi / box;
  const double d_cross = c.growth(a_cross);
  auto psi = [&](double q) { return -std::sin(k * q) / (k * d_cross); };

  Particles p;
  p.mass = params.get_real("cosmology.omega_m") * units::rho_crit0 * box * box * box / (nx * nt * nt);
  for (int i = 0; i < nx; ++i)
    for (int j = 0; j < nt; ++j)
      for (int l = 0; l < nt; ++l) {
        const double q = (i + 0.5) * box / nx;
        const double d = c.growth(a_init);
        p.pos.push_back({periodic_wrap_position(q + d * psi(q), box), (j + 0.5) * box / nt, (l + 0.5) * box / nt});
        p.mom.push_back({a_init * a_init * c.hubble(a_init) * c.growth_rate(a_init) * d * psi(q), 0, 0});
        p.id.push_back(p.id.size() + 1);
      }
  RunSummary summary = sim.run_from(p, a_init);
  REQUIRE(summary.a_final == doctest::Approx(a_end).epsilon(1e-12));

  const Particles& out = sim.particles();
  const double d = c.growth(a_end);
  const double amplitude = d / (k * d_cross);   // largest displacement at a_end
  const double velocity_amplitude = a_end * a_end * c.hubble(a_end) * c.growth_rate(a_end) * amplitude;
  PancakeErrors e;
  for (std::size_t n = 0; n < out.size(); ++n) {
    const double q = ((out.id[n] - 1) / (nt * nt) + 0.5) * box / nx;
    const double x_expected = q + d * psi(q);
    e.position = std::max(e.position, std::abs(periodic_wrap_delta(out.pos[n].x - x_expected, box)) / amplitude);
    e.momentum = std::max(e.momentum, std::abs(out.mom[n].x - a_end * a_end * c.hubble(a_end) * c.growth_rate(a_end) * d * psi(q)) /
                                          velocity_amplitude);
    e.transverse = std::max({e.transverse, std::abs(out.mom[n].y) / velocity_amplitude, std::abs(out.mom[n].z) / velocity_amplitude});
  }
  std::string settings = time_settings;
  std::replace(settings.begin(), settings.end(), '\n', ',');
  MESSAGE("pancake [" << settings << "]: max position error / amplitude = " << e.position
          << ", max momentum error / amplitude = " << e.momentum);
  return e;
}

}  // namespace

TEST_CASE("Zel'dovich pancake: positions and velocities follow the analytic solution to a = a_cross / 2") {
  test::ScratchDir dir("pancake");
  const PancakeErrors e = run_pancake("max_dln_a = 0.02", dir.path());
  CHECK(e.position < 0.005);
  CHECK(e.momentum < 0.005);
  CHECK(e.transverse < 1e-6);
}

// In one dimension the force on every particle grows as D(a) until shell crossing, so kicks
// and drifts weighted by the linear growth integrate the pancake exactly whatever the step:
// 0.5 in ln a (7 steps from z = 49) must be as accurate as 0.02, and the unweighted KDK
// (GADGET's) must not be (what the weights are for).
TEST_CASE("Zel'dovich pancake: growth-weighted kicks and drifts are exact at any step") {
  test::ScratchDir dir("pancake_big_steps");
  const PancakeErrors weighted = run_pancake("max_dln_a = 0.5", dir.path() + "/weighted");
  CHECK(weighted.position < 0.005);
  CHECK(weighted.momentum < 0.005);
  const PancakeErrors kicks_only =
      run_pancake("max_dln_a = 0.5\ngrowth_weighted_drifts = false", dir.path() + "/kicks_only");
  const PancakeErrors held = run_pancake(
      "max_dln_a = 0.5\ngrowth_weighted_kicks = false\ngrowth_weighted_drifts = false", dir.path() + "/held");
  CHECK(kicks_only.position > 4 * weighted.position);
  CHECK(held.position > 4 * weighted.position);
}
