// The Layzer-Irvine energy check (integrate/energy.hpp): the potential energy a W that it
// computes (PM mesh + pairs within the cut + self and background terms) against the exact
// periodic energy of an Ewald sum of a clustered set; the pair sum's chaining mesh against
// every pair; and a short real run whose residual stays small, while the same numbers with
// W's sign flipped or W's factor a missing leave a large one (so the check can fail).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/params.hpp"
#include "core/units.hpp"
#include "fmm/p2p_kernel.hpp"
#include "fmm/pair_energy.hpp"
#include "integrate/energy.hpp"
#include "integrate/simulation.hpp"
#include "integrate/step_engine.hpp"
#include "support/clustered_particles.hpp"
#include "support/ewald.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;

namespace {

constexpr double kBox = 32.0;

// 16^3 clustered particles (sheets, filaments, two Plummer haloes), unsoftened as the Ewald
// sum is, on a PM mesh of `pm_side`.
Params energy_params(int pm_side, const std::string& extra = "") {
  return Params::parse("[box]\nsize_mpc_h = 32.0\nparticles_per_side = 16\n[gravity]\npm_grid_side = " +
                           std::to_string(pm_side) + "\nsoftening_over_spacing = 0.0\n" + extra +
                           "[gpu]\nbackend = \"cpu\"\n",
                       "energy.toml");
}

}  // namespace

TEST_CASE("a W of a clustered periodic set: the Ewald sum's within 1e-5") {
  const Particles p = test::clustered_particle_set(16, kBox, 99);
  const double ewald = test::ewald_potential_energy(p.pos, p.mass, kBox);
  // A 64^3 mesh (r_s = 1.2 Mpc/h: the pair sum's chaining mesh has 4 cells per side) and a
  // 32^3 one (r_s = 2.4 Mpc/h: 2 cells, so every pair is tried). The sharp cut: its pair
  // potential is the exact split's (the shifted cut's is another force law's, whose W differs
  // from the Newtonian one by its bias; its consistency with its forces is the run test below).
  for (int pm_side : {64, 32}) {
    CAPTURE(pm_side);
    EnergyCheck check(energy_params(pm_side, "short_range_cut = \"sharp\"\n"));
    REQUIRE(check.enabled());
    const PotentialEnergy w = check.potential(p);
    const double error = w.total() / ewald - 1;
    std::printf("mesh %d^3: aW = %.6e (mesh %.4e, pairs %.4e, self %.4e, background %.4e); Ewald %.6e; "
                "relative difference %.2e\n", pm_side, w.total(), w.mesh, w.pairs, w.self, w.background, ewald, error);
    CHECK(ewald < 0);
    CHECK(std::abs(error) < 1e-5);   // measured 2.2e-7 (64^3) and 4.1e-7 (32^3)
    // Every term matters far beyond that: leaving one out, or a wrong factor in it, would fail.
    for (double term : {w.mesh, w.pairs, w.self, w.background}) CHECK(std::abs(term) > 1e-3 * std::abs(ewald));
  }
}

TEST_CASE("the pair energy's chaining mesh finds every pair within the cut") {
  const std::vector<Vec3d> pos = test::clustered_particles(12, kBox, 7);
  const double r_s = 1.0, cut = 5.0, eps = 0.05, g_mass = 2.0, mass = 3.0;   // reach 2: 12 cells per side
  double direct = 0;
  for (std::size_t i = 0; i < pos.size(); ++i)
    for (std::size_t j = 0; j < pos.size(); ++j) {
      if (i == j) continue;
      const double dx = periodic_wrap_delta(pos[j].x - pos[i].x, kBox), dy = periodic_wrap_delta(pos[j].y - pos[i].y, kBox),
                   dz = periodic_wrap_delta(pos[j].z - pos[i].z, kBox);
      direct += p2p_pair_potential(dx * dx + dy * dy + dz * dz, eps * eps, 0.5 / r_s, cut * cut);
    }
  direct *= -0.5 * g_mass * mass;
  PairPotentialInput in;
  in.positions = &pos;
  in.box = kBox;
  in.r_s = r_s;
  in.cut = cut;
  in.softening = eps;
  const double meshed = -g_mass * mass * pair_potential_sum_cpu(in);
  CHECK(meshed == doctest::Approx(direct).epsilon(1e-11));
  CHECK(direct < 0);
}

TEST_CASE("the pair potential's gradient is the P2P force (softened, truncated)") {
  // -d/dr [erfc(s/2r_s)/s] = r T(s/2r_s) / s^3 with s^2 = r^2 + eps^2 (p2p_kernel.hpp).
  const double r_s = 0.7, eps = 0.1, cut2 = 100;
  for (double r : {0.05, 0.3, 1.0, 2.5}) {
    const double h = 1e-5 * r;
    const double slope = -(p2p_pair_potential((r + h) * (r + h), eps * eps, 0.5 / r_s, cut2) -
                           p2p_pair_potential((r - h) * (r - h), eps * eps, 0.5 / r_s, cut2)) / (2 * h);
    const double s = std::sqrt(r * r + eps * eps);
    const double force = r * truncation_exact(s / (2 * r_s)) / (s * s * s);
    CHECK(slope == doctest::Approx(force).epsilon(1e-7));
  }
}

