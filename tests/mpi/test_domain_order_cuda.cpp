// The CUDA engine's domain update over ranks (its subtree order computed on the device,
// gpu/subtree_order_cuda.cuh) against the host engine's (OrbTree::subtree_order_by_group):
// after the first force computation, which updates the domains of both from the same
// positions with no work measured yet, every rank holds the same particles in the same order,
// id for id and position for position. Some x coordinates are equal (the lexicographic
// tie-break), no two positions are. Returns 77 (skipped) on every rank unless every rank has
// a usable GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "core/comm.hpp"
#include "core/params.hpp"
#include "gpu/step_engine_cuda.hpp"
#include "integrate/host_engine.hpp"
#include "support/clustered_particles.hpp"
#include "support/gpu_ranks.hpp"
#include "support/rank_shares.hpp"

using orbis::Comm;

namespace {

orbis::Params engine_params(const char* backend) {
  // d = 6 (64 top nodes of ~216 particles), leaves of at most 8: subtrees of several levels.
  return orbis::Params::parse(
      std::string("[box]\nsize_mpc_h = 100.0\nparticles_per_side = 24\n[gpu]\nbackend = \"") + backend +
          "\"\np2p_precision = \"double\"\ntree_rebuild_every = 1\n"
          "[gravity]\nsolver = \"treepm\"\nrs_over_cell = 1.25\nr_cut_over_rs = 4.5\ntop_node_particles = 216\n"
          "max_leaf = 8\n",
      "domain_order_cuda.toml");
}

}  // namespace

TEST_CASE("the CUDA engine's domain update orders each rank's particles as the host engine's") {
  const Comm world = Comm::world();
  const int device = orbis::test::rank_gpu_or_skip(world);
  orbis::Particles all = orbis::test::clustered_particle_set(24, 100.0, 17);
  for (std::size_t i = 0; i < all.size(); i += 5) all.pos[i].x = std::floor(all.pos[i].x);   // ties on x
  const orbis::Particles mine = orbis::test::strided_share(all, world);
  orbis::HostStepEngine host(engine_params("cpu"), world);
  orbis::CudaStepEngine cuda(engine_params("cuda"), device, world);
  host.load(mine);
  cuda.load(mine);
  orbis::ForceStats host_stats, cuda_stats;
  host.compute_forces(true, 0, host_stats);
  cuda.compute_forces(true, 0, cuda_stats);
  const orbis::Particles& a = host.particles();
  const orbis::Particles& b = cuda.particles();
  CHECK(world.sum<std::uint64_t>(a.size()) == all.size());
  CHECK(b.id == a.id);
  CHECK((b.pos.size() == a.pos.size() &&
         std::memcmp(b.pos.data(), a.pos.data(), a.size() * sizeof(orbis::Vec3d)) == 0));
}
