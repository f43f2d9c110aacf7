// The global top tree over ranks from each rank's positions in device memory
// (gpu/global_top_tree_cuda.cuh, issue #29) against the host build (GlobalTopTree::build,
// itself checked against the serial ORB tree by mpi/test_toptree) on the same positions
// wrapped into the box by the engine's device wrap (gpu::wrap_positions: what the host
// domain update is given today). Raw positions go to the device as x | y | z blocks, some a
// whole box or several away, some a hair below 0 or exactly at L (wrapped to 0 or just below
// L), so the device wraps them as it reads them. Every node (index, parent, depth, first,
// count, lo and hi bitwise, axis, split), each particle's node and the rounds must equal the
// host's:
// - clustered particles shared among the ranks in several ways (round robin, contiguous, all
//   on rank 0, the last rank empty, shuffled), depths 0 to beyond the tree, a tiny set and
//   one particle;
// - exact ties: a grid-snapped set (equal coordinates and many equal positions, which the
//   tie rule shares out: the same particles go left as on the host), and a set at one
//   position (no round at all);
// - 110592 particles to depth 12 (the children's boxes in shared memory at the top levels,
//   in global memory below), one build object reused for every size, and the particle
//   nodes left on the device.
// A timing at the headline size (16.7M particles, 256^3, depth 12) runs on request:
//   mpirun -np 2 tests/mpi_test_toptree_cuda --no-skip -tc="*256^3*"
// All ranks share the machine's GPUs (local rank modulo devices); 77 (skipped) on every rank
// unless every rank has one.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "domain/global_top_tree.hpp"
#include "gpu/global_top_tree_cuda.cuh"
#include "gpu/particle_kernels.cuh"
#include "support/clustered_particles.hpp"
#include "support/device_positions.hpp"
#include "support/gpu_ranks.hpp"
#include "support/rank_shares.hpp"

using orbis::Comm;
using orbis::GlobalTopNode;
using orbis::GlobalTopTree;
using orbis::Vec3d;
using orbis::gpu::DeviceGlobalTopTree;

using orbis::test::DevicePositions;

namespace {

// The positions wrapped into [0, box) by the engine's device wrap, back on the host.
std::vector<Vec3d> wrapped_by_device(const std::vector<Vec3d>& pos, double box, cudaStream_t stream) {
  const DevicePositions d(pos);
  const std::size_t n = pos.size();
  std::vector<Vec3d> out(n);
  if (n == 0) return out;
  orbis::gpu::wrap_positions(d.x(), n, box, stream);
  std::vector<double> blocks(3 * n);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  REQUIRE(cudaMemcpy(blocks.data(), d.x(), blocks.size() * sizeof(double), cudaMemcpyDeviceToHost) == cudaSuccess);
  for (std::size_t i = 0; i < n; ++i)
    for (int d3 = 0; d3 < 3; ++d3) {
      const double v = blocks[static_cast<std::size_t>(d3) * n + i];
      REQUIRE((v >= 0.0 && v < box && !std::signbit(v)));
      out[i][d3] = v;
    }
  return out;
}

const char* const kWays[] = {"round robin", "contiguous", "all on rank 0", "last rank empty", "shuffled"};

// Some particles moved out of [0, box): a box or several away, a hair below 0 (wrapping to
// just below L, or to exactly 0 when L minus the hair rounds to L), exactly at L.
std::vector<Vec3d> moved_out(std::vector<Vec3d> all, double box) {
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i % 7 == 3) all[i].x += box;
    if (i % 11 == 5) all[i].y -= box;
    if (i % 13 == 2) all[i].z += 3 * box;
    if (i % 17 == 1) all[i].x = -1e-300;
    if (i % 19 == 4) all[i].y = -1e-9 * box;
    if (i % 23 == 6) all[i].z = box;
  }
  return all;
}

bool bitwise(const Vec3d& a, const Vec3d& b) { return std::memcmp(&a, &b, sizeof(Vec3d)) == 0; }

// Nodes of `got` that differ from `want` in any field (or are missing or extra).
int differing_nodes(const GlobalTopTree& got, const GlobalTopTree& want) {
  const std::size_t n = std::min(got.nodes().size(), want.nodes().size());
  int wrong = static_cast<int>(std::max(got.nodes().size(), want.nodes().size()) - n);
  for (std::size_t k = 0; k < n; ++k) {
    const GlobalTopNode& a = got.nodes()[k];
    const GlobalTopNode& b = want.nodes()[k];
    const bool same = a.index == b.index && a.parent == b.parent && a.depth == b.depth && a.first == b.first &&
                      a.count == b.count && bitwise(a.lo, b.lo) && bitwise(a.hi, b.hi) && a.axis == b.axis &&
                      a.split == b.split;
    wrong += same ? 0 : 1;
  }
  return wrong;
}

std::size_t misplaced(const std::vector<std::int32_t>& got, const std::vector<std::int32_t>& want) {
  if (got.size() != want.size()) return std::max(got.size(), want.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) bad += got[i] != want[i];
  return bad;
}

