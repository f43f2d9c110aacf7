// The communicator's collectives on 1, 2 and 3 ranks: every result is checked against what
// it must be from the ranks' inputs, which each rank can compute alone.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>
#include <vector>

#include "core/comm.hpp"
#include "core/vec3.hpp"
#include "support/mpi_scratch.hpp"
#include "fmm/p2p.hpp"
#if defined(ORBIS_HAVE_CUDA)
#include "fmm/p2p_cuda_factory.hpp"
#endif

using orbis::Comm;

TEST_CASE("idle_barrier: no rank leaves before the last has come") {
  const Comm world = Comm::world();
  const orbis::test::SharedScratchDir dir("idle_barrier", world);
  // The last rank comes late and leaves a mark first; every rank must see the mark after.
  for (int round = 0; round < 3; ++round) {
    const std::string mark = dir.file("mark_" + std::to_string(round));
    if (world.rank() == world.size() - 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::ofstream(mark) << round;
    }
    world.idle_barrier();
    CHECK(std::filesystem::exists(mark));
  }
}

TEST_CASE("reductions, scans and gathers") {
  const Comm world = Comm::world();
  const int r = world.rank(), p = world.size();
  CHECK(world.sum(r + 1) == p * (p + 1) / 2);
  CHECK(world.max(static_cast<double>(r)) == p - 1);
  CHECK(world.min(std::int64_t{10} - r) == 10 - (p - 1));
  CHECK(world.sum(std::uint64_t{1} << 40) == (std::uint64_t{1} << 40) * p);
  // 32-bit unsigned counts (the top tree's histograms): values past 2^31 stay unsigned.
  std::vector<std::uint32_t> counts{std::uint32_t{1} << 30, static_cast<std::uint32_t>(r), 7u};
  world.reduce(counts, Comm::Op::sum);
  CHECK(counts[0] == static_cast<std::uint32_t>((std::uint64_t{1} << 30) * p % (std::uint64_t{1} << 32)));
  CHECK(counts[1] == static_cast<std::uint32_t>(p * (p - 1) / 2));
  CHECK(counts[2] == 7u * static_cast<std::uint32_t>(p));
  CHECK(world.max(std::uint32_t{3000000000u} - static_cast<std::uint32_t>(r)) == 3000000000u);
  CHECK(world.exclusive_sum(std::uint64_t(r + 1)) == std::uint64_t(r * (r + 1) / 2));
  CHECK(world.any(r == p - 1));
  CHECK_FALSE(world.all(r == 0 && p > 1));

  std::vector<double> v{1.0 * r, 2.0, -1.0 * r};
  world.reduce(v, Comm::Op::sum);
  CHECK(v[0] == p * (p - 1) / 2.0);
  CHECK(v[1] == 2.0 * p);

  const auto ranks = world.allgather(r * 10);
  REQUIRE(ranks.size() == static_cast<std::size_t>(p));
  for (int q = 0; q < p; ++q) CHECK(ranks[q] == q * 10);

  // Rank q contributes q elements (rank 0 none): the concatenation in rank order.
  std::vector<orbis::Vec3d> mine(r);
  for (int k = 0; k < r; ++k) mine[k] = {1.0 * r, 1.0 * k, 0.5};
  const auto all = world.allgatherv(mine);
  const auto at_root = world.gatherv(mine, 0);
  CHECK(all.size() == static_cast<std::size_t>(p * (p - 1) / 2));
  CHECK(at_root.size() == (r == 0 ? all.size() : 0));
  std::size_t at = 0;
  for (int q = 0; q < p; ++q)
    for (int k = 0; k < q; ++k, ++at) {
      CHECK(all[at].x == q);
      CHECK(all[at].y == k);
      if (r == 0) CHECK(at_root[at].x == q);
    }

  std::vector<int> values;
  std::string text;
  if (r == 0) values = {3, 1, 4, 1, 5}, text = "orbis";
  world.broadcast(values);
  world.broadcast(text);
  CHECK(values == std::vector<int>{3, 1, 4, 1, 5});
  CHECK(text == "orbis");
}

