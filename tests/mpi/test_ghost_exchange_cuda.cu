// The ghosts refreshed on the device (gpu/ghost_exchange_cuda.cuh, what the CUDA step engine
// does over ranks) against RankDomains::with_ghosts from host positions (the reference,
// tested against brute force in tests/mpi/test_domains), over a run of moves: after an
// update (chosen from the top tree's boxes), small moves (kept, refreshed), a large move
// (chosen again from the gathered boxes), particles across a face of the box, the next
// update. Two RankDomains follow the same particles, one fed the host positions, one the
// device's. At every call: the own groups' boxes from the device equal a brute-force loop's,
// the decision is the same, and the forest's sources (own particles, then the ghosts, x | y |
// z blocks) hold bit for bit with_ghosts()'s positions in the same order, with the same
// groups: the forest, and so the forces, are those of the host path. The bytes over the bus
// are the boxes and the ghosts' positions (the send list at a choice), never the whole set.
// Returns 77 (skipped) unless every rank has a usable GPU; one rank has no ghosts.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include <cuda_runtime.h>

#include "core/comm.hpp"
#include "domain/rank_domains.hpp"
#include "gpu/cuda_check.cuh"
#include "gpu/device_buffer.cuh"
#include "gpu/ghost_exchange_cuda.cuh"
#include "support/clustered_particles.hpp"
#include "support/gpu_ranks.hpp"

using orbis::Comm;
using orbis::Vec3d;

namespace {

// x | y | z blocks of the positions.
std::vector<double> blocks_of(const std::vector<Vec3d>& pos) {
  const std::size_t n = pos.size();
  std::vector<double> out(3 * n);
  for (std::size_t i = 0; i < n; ++i)
    for (int d = 0; d < 3; ++d) out[d * n + i] = pos[i][d];
  return out;
}

}  // namespace