// The device build of this rank's share of `all` (raw positions) against the host build of
// the same share wrapped by the device.
void check(const std::vector<Vec3d>& all, const std::string& how, double box, int max_leaf, int depth,
           DeviceGlobalTopTree& device, const Comm& world, cudaStream_t stream) {
  INFO(how << ", N = " << all.size() << ", max_leaf " << max_leaf << ", depth " << depth << ", " << world.size()
           << " ranks");
  const std::vector<std::size_t> ids = orbis::test::share_of(how, all.size(), world.size(), world.rank());
  std::vector<Vec3d> mine;
  for (std::size_t i : ids) mine.push_back(all[i]);
  const GlobalTopTree host = GlobalTopTree::build(wrapped_by_device(mine, box, stream), max_leaf, depth, world);
  const DevicePositions d(mine);
  const GlobalTopTree got = device.build(d.x(), d.y(), d.z(), d.size(), box, max_leaf, depth, world, stream);
  CHECK(got.n_total() == host.n_total());
  CHECK(got.rounds() == host.rounds());
  CHECK(got.nodes().size() == host.nodes().size());
  CHECK(differing_nodes(got, host) == 0);
  CHECK(misplaced(got.particle_node(), host.particle_node()) == 0);
}

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess); }
  ~Stream() { cudaStreamDestroy(s); }
};

}  // namespace

TEST_CASE("The device's global top tree is the host's, for any sharing, with positions outside the box") {
  const Comm world = Comm::world();
  REQUIRE(cudaSetDevice(orbis::test::rank_gpu_or_skip(world)) == cudaSuccess);
  const Stream stream;
  DeviceGlobalTopTree device;
  const double box = 50.0;
  std::vector<Vec3d> all = orbis::test::clustered_particles(20, box, 5);
  all.resize(7001);   // 2 and 3 do not divide it
  all = moved_out(all, box);
  for (const char* how : kWays)
    for (int depth : {0, 1, 3, 6, 40}) check(all, how, box, 16, depth, device, world, stream.s);
  // Leaves above the requested depth stop there; tiny sets; one particle.
  for (const char* how : {"round robin", "last rank empty"}) {
    check(all, how, box, 1000, 6, device, world, stream.s);
    check(std::vector<Vec3d>(all.begin(), all.begin() + 37), how, box, 3, 40, device, world, stream.s);
    check(std::vector<Vec3d>(all.begin(), all.begin() + 1), how, box, 1, 3, device, world, stream.s);
  }
  // The one-shot function.
  const std::vector<std::size_t> ids = orbis::test::share_of("contiguous", all.size(), world.size(), world.rank());
  std::vector<Vec3d> mine;
  for (std::size_t i : ids) mine.push_back(all[i]);
  const DevicePositions d(mine);
  const GlobalTopTree got = orbis::gpu::global_top_tree_cuda(d.x(), d.y(), d.z(), d.size(), box, 16, 6, world, stream.s);
  const GlobalTopTree host = GlobalTopTree::build(wrapped_by_device(mine, box, stream.s), 16, 6, world);
  CHECK(differing_nodes(got, host) == 0);
  CHECK(misplaced(got.particle_node(), host.particle_node()) == 0);
}

TEST_CASE("The device's global top tree with equal coordinates and equal positions") {
  const Comm world = Comm::world();
  REQUIRE(cudaSetDevice(orbis::test::rank_gpu_or_skip(world)) == cudaSuccess);
  const Stream stream;
  DeviceGlobalTopTree device;
  // Snapped to a grid of 8 per side (ties on every axis, many exact duplicates; the
  // selection runs through all 192 bits and the tie rule decides), x partly negative (wrapped
  // by the device).
  const double box = 8.0;
  std::vector<Vec3d> all = orbis::test::uniform_particles(3001, box, 11);
  for (Vec3d& x : all) x = Vec3d{std::floor(x.x) - 3.0, std::floor(x.y), std::floor(x.z) * 0.5};
  for (const char* how : kWays)
    for (int depth : {1, 3, 6, 40}) check(all, how, box, 4, depth, device, world, stream.s);
  // Every particle at one position: no round at any level, the tie rule alone.
  const std::vector<Vec3d> one_place(5000, Vec3d{1.0, 2.0, -3.0});
  for (const char* how : {"round robin", "all on rank 0", "shuffled"})
    for (int depth : {1, 6}) check(one_place, how, box, 4, depth, device, world, stream.s);
}