TEST_CASE("the shifted cut: the pair sum's potential has the shifted P2P force as gradient and vanishes at the cut") {
  // psi'(s) = erfc(s/2r_s)/s + a s - offset, force r (T(x) - a s^2 ... in r_s units) / s^3:
  // -d/dr psi' = r (T(s/2r_s) - a s^2) / s^3 (p2p_kernel.hpp's T(s) - shift s^2).
  const double r_s = 0.7, eps = 0.1, cut = 5.5 * r_s;
  PairPotentialInput in;
  in.box = 100;
  in.r_s = r_s;
  in.cut = cut;
  in.softening = eps;
  in.cut_shift = truncation_exact(cut / (2 * r_s)) / (cut * cut);
  const auto pair_sum = [&](double r) {   // two particles r apart: the pair sum is psi'(r)
    std::vector<Vec3d> pos = {Vec3d{10, 10, 10}, Vec3d{10 + r, 10, 10}};
    in.positions = &pos;
    return pair_potential_sum_cpu(in);
  };
  for (double r : {0.3, 1.0, 2.5, 3.5}) {
    const double h = 1e-5 * r;
    const double slope = -(pair_sum(r + h) - pair_sum(r - h)) / (2 * h);
    const double s = std::sqrt(r * r + eps * eps);
    const double force = r * (truncation_exact(s / (2 * r_s)) - in.cut_shift * s * s) / (s * s * s);
    CAPTURE(r);
    CHECK(slope == doctest::Approx(force).epsilon(1e-6));
  }
  // Just inside the cut: the potential is continuous there (the sharp cut's is erfc(x_c)/r_c).
  CHECK(std::abs(pair_sum(cut * (1 - 1e-9))) < 1e-12);
  CHECK(pair_sum(cut * (1 + 1e-9)) == 0.0);
}

TEST_CASE("W of the particles a step engine without terms of its own holds: W of its particles(), bit for bit") {
  const Params params = energy_params(64);
  Particles p = test::clustered_particle_set(16, kBox, 99);
  p.mom.assign(p.size(), Vec3d{0, 0, 0});
  const std::unique_ptr<StepEngine> engine = make_step_engine(params, Comm::self());   // the host engine
  engine->load(p);
  CHECK(!engine->potential_energy_terms(PotentialEnergyRequest{kBox, 1.2, 5.4, 0.0}).has_value());
  EnergyCheck check(params);
  const PotentialEnergy w = check.potential(*engine), ref = check.potential(p);
  CHECK(w.pairs < 0);
  CHECK(w.mesh == ref.mesh);
  CHECK(w.pairs == ref.pairs);
  CHECK(w.self == ref.self);
  CHECK(w.background == ref.background);
}

TEST_CASE("a short run keeps the Layzer-Irvine residual small; W's sign or factor a wrong would not") {
  // The sharp cut (the default) and the shifted one (whose W takes the shifted pair potential
  // and its background term: a W that did not match its forces would leave a residual).
  for (const char* cut : {"sharp", "shifted"}) {
  CAPTURE(cut);
  test::ScratchDir dir(std::string("energy_run_") + cut);
  // 16^3 particles, 2LPT from z = 19 to z = 2, the default hierarchical steps; W every 4 PM steps.
  const Params params = Params::parse(
      std::string("[gravity]\nshort_range_cut = \"") + cut + "\"\n"
      "[box]\nsize_mpc_h = 32.0\nparticles_per_side = 16\n[ic]\nz_init = 19.0\nseed = 5\n"
      "[time]\nz_final = 2.0\noutput_redshifts = [2.0]\n[analysis]\npk = false\nfof = false\nenergy_check_every = 4\n"
      "[gpu]\nbackend = \"cpu\"\n[output]\nsnapshots = false\ndirectory = \"" + dir.path() + "\"\n",
      "energy_run.toml");
  Simulation sim(params);
  const RunSummary summary = sim.run();
  const EnergyBudget& b = sim.state().energy;
  REQUIRE(b.started == 1);
  const Particles& p = sim.particles();
  const double a = summary.a_final;
  CHECK(b.a_last == a);
  // The final terms from the particles, independently of the run's own reductions.
  double sum_p2 = 0;
  for (const Vec3d& m : p.mom) sum_p2 += norm2(m);
  const double ak = 0.5 * p.mass * sum_p2 / a;
  EnergyCheck check(params);
  const double aw = check.potential(p).total();
  const double integral = b.k_integral;
  const double residual = (ak + aw + integral - (b.ak_start + b.aw_start)) / std::abs(aw);
  // The same numbers as they would be with W's sign flipped, or with a W taken for W (a
  // missing factor 1/a in the potential energy: d[aK + a^2 W]/da).
  const double flipped = (ak - aw + integral - (b.ak_start - b.aw_start)) / std::abs(aw);
  const double no_a = (ak + a * aw + integral - (b.ak_start + b.a_start * b.aw_start)) / std::abs(aw);
  std::printf("z = %.1f -> %.1f in %lld steps: aK %.5e -> %.5e, aW %.5e -> %.5e, int K da %.5e\n"
              "Layzer-Irvine residual %.3e of |aW| (W's sign flipped: %.3e; W's factor a missing: %.3e)\n",
              1 / b.a_start - 1, 1 / a - 1, static_cast<long long>(summary.steps), b.ak_start, ak, b.aw_start, aw,
              integral, residual, flipped, no_a);
  CHECK(aw < 0);
  CHECK(ak > 5 * b.ak_start);   // structure grew: the terms changed a lot
  CHECK(std::abs(residual) < 5e-3);
  CHECK(std::abs(flipped) > 0.1);
  CHECK(std::abs(no_a) > 0.1);
  }
}

