// Hierarchical time steps against a fine global step: 32^3 particles in 100 Mpc/h from the
// same 2LPT ICs at z = 49 to z = 0, once at the default hierarchical settings and once with
// one global step for every particle, 6-8x finer than the defaults (eta 0.05, max_dln_a
// 0.00625, where the defaults are 0.3 and 0.05; the criterion's step is linear in eta): the
// reference has no bins and no PM step of its own, and its own step error is small. (A
// global step at the defaults' criterion is no reference: at 32^3 it is 0.5% from the fine
// one, further than the hierarchical run, in the other direction.) The z = 0 power spectra
// agree to 0.5% for k <= 1 h/Mpc (the particle Nyquist wavenumber here); the hierarchical
// run really used its bins (sync points with only some particles active, far fewer force
// evaluations) and ends exactly on z = 0.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "analysis/power_spectrum.hpp"
#include "core/params.hpp"
#include "cosmology/linear_power.hpp"
#include "ic/initial_conditions.hpp"
#include "integrate/simulation.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;

namespace {

constexpr double kBox = 100.0;

Params run_params(const std::string& dir, const std::string& time) {
  return Params::parse("[box]\nsize_mpc_h = 100.0\nparticles_per_side = 32\n"
                       "[ic]\nz_init = 49.0\nseed = 2718\nself_test = false\n"
                       "[gpu]\nbackend = \"cpu\"\n"
                       "[time]\nz_final = 0.0\noutput_redshifts = []\n" + time +
                           "[output]\nsnapshots = false\ndirectory = \"" + dir + "\"\n"
                           "[analysis]\npk = false\nfof = false\n",
                       "hierarchical_pk.toml");
}

struct Run {
  PowerSpectrum pk;
  RunSummary summary;
  std::int64_t pm_steps = 0;
};

Run run(const Params& params) {
  Simulation sim(params);
  Particles ics = make_initial_conditions(params, sim.cosmology(), LinearPower::from_params(params));
  Run out;
  out.summary = sim.run_from(ics, 1.0 / 50);
  out.pm_steps = sim.state().pm_steps;
  out.pk = measure_power_spectrum(sim.particles().pos, kBox, PowerSpectrumSettings::from_params(params));
  return out;
}

}  // namespace

TEST_CASE("hierarchical steps: z = 0 P(k) within 0.5% of a fine global step's for k <= 1 h/Mpc") {
  test::ScratchDir dir_h("hierarchical_pk_h"), dir_g("hierarchical_pk_g");
  const Run h = run(run_params(dir_h.path(), "stepping = \"hierarchical\"\n"));
  const Run g = run(run_params(dir_g.path(), "stepping = \"global\"\neta = 0.05\nmax_dln_a = 0.00625\n"));
  std::printf("hierarchical: %lld sync points, %lld PM steps, %.1f full-step equivalents, %.1f s; "
              "fine global: %lld steps, %.1f s\n",
              static_cast<long long>(h.summary.steps), static_cast<long long>(h.pm_steps),
              h.summary.full_step_equivalents, h.summary.seconds, static_cast<long long>(g.summary.steps),
              g.summary.seconds);
  CHECK(h.summary.a_final == 1.0);   // the last step lands exactly on z_final
  CHECK(g.summary.a_final == 1.0);
  // The bins were used: more sync points than PM steps, and only part of the particles
  // active at many of them.
  CHECK(h.summary.steps > 2 * h.pm_steps);
  CHECK(h.summary.full_step_equivalents < 0.6 * static_cast<double>(h.summary.steps));
  CHECK(h.summary.full_step_equivalents < 0.5 * g.summary.full_step_equivalents);
  REQUIRE(h.pk.bins.size() == g.pk.bins.size());
  int compared = 0;
  for (std::size_t b = 0; b < h.pk.bins.size(); ++b) {
    const double k = g.pk.bins[b].k_mean;
    if (!(k <= 1.0) || g.pk.bins[b].power <= 0) continue;
    const double ratio = h.pk.bins[b].power / g.pk.bins[b].power;
    if (b % 4 == 0 || std::abs(ratio - 1) >= 0.005) std::printf("k = %.3f h/Mpc: P_hier / P_global = %.5f\n", k, ratio);
    CHECK(std::abs(ratio - 1) < 0.005);
    ++compared;
  }
  CHECK(compared >= 10);
}