TEST_CASE("The device's global top tree over many members and deep levels, its particle nodes left on the device") {
  const Comm world = Comm::world();
  REQUIRE(cudaSetDevice(orbis::test::rank_gpu_or_skip(world)) == cudaSuccess);
  const Stream stream;
  DeviceGlobalTopTree device;
  const double box = 50.0;
  const std::vector<Vec3d> all = moved_out(orbis::test::clustered_particles(48, box, 9), box);   // 110592
  for (const char* how : {"contiguous", "shuffled"})
    for (int depth : {9, 12}) check(all, how, box, 16, depth, device, world, stream.s);
  // without the download: the same nodes, the particle nodes on the device alone.
  const std::vector<std::size_t> ids = orbis::test::share_of("round robin", all.size(), world.size(), world.rank());
  std::vector<Vec3d> mine;
  for (std::size_t i : ids) mine.push_back(all[i]);
  const DevicePositions d(mine);
  const GlobalTopTree host = GlobalTopTree::build(wrapped_by_device(mine, box, stream.s), 16, 12, world);
  const GlobalTopTree got = device.build(d.x(), d.y(), d.z(), d.size(), box, 16, 12, world, stream.s, false);
  CHECK(got.particle_node().empty());
  CHECK(differing_nodes(got, host) == 0);
  std::vector<std::int32_t> on_device(mine.size());
  REQUIRE(cudaMemcpy(on_device.data(), device.device_particle_node(), on_device.size() * sizeof(std::int32_t),
                     cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(misplaced(on_device, host.particle_node()) == 0);
}

TEST_CASE("The device's global top tree refuses bad input on every rank") {
  const Comm world = Comm::world();
  REQUIRE(cudaSetDevice(orbis::test::rank_gpu_or_skip(world)) == cudaSuccess);
  const Stream stream;
  DeviceGlobalTopTree device;
  const DevicePositions one(std::vector<Vec3d>{Vec3d{1, 2, 3}});
  CHECK_THROWS_WITH_AS(device.build(one.x(), one.y(), one.z(), 1, 10.0, 0, 3, world, stream.s),
                       doctest::Contains("max_leaf"), orbis::Error);
  CHECK_THROWS_WITH_AS(device.build(one.x(), one.y(), one.z(), 1, 10.0, 4, -1, world, stream.s),
                       doctest::Contains("depth"), orbis::Error);
  CHECK_THROWS_WITH_AS(device.build(nullptr, nullptr, nullptr, 0, 10.0, 4, 3, world, stream.s),
                       doctest::Contains("no particles"), orbis::Error);
}

// The headline size (not run by default: --no-skip -tc="*256^3*"): the 128^3 clustered set
// tiled 2x2x2 into a box twice as large (16.7M particles), contiguous shares (each rank a
// few whole tiles), depth 12 and max_leaf 32 (the defaults' top levels at 256^3: 4096
// particles a top node), the device build (after one to warm up) against the host build on
// this rank's OpenMP threads; the trees must agree here too.
TEST_CASE("The device's global top tree's cost at 256^3" * doctest::skip()) {
  const Comm world = Comm::world();
  REQUIRE(cudaSetDevice(orbis::test::rank_gpu_or_skip(world)) == cudaSuccess);
  const Stream stream;
  const double half = 500.0, box = 2 * half;
  const std::vector<Vec3d> tile = orbis::test::clustered_particles(128, half, 5);
  const std::size_t n_all = 8 * tile.size();
  const std::vector<std::size_t> ids = orbis::test::share_of("contiguous", n_all, world.size(), world.rank());
  std::vector<Vec3d> mine;
  mine.reserve(ids.size());
  for (std::size_t i : ids) {
    const std::size_t t = i / tile.size();
    const Vec3d& x = tile[i % tile.size()];
    mine.push_back(Vec3d{x.x + half * static_cast<double>(t & 1), x.y + half * static_cast<double>((t >> 1) & 1),
                         x.z + half * static_cast<double>((t >> 2) & 1)});
  }
  const int max_leaf = 32, depth = 12;
  const DevicePositions d(mine);
  DeviceGlobalTopTree device;
  device.build(d.x(), d.y(), d.z(), d.size(), box, max_leaf, depth, world, stream.s);   // warm-up
  world.barrier();
  orbis::Stopwatch watch;
  const double comm_before = world.stats().seconds;
  const GlobalTopTree got = device.build(d.x(), d.y(), d.z(), d.size(), box, max_leaf, depth, world, stream.s, false);
  const double device_comm = world.stats().seconds - comm_before;
  world.barrier();
  const double device_s = watch.seconds();
  orbis::Stopwatch with_nodes;
  const GlobalTopTree got_nodes = device.build(d.x(), d.y(), d.z(), d.size(), box, max_leaf, depth, world, stream.s);
  world.barrier();
  const double device_nodes_s = with_nodes.seconds();

  const std::vector<Vec3d> wrapped = wrapped_by_device(mine, box, stream.s);
  world.barrier();
  watch.restart();
  const double host_comm_before = world.stats().seconds;
  const GlobalTopTree host = GlobalTopTree::build(wrapped, max_leaf, depth, world);
  const double host_comm = world.stats().seconds - host_comm_before;
  world.barrier();
  const double host_s = watch.seconds();
  CHECK(differing_nodes(got, host) == 0);
  CHECK(got.rounds() == host.rounds());
  CHECK(misplaced(got_nodes.particle_node(), host.particle_node()) == 0);
  if (world.is_root())
    MESSAGE("top tree of " << n_all << " particles on " << world.size() << " ranks (" << mine.size()
                           << " on rank 0), depth " << depth << ", " << host.rounds() << " rounds, "
                           << host.nodes().size() << " nodes: device " << device_s << " s (of which reductions "
                           << device_comm << " s; " << device_nodes_s << " s with particle_node downloaded), host "
                           << host_s << " s (reductions " << host_comm << " s)");
}
