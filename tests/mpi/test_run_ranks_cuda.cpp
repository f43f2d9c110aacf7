// A short TreePM run with [gpu] backend = "cuda" on several ranks (the CUDA step engine on
// every rank: its particles on its GPU, the ranks sharing the machine's GPUs) against the same
// run on one rank (the one-rank CUDA engine), as tests/mpi/test_run_ranks does for the CPU.
// Rank 0 first runs the reference alone (Comm::self()), then every rank runs the distributed
// one; the default settings (float P2P and mesh, theta 0.5, block steps, the default tree
// policy, which both engines follow with the same pair counts) from z = 1 to z = 0.5, but
// for tree_max_refits = 0: over ranks sub-steps always refit (only a PM step updates the
// domains), so the one-rank run must not build at a sub-step either; and the mesh, set (the
// automatic choice has its own case below).
//
// Bar. Not bit for bit as on the CPU: the one-rank engine's PM is the one-GPU cuFFT PM and the
// ranks' is the host PM with cuFFT slab transforms, whose float transforms round differently
// (~2e-7 of the force, tests/mpi/test_pm_slabs_cuda), and the device P2P sums a forest's
// sources in another order than the whole tree's (float, ~1e-7). Over this stretch (~10 PM
// steps, displacements of a few Mpc/h) those differences move particles by ~1e-7 Mpc/h, grown
// chaotically inside haloes by at most a few hundred: the final positions are asked to agree
// to 1e-6 of the box (6.4e-5 Mpc/h) for every particle, and the FoF catalogues to have the
// same number of haloes with the same lengths. The run's energy checks take W's mesh term from
// the force pass the run loop announced them to, on every rank. Skipped (77) unless every rank
// has a GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/comm.hpp"
#include "core/parallel.hpp"
#include "core/params.hpp"
#include "fmm/p2p.hpp"
#include "fmm/p2p_cuda_factory.hpp"
#include "integrate/pm_mesh_choice.hpp"
#include "integrate/simulation.hpp"
#include "io/catalogue.hpp"
#include "io/snapshot.hpp"
#include "support/gpu_ranks.hpp"
#include "support/mpi_scratch.hpp"

using orbis::Comm;

namespace {


orbis::Params run_params(const std::string& directory) {
  return orbis::Params::parse(
      "[box]\nsize_mpc_h = 64.0\nparticles_per_side = 16\n[ic]\nz_init = 1.0\nseed = 4242\n"
      "[gpu]\nbackend = \"cuda\"\ntree_max_refits = 0\n[gravity]\ntop_node_particles = 64\npm_grid_side = 32\n"
      "[time]\nz_final = 0.5\noutput_redshifts = [0.5]\n"
      "[analysis]\nfof_min_members = 8\n[output]\ndirectory = \"" + directory + "\"\n",
      "run_ranks_cuda.toml");
}

}  // namespace

TEST_CASE("a short TreePM run with the CUDA engine on several ranks ends where the one-rank CUDA run ends") {
  const Comm world = Comm::world();
  orbis::test::rank_gpu_or_skip(world);
  const orbis::test::SharedScratchDir dir("run_ranks_cuda", world);
  const std::string one = dir.file("one"), many = dir.file("many");
  std::int64_t steps_one = 0;
  if (world.is_root()) steps_one = orbis::Simulation(run_params(one), {}, Comm::self()).run().steps;
  world.barrier();
  orbis::Simulation run_many(run_params(many), {}, world);
  const orbis::RunSummary summary = run_many.run();
  // Its energy checks (the start, the end) took W's mesh term from the force pass before, on
  // every rank.
  REQUIRE(!run_many.energy_checks().empty());
  CHECK(world.all(run_many.energy_checks_from_forces() ==
                  static_cast<std::int64_t>(run_many.energy_checks().size())));
  if (!world.is_root()) return;
  MESSAGE(world.size() << " ranks: " << summary.steps << " steps (one rank: " << steps_one << ")");
  CHECK(summary.steps > 2);

  const orbis::Snapshot a = orbis::read_snapshot(one + "/snapshot_000.hdf5");
  const orbis::Snapshot b = orbis::read_snapshot(many + "/snapshot_000.hdf5");
  REQUIRE(a.particles.size() == 16u * 16u * 16u);
  REQUIRE(b.particles.size() == a.particles.size());
  CHECK(a.particles.id == b.particles.id);   // both in id order
  double worst = 0;
  for (std::size_t i = 0; i < a.particles.size(); ++i)
    for (int k = 0; k < 3; ++k) {
      const double d = std::abs(a.particles.pos[i][k] - b.particles.pos[i][k]);
      worst = std::max(worst, std::min(d, 64.0 - d));   // nearest image
    }
  MESSAGE(world.size() << " ranks: largest position difference " << worst << " Mpc/h (" << worst / 64.0
                       << " of the box)");
  CHECK(worst < 1e-6 * 64.0);

  const orbis::GroupCatalogue ca = orbis::read_catalogue(one + "/fof_tab_000.hdf5");
  const orbis::GroupCatalogue cb = orbis::read_catalogue(many + "/fof_tab_000.hdf5");
  MESSAGE(ca.size() << " haloes on one rank, " << cb.size() << " on " << world.size());
  CHECK(ca.size() > 0);
  CHECK(ca.size() == cb.size());
  CHECK(ca.len == cb.len);
}

TEST_CASE("the automatic mesh is the same on one rank and on several: 3N where the CUDA engine's plan fits") {
  const Comm world = Comm::world();
  orbis::test::rank_gpu_or_skip(world);
  const orbis::Params params = orbis::Params::parse(
      "[box]\nsize_mpc_h = 64.0\nparticles_per_side = 16\n[gpu]\nbackend = \"cuda\"\n", "auto_mesh_ranks.toml");
  const orbis::PmMeshChoice many = orbis::choose_pm_grid_side(params, world);
  const orbis::PmMeshChoice one = orbis::choose_pm_grid_side(params, Comm::self());
  MESSAGE(world.size() << " ranks: " << many.grid_side << " (" << many.why << "); one rank: " << one.grid_side);
  CHECK(many.grid_side == 48);
  CHECK(one.grid_side == many.grid_side);
  // A memory limit below the plan: 2N on every rank alike.
  orbis::Params tight = params;
  tight.set("gpu.memory_limit_gib", orbis::ParamValue(0.01));
  CHECK(orbis::choose_pm_grid_side(tight, world).grid_side == 32);
}