TEST_CASE("alltoallv: each rank sends (dest + 1) * (rank + 1) values to each destination") {
  const Comm world = Comm::world();
  const int r = world.rank(), p = world.size();
  std::vector<std::size_t> counts(p);
  std::vector<std::int64_t> send;
  for (int d = 0; d < p; ++d) {
    counts[d] = static_cast<std::size_t>((d + 1) * (r + 1)) - (d == 0 && r == 0 ? 1 : 0);   // one empty-ish
    for (std::size_t k = 0; k < counts[d]; ++k) send.push_back(1000 * r + 100 * d + static_cast<std::int64_t>(k));
  }
  std::vector<std::size_t> recv_counts;
  const auto got = world.alltoallv(send, counts, &recv_counts);
  std::size_t at = 0;
  for (int s = 0; s < p; ++s) {
    const std::size_t expected = static_cast<std::size_t>((r + 1) * (s + 1)) - (r == 0 && s == 0 ? 1 : 0);
    CHECK(recv_counts[s] == expected);
    for (std::size_t k = 0; k < expected; ++k, ++at) CHECK(got[at] == 1000 * s + 100 * r + static_cast<std::int64_t>(k));
  }
  CHECK(at == got.size());
  if (p > 1) CHECK(world.stats().calls > 0);   // one rank: copies, no MPI call
  // alltoallv_into: the same values after what the buffer keeps, whether it grows or shrinks.
  for (std::size_t keep : {std::size_t{3}, std::size_t{0}, std::size_t{2}}) {
    std::vector<std::int64_t> into{-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12, -13, -14, -15, -16, -17,
                                   -18, -19, -20, -21, -22, -23, -24, -25, -26, -27, -28, -29, -30, -31, -32};
    if (keep == 0) into.clear();
    world.alltoallv_into(send, counts, into, keep);
    REQUIRE(into.size() == keep + got.size());
    for (std::size_t k = 0; k < keep; ++k) CHECK(into[k] == -static_cast<std::int64_t>(k + 1));
    CHECK(std::equal(got.begin(), got.end(), into.begin() + static_cast<std::ptrdiff_t>(keep)));
  }
}

TEST_CASE("split: odd and even ranks form their own communicators; self is one rank") {
  const Comm world = Comm::world();
  const Comm half = world.split(world.rank() % 2, world.rank());
  CHECK(half.size() == (world.size() + 1 - world.rank() % 2) / 2);
  CHECK(half.rank() == world.rank() / 2);
  CHECK(half.sum(1) == half.size());
  const Comm self = Comm::self();
  CHECK(self.size() == 1);
  CHECK(self.rank() == 0);
  CHECK(self.sum(7) == 7);
}

// The test's ranks run on one machine (mpirun --oversubscribe), so the node ranks are the
// ranks; each GPU choice follows from them ([gpu] device = -1: node rank modulo devices).
TEST_CASE("node ranks: distinct on one node, and the rank's GPU follows from them") {
  const Comm world = Comm::world();
  const int node = world.node_rank();
  CHECK(node == world.rank());
  const std::vector<int> all = world.allgather(node);
  for (int r = 0; r < world.size(); ++r) CHECK(all[static_cast<std::size_t>(r)] == r);
  CHECK(Comm::self().node_rank() == 0);
  // The tests' ranks share one node: the node holds them all (CUDA IPC's condition).
  CHECK(world.node_size() == world.size());
  CHECK(Comm::self().node_size() == 1);
  CHECK(world.active());
  CHECK(orbis::gpu_device_for_rank(3, world) == 3);   // an explicit device: every rank takes it
  const int device = orbis::gpu_device_for_rank(-1, world);
#if defined(ORBIS_HAVE_CUDA)
  const int count = orbis::cuda_device_count();
  CHECK(device == (count > 0 ? node % count : 0));
#else
  CHECK(device == 0);
#endif
}
