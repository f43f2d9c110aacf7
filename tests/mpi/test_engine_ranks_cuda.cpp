// The CUDA step engine across ranks (each rank's particles on its GPU, in the rank domains of
// the global ORB tree's top nodes; the short range on each rank's forest of own and ghost
// subtrees on the device; the long-range PM with its particles and x slabs on the GPUs,
// gpu/pm_cuda_ranks.hpp) against the same engine on one rank (Comm::self(), every particle,
// the one-GPU PM), matched by particle id:
// the forces of a PM step, of block sub-steps on the refitted forest, of one after a drift
// that makes the ranks choose their ghosts again, and of the next PM step after a kick and a
// drift that move particles between domains (migration); and the reductions over the ranks.
// The ghosts are refreshed on the device (gpu/ghost_exchange_cuda.cuh; bit for bit the host
// path's: tests/mpi/test_ghost_exchange_cuda).
// All ranks share the machine's GPUs (local rank modulo devices, as the factory chooses).
//
// Bar. Each rank's forest holds the serial tree's depth-d subtrees and the walk splits every
// node above depth d, so both compute the same sums in another order; with double P2P and a
// double mesh (the PMs differ only in the transforms' rounding, ~1e-15 in double) they agree
// to ~1e-10 of each force (the host engine's equivalent measures 2e-14 to 7e-13). The bar is
// issue #17's 1e-6 of each particle's force. Both engines build their tree at every PM step
// ([gpu] tree_rebuild_every = 1: over ranks a building PM step is where the domains update
// and particles migrate) and refit it at the sub-steps. The rms momentum is an exact integer
// sum on both, so it is compared for equality. Returns 77 (skipped) on every rank unless
// every rank has a usable GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/parallel.hpp"
#include "core/params.hpp"
#include "fmm/p2p.hpp"
#include "fmm/p2p_cuda_factory.hpp"
#include "gpu/step_engine_cuda.hpp"
#include "support/clustered_particles.hpp"
#include "support/rank_shares.hpp"
#include "support/gpu_ranks.hpp"

using orbis::Comm;
using orbis::Vec3d;

namespace {


orbis::Params engine_params() {
  // d = 6 (64 top nodes of 64 particles), so that 3 ranks hold several each.
  return orbis::Params::parse(
      "[box]\nsize_mpc_h = 100.0\nparticles_per_side = 16\n"
      "[gpu]\nbackend = \"cuda\"\np2p_precision = \"double\"\ntree_rebuild_every = 1\n"
      "[gravity]\nsolver = \"treepm\"\nrs_over_cell = 1.25\nr_cut_over_rs = 4.5\ntop_node_particles = 64\n"
      "pm_mesh_precision = \"double\"\n",
      "engine_ranks_cuda.toml");
}

// The largest relative force difference |g - g_ref| / |g_ref| of any particle (by id) over
// every rank; the reference holds all particles in id order.
double largest_difference(orbis::StepEngine& engine, orbis::StepEngine& reference, const Comm& comm) {
  const orbis::Particles& p = engine.particles();
  const std::vector<Vec3d>& g = engine.accelerations();
  const orbis::Particles& rp = reference.particles();
  const std::vector<Vec3d>& ref = reference.accelerations();
  double worst = 0;
  for (std::size_t q = 0; q < p.size(); ++q) {
    const auto it = std::lower_bound(rp.id.begin(), rp.id.end(), p.id[q]);
    if (it == rp.id.end() || *it != p.id[q]) {   // not a particle of the run (no REQUIRE: a collective follows)
      worst = HUGE_VAL;
      continue;
    }
    const std::size_t i = static_cast<std::size_t>(it - rp.id.begin());
    worst = std::max(worst, orbis::norm(g[q] - ref[i]) / orbis::norm(ref[i]));
  }
  return comm.max(worst);
}

}  // namespace

