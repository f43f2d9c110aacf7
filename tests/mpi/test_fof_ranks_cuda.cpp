// Friends-of-friends across ranks with each rank's particles and ghosts linked on its GPU
// (issue #29) against the host finder over all the particles on one rank (an independent
// path: no ranks, no ghosts, no device), on the clustered set with a filament across the
// periodic boundary and through every x slab (tests/support/fof_rank_sets.hpp):
// - gpu::fof_labels_with_ghosts as the fof::LocalLinker of find_groups_across_ranks, the own
//   positions on the device and drifted just outside the box near the faces (wrapped on the
//   device as they are copied): the same local labels as the host linker's, bit for bit, and
//   the same groups, members, order and member positions as the one-rank finder's and a
//   brute-force search's, for slabs, an empty rank and a round-robin split;
// - the CUDA step engine over ranks (StepEngine::fof_labels_with_ghosts through
//   engine_fof_links, as a run's output calls it): every rank links on its GPU, and the halo
//   catalogue made from its links is the one-rank host catalogue of the engine's particles,
//   bit for bit, right after load (round-robin shares) and after a PM step (the particles in
//   their domains) and a drift (the engine's device positions then lie outside the box near
//   the faces until the next tree build: wrapped as they are copied for linking).
// All ranks share the machine's GPUs (local rank modulo devices); 77 (skipped) on every rank
// unless every rank has one.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/fof_ranks.hpp"
#include "analysis/halo_catalogue.hpp"
#include "core/comm.hpp"
#include "core/params.hpp"
#include "gpu/fof_cuda.cuh"
#include "gpu/step_engine_cuda.hpp"
#include "integrate/outputs.hpp"
#include "support/device_positions.hpp"
#include "support/fof_labels.hpp"
#include "support/fof_rank_sets.hpp"
#include "support/fof_samples.hpp"
#include "support/gpu_ranks.hpp"

using namespace orbis;
using testing::kFofBox;
using testing::Split;

using orbis::test::DevicePositions;

namespace {

// The device linker: own positions uploaded as the engine would hold them (unwrapped), the
// ghosts from the host.
std::vector<std::uint32_t> device_linker(const std::vector<Vec3d>& own, const std::vector<Vec3d>& ghosts, double box,
                                         double link) {
  const DevicePositions d(own);
  return gpu::fof_labels_with_ghosts(d.x(), d.y(), d.z(), own.size(), ghosts.data(), ghosts.size(), box, link,
                                     nullptr);
}

// Every rank's particles on every rank (the one-rank reference's input).
Particles gather_all(const Particles& mine, const Comm& comm) {
  Particles all;
  all.pos = comm.allgatherv(mine.pos);
  all.mom = comm.allgatherv(mine.mom);
  all.id = comm.allgatherv(mine.id);
  all.time_bin.assign(all.pos.size(), 0);
  all.mass = comm.max(mine.mass);
  return all;
}

Params engine_params() {
  return Params::parse(
      "[box]\nsize_mpc_h = 64.0\nparticles_per_side = 16\n"
      "[cosmology]\nomega_m = 0.3\nomega_lambda = 0.7\nh = 0.7\n"
      "[analysis]\nfof = true\nfof_min_members = 20\n"
      "[gpu]\nbackend = \"cuda\"\np2p_precision = \"double\"\ntree_rebuild_every = 1\n"
      "[gravity]\nsolver = \"treepm\"\nrs_over_cell = 1.25\nr_cut_over_rs = 4.5\ntop_node_particles = 64\n",
      "fof_ranks_cuda.toml");
}

}  // namespace

TEST_CASE("FoF across ranks on the GPUs: the device links give the one-rank host finder's groups") {
  const Comm world = Comm::world();
  const int device = test::rank_gpu_or_skip(world);
  REQUIRE(cudaSetDevice(device) == cudaSuccess);
  const std::uint32_t min_members = 20;
  const Particles drifted = testing::drifted_out_of_box(testing::fof_rank_set());
  const Particles inside = testing::wrapped_into_box(drifted);
  const double link = fof::linking_length(inside.size(), kFofBox, 0.2);
  const fof::FofGroups ref = fof::find_groups(fof::CellGrid(inside.pos, kFofBox, link), inside, min_members);
  const auto brute = testing::brute_force_fof(inside, kFofBox, link, min_members);
  REQUIRE(ref.size() == brute.size());
  REQUIRE(ref.size() >= 3);

  for (Split split : {Split::slabs, Split::empty_rank, Split::round_robin}) {
    INFO(world.size() << " ranks, split " << static_cast<int>(split));
    const Particles mine = testing::fof_share(drifted, split, world);
    const fof::LocalLinks links = fof::link_locally(mine, kFofBox, link, world, device_linker);
    // The device's decisions are the host linker's, bit for bit (the wraps too).
    CHECK(links.label == fof::link_on_host(mine.pos, links.ghosts.pos, kFofBox, link));
    CHECK(links.label.size() == mine.size() + links.ghosts.size());
    const fof::GatheredGroups got = fof::gather_groups(mine, links, min_members, world);
    MESSAGE(world.size() << " ranks, split " << static_cast<int>(split) << ": " << mine.size() << " particles and "
                         << links.ghosts.size() << " ghosts on rank " << world.rank() << ", " << got.merge_rounds
                         << " label rounds");
    if (!world.is_root()) continue;
    CHECK(testing::first_difference(got, ref, brute, inside) == "");
    CHECK(testing::member_position_difference(got, inside) == "");
  }
}

TEST_CASE("FoF across ranks on the GPUs: the CUDA engine's links make the one-rank host catalogue") {
  const Comm world = Comm::world();
  const int device = test::rank_gpu_or_skip(world);
  const Params params = engine_params();
  const double a = 0.6;
  Particles all = testing::fof_rank_set();
  all.time_bin.assign(all.size(), 0);
  CudaStepEngine engine(params, device, world);
  engine.load(testing::fof_share(all, Split::round_robin, world));

  const auto check_catalogue = [&](const char* when) {
    INFO(world.size() << " ranks, " << when);
    const std::optional<fof::LocalLinks> links = engine_fof_links(params, engine, world);
    const bool linked = links.has_value() && (!links->label.empty() || engine.particles().size() == 0);
    CHECK(world.all(linked));   // every rank on its GPU (the device has the memory)
    const Particles& mine = engine.particles();
    const GroupCatalogue got =
        halo::find_haloes_across_ranks(mine, kFofBox, a, params, world, links ? &*links : nullptr);
    const Particles now = gather_all(mine, world);
    if (!world.is_root()) return;
    const GroupCatalogue ref = halo::find_haloes(now, kFofBox, a, params);
    CHECK(ref.size() >= 3);
    CHECK(testing::catalogue_difference(got, ref) == "");
  };
  check_catalogue("round-robin shares after load");
  ForceStats stats;
  engine.compute_forces(true, 0, stats);   // the domains chosen, the particles migrated to them
  engine.drift(2e-3);                      // ~0.2 Mpc/h; some across the faces
  check_catalogue("the domains' shares after a PM step and a drift");
}
