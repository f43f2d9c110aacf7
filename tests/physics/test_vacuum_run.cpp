// `orbis run` on an isolated system ([gravity] boundary = "vacuum", issue #31): the whole run
// loop (Newtonian clock, vacuum engine, block steps, conservation checks) on a Plummer sphere
// in equilibrium (Henon units: G = M = 1, E = -1/4, virial radius 1, a = 3 pi / 16, crossing
// time 2 sqrt(2)): its 10/50/90% Lagrangian radii after 3.5 crossing times equal the start's
// to 5% (the start's equal the analytic model's, r(f) = a (f^(-2/3) - 1)^(-1/2), to 4%): a
// run that heats or shrinks the sphere (wrong kick or drift factors, a force off by a
// factor, a wrong G) moves them by far more. Measured: +1.4%, +2.7%, +3.3% (the sample of
// 4096 particles starts 1% above virial equilibrium in its softened potential, 2K/|W| =
// 1.011, and its outer shells expand a little); E conserved to 3e-4, P and L to 1e-4.
// (The merger's energy: test_vacuum_merger.cpp.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/params.hpp"
#include "ic/isolated_ics.hpp"
#include "integrate/simulation.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;

namespace {

constexpr double kPi = 3.14159265358979323846;

// Radii about the centre of mass holding the fractions `f` of the particles.
std::vector<double> lagrangian_radii(const Particles& p, const std::vector<double>& f) {
  Vec3d centre;
  for (const Vec3d& x : p.pos) centre += x;
  centre = centre * (1.0 / static_cast<double>(p.size()));
  std::vector<double> r;
  for (const Vec3d& x : p.pos) r.push_back(norm(x - centre));
  std::sort(r.begin(), r.end());
  std::vector<double> out;
  for (double fraction : f) out.push_back(r[static_cast<std::size_t>(fraction * static_cast<double>(r.size()))]);
  return out;
}

}  // namespace

TEST_CASE("vacuum run: a Plummer sphere stays in equilibrium over 3.5 crossing times") {
  test::ScratchDir dir("vacuum_plummer");
  const double a = 3 * kPi / 16;   // Henon units: virial radius 1, crossing time 2 sqrt(2)
  const double t_end = 10.0;       // 3.5 crossing times
  Params params = Params::parse(
      "[ic]\nkind = \"plummer\"\nparticles = 4096\nscale_radius = " + std::to_string(a) + "\nseed = 31\n"
      "[units]\nsystem = \"nbody\"\n"
      "[gravity]\nboundary = \"vacuum\"\nsolver = \"fmm\"\nsoftening = 0.02\nmax_leaf = 16\n"
      "[time]\nt_end = " + std::to_string(t_end) + "\nmax_dt = 0.0625\neta = 0.3\n"
      "[output]\nsnapshots = false\ndirectory = \"" + dir.path() + "\"\n"
      "[gpu]\nbackend = \"cpu\"\n",
      "plummer.toml");
  Simulation sim(params);
  const RunSummary summary = sim.run();
  CHECK(summary.a_final == doctest::Approx(t_end));
  REQUIRE(sim.conservation_checks().size() == 2);   // the start and the end
  const std::vector<double> fractions = {0.1, 0.5, 0.9};
  // The start: the same ICs again (the generator is reproducible).
  const std::vector<double> start = lagrangian_radii(make_isolated_ics(params), fractions);
  const std::vector<double> end = lagrangian_radii(sim.particles(), fractions);
  for (std::size_t k = 0; k < fractions.size(); ++k) {
    const double model = a / std::sqrt(std::pow(fractions[k], -2.0 / 3.0) - 1);
    std::printf("Plummer, 4096 particles: %2.0f%% Lagrangian radius %.4f at t = 0, %.4f at t = %g (%+.2f%%); model "
                "%.4f\n", 100 * fractions[k], start[k], end[k], t_end, 100 * (end[k] / start[k] - 1), model);
    CHECK(std::abs(start[k] / model - 1) < 0.04);   // the sample is the model
    CHECK(std::abs(end[k] / start[k] - 1) < 0.05);  // and stays it
  }
  const ConservationRecord& last = sim.conservation_checks().back();
  std::printf("Plummer: (E - E0)/|E0| = %.3e, |dP|/(M v_rms) = %.2e, |dL|/(M r_rms v_rms) = %.2e\n",
              last.energy_drift, last.momentum_drift, last.angular_momentum_drift);
  CHECK(sim.conservation_checks().front().now.energy() == doctest::Approx(-0.25).epsilon(0.03));   // Henon units
  CHECK(std::abs(last.energy_drift) < 2e-3);
  CHECK(last.momentum_drift < 1e-3);
  CHECK(last.angular_momentum_drift < 1e-3);
}
