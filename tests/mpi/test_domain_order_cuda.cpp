// The CUDA engine's domain update over ranks (with the particles on the device,
// gpu/domain_update_cuda.cuh) against the host's (RankDomains::update, OrbTree's subtree
// order): every rank holds the same particles in the same order, id for id and position for
// position, and the same momenta and time bins with them.
// - the first force computation, which updates the domains of both engines from the same
//   positions with no work measured yet: from a strided share (most particles migrate) and
//   from rank 0 holding every particle (the others start with none);
// - the next update, after a drift that moves a few particles across their groups' bounds
//   and some across the faces of the box: few migrants, the runs kept or rebuilt from the
//   work the engine measured; the reference is a RankDomains given the engine's runs.
// Some x coordinates are equal (the lexicographic tie-break), no two positions are. Returns
// 77 (skipped) on every rank unless every rank has a usable GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "core/comm.hpp"
#include "core/params.hpp"
#include "domain/rank_domains.hpp"
#include "gpu/step_engine_cuda.hpp"
#include "integrate/host_engine.hpp"
#include "integrate/kdk.hpp"
#include "support/clustered_particles.hpp"
#include "support/gpu_ranks.hpp"
#include "support/rank_shares.hpp"

using orbis::Comm;

namespace {

constexpr double kBox = 100.0;

orbis::Params engine_params(const char* backend) {
  // d = 6 (64 top nodes of ~216 particles), leaves of at most 8: subtrees of several levels.
  return orbis::Params::parse(
      std::string("[box]\nsize_mpc_h = 100.0\nparticles_per_side = 24\n[gpu]\nbackend = \"") + backend +
          "\"\np2p_precision = \"double\"\ntree_rebuild_every = 1\n"
          "[gravity]\nsolver = \"treepm\"\nrs_over_cell = 1.25\nr_cut_over_rs = 4.5\ntop_node_particles = 216\n"
          "max_leaf = 8\n",
      "domain_order_cuda.toml");
}

// The clustered set with ties on x, momenta of up to ~350 km/s (a drift of 0.01 moves a
// particle up to ~6 Mpc/h: a few percent of a 25 Mpc/h group) and time bins 0..3.
orbis::Particles test_particles() {
  orbis::Particles all = orbis::test::clustered_particle_set(24, kBox, 17);
  all.time_bin.resize(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i % 5 == 0) all.pos[i].x = std::floor(all.pos[i].x);
    all.mom[i] = {100.0 * (static_cast<double>(i % 7) - 3), 150.0 * (static_cast<double>(i % 5) - 2),
                  200.0 * (static_cast<double>(i % 3) - 1)};
    all.time_bin[i] = static_cast<std::uint8_t>(i % 4);
  }
  return all;
}

void check_same(const orbis::Particles& a, const orbis::Particles& b) {
  CHECK(b.id == a.id);
  CHECK(b.time_bin == a.time_bin);
  CHECK((b.pos.size() == a.pos.size() &&
         std::memcmp(b.pos.data(), a.pos.data(), a.size() * sizeof(orbis::Vec3d)) == 0));
  CHECK((b.mom.size() == a.mom.size() &&
         std::memcmp(b.mom.data(), a.mom.data(), a.size() * sizeof(orbis::Vec3d)) == 0));
}

// Both engines loaded with `mine` and their forces computed once: the same particles per rank.
void check_first_update(const orbis::Particles& mine, std::size_t total, int device, const Comm& world) {
  orbis::HostStepEngine host(engine_params("cpu"), world);
  orbis::CudaStepEngine cuda(engine_params("cuda"), device, world);
  host.load(mine);
  cuda.load(mine);
  orbis::ForceStats host_stats, cuda_stats;
  host.compute_forces(true, 0, host_stats);
  cuda.compute_forces(true, 0, cuda_stats);
  const orbis::Particles& a = host.particles();
  CHECK(world.sum<std::uint64_t>(a.size()) == total);
  check_same(a, cuda.particles());
}

}  // namespace

TEST_CASE("the CUDA engine's first domain update orders each rank's particles as the host engine's") {
  const Comm world = Comm::world();
  const int device = orbis::test::rank_gpu_or_skip(world);
  const orbis::Particles all = test_particles();
  SUBCASE("from a strided share") {
    check_first_update(orbis::test::strided_share(all, world), all.size(), device, world);
  }
  SUBCASE("from rank 0 holding them all") {
    orbis::Particles none;
    none.mass = all.mass;
    check_first_update(world.rank() == 0 ? all : none, all.size(), device, world);
  }
}

TEST_CASE("the CUDA engine's next domain update, after a drift, orders each rank's particles as the host's") {
  const Comm world = Comm::world();
  const int device = orbis::test::rank_gpu_or_skip(world);
  const orbis::Particles all = test_particles();
  orbis::HostStepEngine host(engine_params("cpu"), world);
  orbis::CudaStepEngine cuda(engine_params("cuda"), device, world);
  host.load(orbis::test::strided_share(all, world));
  cuda.load(orbis::test::strided_share(all, world));
  orbis::ForceStats host_stats, cuda_stats;
  host.compute_forces(true, 0, host_stats);
  cuda.compute_forces(true, 0, cuda_stats);
  check_same(host.particles(), cuda.particles());

  // The reference: the host's update of the same particles, drifted as the engine drifts
  // them (x + p f, wrapped into the box at the update: orbis::drift with the box gives the
  // same bits), with the engine's runs and the work it measured since its update.
  constexpr double kDrift = 0.01;
  orbis::Particles expected = cuda.particles();
  orbis::drift(expected.pos, expected.mom, kDrift, kBox);
  const orbis::RankDomains& host_domains = host.domains();
  orbis::RankDomains reference(kBox, host_domains.max_leaf(), host_domains.top_depth(), world);
  reference.restore(cuda.domain_state(), "the CUDA engine's domains");
  reference.update(expected, cuda_stats.p2p_interactions + cuda_stats.m2l_interactions);
  if (world.size() > 1) CHECK(world.sum(reference.report().migrated) > 0);

  cuda.drift(kDrift);
  orbis::ForceStats next_stats;
  cuda.compute_forces(true, 0, next_stats);
  CHECK(world.sum<std::uint64_t>(expected.size()) == all.size());
  check_same(expected, cuda.particles());
}