TEST_CASE("the CUDA engine over ranks: forces, sub-steps, migration and reductions equal the one-rank CUDA engine's") {
  const Comm world = Comm::world();
  const int device = orbis::test::rank_gpu_or_skip(world);
  orbis::Particles all = orbis::test::clustered_particle_set(16, 100.0, 99);
  all.time_bin.resize(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    all.mom[i] = Vec3d{std::sin(0.1 * i), std::cos(0.3 * i), 0.2} * 300.0;
    all.time_bin[i] = static_cast<std::uint8_t>(all.id[i] % 3);
  }
  REQUIRE(std::is_sorted(all.id.begin(), all.id.end()));
  const orbis::Params params = engine_params();
  orbis::CudaStepEngine reference(params, device, Comm::self());
  orbis::CudaStepEngine engine(params, device, world);
  MESSAGE(engine.describe());
  // Particle i starts on rank i mod P, whatever its domain: the first PM step migrates most.
  const orbis::Particles mine = orbis::test::strided_share(all, world);
  reference.load(all);
  engine.load(mine);
  // The momenta are the loaded ones on both: the exact sums give the same bits.
  CHECK(engine.rms_momentum() == reference.rms_momentum());

  // (drift factor, long range, lowest active bin): a PM step; sub-steps after small drifts
  // (the ghosts refreshed, the forest refitted); one after a drift of ~4.8 Mpc/h, beyond
  // r_cut kGhostMargin / (2 sqrt 3) = 2.6 Mpc/h (the ghosts chosen again from the nodes'
  // current boxes); the next PM step (the domains updated: particles migrate).
  struct Step {
    double drift;
    bool long_range;
    int min_bin;
  };
  const Step steps[] = {{0, true, 0}, {1e-4, false, 2}, {1e-4, false, 1}, {1.6e-2, false, 2}, {1e-4, false, 1},
                        {1e-4, true, 0}};
  int k = 0;
  for (const Step& step : steps) {
    for (orbis::CudaStepEngine* e : {&reference, &engine}) {
      if (step.drift > 0) e->drift(step.drift);
      orbis::ForceStats s;
      e->compute_forces(step.long_range, step.min_bin, s);
    }
    const double worst = largest_difference(engine, reference, world);
    const std::uint64_t bus = world.sum<std::uint64_t>(engine.ghost_bus_bytes());
    MESSAGE("step " << k << " (long range " << step.long_range << ", min bin " << step.min_bin << "), "
                    << world.size() << " ranks: largest relative force difference " << worst << "; ghosts' bytes "
                    << "over the ranks' buses " << bus);
    CHECK(worst < 1e-6);
    // Over ranks the ghosts are refreshed on the device: some bytes (boxes, ghosts) cross.
    CHECK((bus > 0) == (world.size() > 1));
    CHECK(world.sum<std::uint64_t>(engine.particles().size()) == all.size());
    ++k;
  }
  if (world.size() > 1) CHECK(!engine.domain_state().empty());
  CHECK(engine.max_acceleration() == doctest::Approx(reference.max_acceleration()).epsilon(1e-6));

  // A kick and a drift far enough to move particles across domains, and the next PM step.
  orbis::KickPlan kick;
  kick.long_range = 2e-3;
  kick.min_active_bin = 0;
  kick.short_range.fill(2e-3);
  for (orbis::CudaStepEngine* e : {&reference, &engine}) {
    e->kick(kick);
    e->drift(4e-3);
    orbis::ForceStats s;
    e->compute_forces(true, 0, s);
  }
  const double after = largest_difference(engine, reference, world);
  MESSAGE("after a kick, a drift and a PM step, " << world.size() << " ranks: largest relative force difference "
                                                  << after);
  CHECK(after < 1e-6);
  CHECK(world.sum<std::uint64_t>(engine.particles().size()) == all.size());
  // Every particle once, on some rank.
  std::vector<std::uint64_t> ids = world.allgatherv(engine.particles().id);
  std::sort(ids.begin(), ids.end());
  CHECK(ids == all.id);
  // Momenta kicked by (nearly) the same forces: rms and total to rounding.
  CHECK(engine.rms_momentum() == doctest::Approx(reference.rms_momentum()).epsilon(1e-10));
  const Vec3d p = engine.total_momentum(), p_ref = reference.total_momentum();
  for (int d = 0; d < 3; ++d) CHECK(p[d] == doctest::Approx(p_ref[d]).epsilon(1e-9).scale(300.0 * all.size()));
  // The same forces, so the same bins: each bin's count summed over the ranks.
  orbis::BinRule rule;
  rule.max_bin = 6;
  rule.acc_bin0 = 0.3 * reference.max_acceleration();
  CHECK(engine.assign_bins(rule) == reference.assign_bins(rule));
}