TEST_CASE("ghosts refreshed on the device: with_ghosts()'s decision, groups and positions, bit for bit") {
  const Comm world = Comm::world();
  const int device = orbis::test::rank_gpu_or_skip(world);
  if (world.size() == 1) return;   // no ghosts on one rank
  ORBIS_CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  ORBIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const double box = 60.0;
  const orbis::Particles all = orbis::test::clustered_particle_set(11, box, 77);
  // The transport of [gpu] rank_exchange's default (CUDA IPC with the ranks on one node, as
  // in these tests) and the staged one, forced.
  for (const bool staged : {false, true})
  for (double r_cut : {2.0, 6.0}) {
    orbis::Particles mine;
    mine.mass = all.mass;
    for (std::size_t i = 0; i < all.size(); ++i)
      if (static_cast<int>((7 * i) % static_cast<std::size_t>(world.size())) == world.rank()) {
        mine.pos.push_back(all.pos[i]);
        mine.mom.push_back(all.mom[i]);
        mine.id.push_back(all.id[i]);
        mine.time_bin.push_back(0);
      }
    orbis::RankDomains reference(box, 8, 5, world), on_device(box, 8, 5, world);
    orbis::gpu::DeviceGhosts ghosts(
        world, staged ? std::make_unique<orbis::gpu::StagedGhostTransport>(world) : nullptr);
    orbis::gpu::DeviceArray<double> pos, sources, scratch;
    const auto lend = [&scratch](std::size_t doubles) {
      scratch.ensure(doubles);
      return scratch.data();
    };
    int kept = 0, chosen = 0;
    for (int round = 0; round < 10; ++round) {
      INFO(world.size() << " ranks, r_cut " << r_cut << ", round " << round << (staged ? ", staged" : ""));
      if (round % 5 == 0) {
        orbis::Particles copy = mine;
        reference.update(mine, 1.0 + world.rank());
        on_device.update(copy, 1.0 + world.rank());
      }
      bool expected_same = false, same = false;
      const std::vector<Vec3d> expected = reference.with_ghosts(mine.pos, r_cut, &expected_same);

      const std::size_t n = mine.size();
      const std::vector<double> host_blocks = blocks_of(mine.pos);
      pos.ensure(3 * n + 1);
      pos.upload(host_blocks.data(), 3 * n);
      const std::size_t n_sources = ghosts.refresh(on_device, pos.data(), n, r_cut, sources, lend, &same, stream);
      std::vector<double> got(3 * n_sources);
      if (n_sources > 0)
        ORBIS_CUDA_CHECK(cudaMemcpy(got.data(), sources.data(), got.size() * sizeof(double), cudaMemcpyDeviceToHost));

      // The own groups' boxes, member by member.
      const std::vector<std::uint32_t>& own = on_device.own_offsets();
      bool boxes_equal = ghosts.own_lo().size() == own.size() - 1;
      for (std::size_t g = 0; boxes_equal && g + 1 < own.size(); ++g) {
        Vec3d lo{HUGE_VAL, HUGE_VAL, HUGE_VAL}, hi{-HUGE_VAL, -HUGE_VAL, -HUGE_VAL};
        for (std::uint32_t i = own[g]; i < own[g + 1]; ++i)
          for (int d = 0; d < 3; ++d) {
            lo[d] = std::min(lo[d], mine.pos[i][d]);
            hi[d] = std::max(hi[d], mine.pos[i][d]);
          }
        for (int d = 0; d < 3; ++d)
          boxes_equal = boxes_equal && ghosts.own_lo()[g][d] == lo[d] && ghosts.own_hi()[g][d] == hi[d];
      }
      CHECK(boxes_equal);
      CHECK(same == expected_same);
      CHECK(on_device.report().rechosen == reference.report().rechosen);
      CHECK(on_device.group_offsets() == reference.group_offsets());
      CHECK(on_device.groups() == reference.groups());
      CHECK(n_sources == expected.size());
      const std::vector<double> want = blocks_of(expected);
      CHECK((want.size() == got.size() && std::memcmp(want.data(), got.data(), got.size() * sizeof(double)) == 0));
      // Over the bus: the boxes, the ghosts sent and received (staged only: CUDA IPC copies
      // them device to device), the send list at a choice.
      const orbis::gpu::GhostTraffic& t = ghosts.traffic();
      const bool over_bus = !ghosts.transport()->peer_to_peer();
      // One node, one GPU: IPC unless forced (here or by ORBIS_RANK_EXCHANGE=staged).
      CHECK(over_bus == (staged || orbis::gpu::rank_exchange() == orbis::gpu::RankExchange::staged));
      const std::size_t n_recv = n_sources - n, n_sent = on_device.report().ghost_bytes_sent / sizeof(Vec3d);
      CHECK(t.boxes_down == 6 * sizeof(double) * (own.size() - 1));
      CHECK(t.positions_up == (over_bus ? 3 * sizeof(double) * n_recv : 0));
      CHECK(t.positions_down == (over_bus ? 3 * sizeof(double) * n_sent : 0));
      CHECK(t.routes_up == (same ? 0 : sizeof(std::uint32_t) * n_sent));
      CHECK(on_device.report().ghost_bytes_received == 3 * sizeof(double) * n_recv);
      (on_device.report().rechosen ? chosen : kept) += 1;   // chosen again may find the same set

      // Small moves, a large one after the second call of each update, and at round 7 the
      // particles near the upper y face across it.
      const double step = round % 5 == 1 ? 0.15 * r_cut : 0.002 * r_cut;
      for (std::size_t q = 0; q < mine.size(); ++q) {
        Vec3d& x = mine.pos[q];
        x.x = std::fmod(x.x + step * std::sin(0.37 * static_cast<double>(mine.id[q]) + round) + box, box);
        x.z = std::fmod(x.z + step * std::cos(0.11 * static_cast<double>(mine.id[q])) + box, box);
        if (round == 7 && x.y > box - 0.3) x.y = 0.01;
      }
    }
    MESSAGE(world.size() << " ranks, r_cut " << r_cut << ": kept " << kept << ", chosen " << chosen
                         << "; transport: " << ghosts.transport()->describe());
    CHECK(kept >= 4);
    CHECK(chosen >= 4);
  }
  ORBIS_CUDA_CHECK(cudaStreamDestroy(stream));
}
