// The energy diagnostic with the CUDA backend: the GPU's pair sum (gpu/pair_energy_cuda.cu)
// equals the CPU's on a clustered set (through the chaining mesh and through the one-cell
// fallback); a W with the pair sum on the GPU matches the Ewald sum; and a short run on the
// CUDA step engine keeps the Layzer-Irvine residual small. Returns 77 without a usable GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/params.hpp"
#include "fmm/p2p.hpp"
#include "fmm/pair_energy.hpp"
#include "integrate/energy.hpp"
#include "integrate/simulation.hpp"
#include "support/clustered_particles.hpp"
#include "support/ewald.hpp"
#include "support/gpu_skip.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;

TEST_CASE("GPU pair sum of the energy check: the CPU's; a W on the GPU: the Ewald sum's") {
  test::require_gpu_or_skip();
  const double box = 64.0;
  const std::vector<Vec3d> pos = test::clustered_particles(40, box, 11);
  const auto gpu = make_p2p_evaluator("cuda", 0);
  for (double cut : {5.0, 12.0, 30.0}) {   // reach 2, reach 1, one cell
    CAPTURE(cut);
    PairPotentialInput in;
    in.positions = &pos;
    in.box = box;
    in.r_s = cut / 5;
    in.cut = cut;
    in.softening = 0.02;
    const double cpu = pair_potential_sum_cpu(in), cuda = gpu->pair_potential_sum(in);
    std::printf("cut %.0f: pair sum CPU %.15e GPU %.15e (%.1e)\n", cut, cpu, cuda, cuda / cpu - 1);
    CHECK(cpu > 0);
    CHECK(cuda == doctest::Approx(cpu).epsilon(1e-11));
  }
  const Particles p = test::clustered_particle_set(16, 32.0, 99);
  const double ewald = test::ewald_potential_energy(p.pos, p.mass, 32.0);
  EnergyCheck check(Params::parse("[box]\nsize_mpc_h = 32.0\nparticles_per_side = 16\n[gravity]\npm_grid_side = 64\n"
                                  "softening_over_spacing = 0.0\n[gpu]\nbackend = \"cuda\"\n", "energy_cuda.toml"));
  const double w = check.potential(p).total();
  std::printf("aW with the pair sum on the GPU %.8e, Ewald %.8e (%.1e)\n", w, ewald, w / ewald - 1);
  CHECK(std::abs(w / ewald - 1) < 1e-5);
}

TEST_CASE("a short run on the CUDA step engine keeps the Layzer-Irvine residual small") {
  test::require_gpu_or_skip();
  test::ScratchDir dir("energy_cuda_run");
  const Params params = Params::parse(
      "[box]\nsize_mpc_h = 32.0\nparticles_per_side = 32\n[ic]\nz_init = 19.0\nseed = 5\n"
      "[time]\nz_final = 2.0\noutput_redshifts = [2.0]\n[analysis]\npk = false\nfof = false\nenergy_check_every = 8\n"
      "[gpu]\nbackend = \"cuda\"\n[output]\nsnapshots = false\ndirectory = \"" + dir.path() + "\"\n",
      "energy_cuda_run.toml");
  Simulation sim(params);
  const RunSummary summary = sim.run();
  const EnergyBudget& b = sim.state().energy;
  REQUIRE(b.started == 1);
  const Particles& p = sim.particles();
  const double a = summary.a_final;
  double sum_p2 = 0;
  for (const Vec3d& m : p.mom) sum_p2 += norm2(m);
  const double ak = 0.5 * p.mass * sum_p2 / a;
  EnergyCheck check(params);
  const double aw = check.potential(p).total();
  const double residual = (ak + aw + b.k_integral - (b.ak_start + b.aw_start)) / std::abs(aw);
  std::printf("CUDA engine, z = 19 -> 2 in %lld steps: aK %.5e, aW %.5e, int K da %.5e; Layzer-Irvine residual %.3e\n",
              static_cast<long long>(summary.steps), ak, aw, b.k_integral, residual);
  CHECK(aw < 0);
  CHECK(std::abs(residual) < 5e-3);
}
