// A PM-only run of 64^3 particles from z = 49 to z = 1: the power in the lowest three k-bins
// grows as (D(a)/D(a_i))^2 to 2% (same realisation, so no cosmic variance), and the total
// momentum stays zero to 1e-6 of sum |p|. The box is 1 Gpc/h so that these modes are linear
// at z = 1 (in a 100 Mpc/h box mode coupling moves them by several per cent).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>

#include "analysis/power_spectrum.hpp"
#include "core/params.hpp"
#include "cosmology/linear_power.hpp"
#include "ic/initial_conditions.hpp"
#include "integrate/simulation.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;

namespace {
Vec3d total_momentum(const Particles& p, double& sum_abs) {
  Vec3d total;
  sum_abs = 0;
  for (const auto& m : p.mom) total += m, sum_abs += norm(m);
  return total;
}
}  // namespace

TEST_CASE("PM-only linear growth of the lowest k-bins and momentum conservation") {
  test::ScratchDir dir("linear_growth");
  const Params params = Params::parse(
      "[box]\nsize_mpc_h = 1000.0\nparticles_per_side = 64\n"
      "[ic]\nz_init = 49.0\nseed = 4321\nself_test = false\n"
      "[gravity]\nsolver = \"pm\"\n"
      "[time]\nz_final = 1.0\noutput_redshifts = []\n"
      "[output]\nsnapshots = false\ndirectory = \"" + dir.path() + "\"\n"
      "[analysis]\npk = false\nfof = false\n",
      "linear_growth.toml");
  Simulation sim(params);
  const Cosmology& c = sim.cosmology();
  const double a_init = 1.0 / 50;
  Particles ics = make_initial_conditions(params, c, LinearPower::from_params(params));
  const PowerSpectrumSettings pk = PowerSpectrumSettings::from_params(params);
  const PowerSpectrum before = measure_power_spectrum(ics.pos, 1000.0, pk);

  double sum_abs0 = 0;
  const Vec3d p0 = total_momentum(ics, sum_abs0);
  CHECK(norm(p0) < 1e-10 * sum_abs0);   // the ICs carry no net momentum

  sim.run_from(ics, a_init);
  const PowerSpectrum after = measure_power_spectrum(sim.particles().pos, 1000.0, pk);
  const double expected = std::pow(c.growth(0.5) / c.growth(a_init), 2);
  for (int bin = 0; bin < 3; ++bin) {
    const double ratio = after.bins[bin].power / before.bins[bin].power / expected;
    std::printf("k = %.4f h/Mpc: P(z=1)/P(z=49) / (D ratio)^2 = %.4f\n", after.bins[bin].k_mean, ratio);
    CHECK(std::abs(ratio - 1) < 0.02);
  }
  double sum_abs = 0;
  const Vec3d p1 = total_momentum(sim.particles(), sum_abs);
  std::printf("|total momentum| / sum |p| = %.3g\n", norm(p1) / sum_abs);
  CHECK(norm(p1) < 1e-6 * sum_abs);
}
