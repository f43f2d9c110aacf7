// The long-range PM over ranks with the particle side on the GPUs (gpu/pm_cuda_ranks.hpp)
// against the one-GPU CudaPmSolver (gpu/pm_cuda.hpp) on all the particles, and against the
// host PmSolver over the same ranks. Particles: a clustered set spread over the ranks
// unevenly and with no regard to the slabs (rank 0 about twice the others' share; in half the
// cases the last rank holds none), plus particles at and around every slab boundary, at the
// periodic seam and just outside the box (wrapped), whose stencils straddle slabs and the
// wrap. Mesh sides that 3 ranks do not divide (32: 11, 11, 10 planes), slabs thinner than the
// ghost planes (6: 2 planes a rank, TSC: 3 ghost planes over two owners), a rank with no plane
// (4 on 3 ranks: 2, 2, 0), CIC and TSC, one mesh and two interlaced, float and double; each
// case twice on the same solver with the particles moved and dealt out again (buffers reused
// and grown); the routing's counts for the memory plan (routing_counts) are what each call
// sent and received; every case through CUDA IPC (the force ghost planes with the transposes)
// and staged through host memory (fetched). All ranks share the machine's GPUs (local rank
// modulo devices).
//
// Bars. Both GPU paths assign the same fixed-point density (the same kernel, integer sums: the
// same bits however the particles are split) and interpolate with the same kernel; only the
// transforms differ (one 3D cuFFT against 2D + 1D cuFFT slabs with transposes), each rounding
// in the mesh precision. So rms |a - a_ref| / rms |a_ref| is the transforms' rounding, ~1e-7
// for a float mesh (bar 2e-6, test_pm_slabs_cuda's) and ~1e-15 for double (bar 1e-12); the
// largest difference over the rms force: 1e-5 (float) and 1e-12 (double). Against the host
// PmSolver (FFTW's float or double lines) the same bars. Returns 77 (skipped) on every rank
// unless every rank has a GPU.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "gpu/device_alltoallv.cuh"
#include "gpu/pm_cuda.hpp"
#include "gpu/pm_cuda_ranks.hpp"
#include "pm/pm_solver.hpp"
#include "support/device_positions.hpp"
#include "support/gpu_ranks.hpp"
#include "support/rank_shares.hpp"

using orbis::Comm;
using orbis::Vec3d;

namespace {

struct Case {
  int mesh;
  orbis::Window window;
  bool double_mesh;
  bool interlaced;
  bool empty_last_rank;
};

// Particle i's rank: rank 0 twice the others' share; the last rank none when asked.
int owner(std::size_t i, int ranks, bool empty_last) {
  if (ranks == 1) return 0;
  const int used = empty_last ? ranks - 1 : ranks;
  const int slot = static_cast<int>((7 * i) % static_cast<std::size_t>(used + 1));
  return slot == used ? 0 : slot;
}

// CudaPmRanks::routing_counts of host positions.
orbis::CudaPmRoutingCounts routing_counts_of(orbis::CudaPmRanks& pm, const std::vector<Vec3d>& pos, int device) {
  const orbis::test::DevicePositions d(pos, device);
  const orbis::CudaPmRoutingCounts counts = pm.routing_counts(d.data(), d.size(), nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  return counts;
}

// rms |a - ref| / rms |ref| over every rank's particles.
double rms_difference(const std::vector<Vec3d>& a, const std::vector<Vec3d>& ref, const Comm& comm) {
  double diff = 0, norm = 0;
  for (std::size_t q = 0; q < a.size(); ++q) {
    diff += orbis::norm2(a[q] - ref[q]);
    norm += orbis::norm2(ref[q]);
  }
  return std::sqrt(comm.sum(diff) / comm.sum(norm));
}

}  // namespace

TEST_CASE("PM over ranks on the GPUs equals the one-GPU PM and the host slab PM to the transforms' rounding") {
  const Comm world = Comm::world();
  const int device = orbis::test::rank_gpu_or_skip(world);
  const double box = 50.0;
  const Case cases[] = {
      {32, orbis::Window::tsc, false, true, false},   // 3 ranks: 11, 11, 10 planes
      {32, orbis::Window::cic, false, false, true},
      {32, orbis::Window::tsc, true, false, false},
      {20, orbis::Window::cic, true, true, true},      // 3 ranks: 7, 7, 6
      {24, orbis::Window::tsc, false, false, true},
      {6, orbis::Window::tsc, true, true, false},      // 2 planes a rank, 3 ghost planes
      {4, orbis::Window::tsc, true, false, true},      // 3 ranks: 2, 2 and 0 planes
      {4, orbis::Window::cic, false, true, false},
  };
  // Both ways between the ranks' devices: CUDA IPC (auto on one node), where the force ghost
  // planes come with the transposes, and staged through host memory, where they are fetched.
  for (const orbis::gpu::RankExchange mode : {orbis::gpu::RankExchange::automatic, orbis::gpu::RankExchange::staged}) {
    for (const Case& c : cases) {
      orbis::gpu::set_rank_exchange(mode);
      const std::string what = std::to_string(c.mesh) + "^3 " + orbis::window_name(c.window) + ' ' +
                               (c.double_mesh ? "double" : "float") + (c.interlaced ? ", interlaced" : ", one mesh") +
                               (c.empty_last_rank ? ", last rank empty, " : ", ") + std::to_string(world.size()) +
                               " ranks, " + orbis::gpu::rank_exchange_name(mode);
      INFO(what);
      const orbis::PmSettings s =
          orbis::test::slab_test_settings(box, c.mesh, c.window, c.double_mesh, c.interlaced);
      std::string why;
      std::unique_ptr<orbis::CudaPmRanks> pm = orbis::make_cuda_pm_ranks(s, world, device, &why);
      REQUIRE_MESSAGE(pm != nullptr, why);
      if (world.is_root()) std::printf("%s\n", pm->describe().c_str());
      orbis::CudaPmSolver one_gpu(s, device);
      orbis::PmSolver host(s, world);
      std::vector<Vec3d> all = orbis::test::slab_boundary_particles(box, c.mesh, world.size());
      for (int step = 0; step < 2; ++step) {
        if (step == 1)   // moved across the slabs, and dealt out differently (more to the last ranks)
          for (Vec3d& x : all) x.x = std::fmod(x.x + 0.37 * box, box);
        std::vector<Vec3d> mine;
        std::vector<std::size_t> index;
        for (std::size_t i = 0; i < all.size(); ++i)
          if (owner(step == 0 ? i : i + 3, world.size(), c.empty_last_rank) == world.rank())
            mine.push_back(all[i]), index.push_back(i);
        if (c.empty_last_rank && world.size() > 1 && world.rank() == world.size() - 1) CHECK(mine.empty());

        std::vector<Vec3d> ref_all, ref_host, acc;
        one_gpu.accelerations(all, 0.7, ref_all);
        host.accelerations(mine, 0.7, ref_host);
        orbis::PhaseTimes times;
        pm->accelerations(mine, 0.7, acc, &times);
        REQUIRE(acc.size() == mine.size());
        std::vector<Vec3d> ref_one(mine.size());
        for (std::size_t q = 0; q < mine.size(); ++q) ref_one[q] = ref_all[index[q]];

        const double vs_one = rms_difference(acc, ref_one, world);
        const double vs_host = rms_difference(acc, ref_host, world);
        double rms = 0, worst = 0;
        for (const Vec3d& r : ref_all) rms += orbis::norm2(r);
        rms = std::sqrt(rms / static_cast<double>(ref_all.size()));
        for (std::size_t q = 0; q < mine.size(); ++q) worst = std::max(worst, orbis::norm(acc[q] - ref_one[q]));
        const double max_vs_one = world.max(worst) / rms;
        if (world.is_root())
          std::printf("%-50s step %d: rms vs one GPU %.2e (max %.2e), rms vs host slabs %.2e\n", what.c_str(), step,
                      vs_one, max_vs_one, vs_host);
        CHECK(vs_one < (c.double_mesh ? 1e-12 : 2e-6));
        CHECK(max_vs_one < (c.double_mesh ? 1e-12 : 1e-5));
        CHECK(vs_host < (c.double_mesh ? 1e-12 : 2e-6));
        CHECK(times.get("pm_fft") > 0);

        // The traffic: 48 bytes per particle that crossed; ghost planes whenever ranks have them.
        const orbis::PmRankTraffic& mine_t = pm->traffic();
        CHECK(mine_t.particles == mine.size());
        CHECK(mine_t.particle_bytes == 48 * mine_t.particles_away);
        const orbis::PmRankTraffic sum = pm->total_traffic();
        CHECK(sum.particles == all.size());
        if (world.size() > 1) {
          CHECK(sum.particles_away > 0);
          CHECK(sum.ghost_bytes > 0);
          CHECK(sum.transpose_bytes > 0);
        }
        // The counts the memory plan takes (routing_counts): what the call sent, and every
        // rank's arrivals are the others' leavers.
        const orbis::CudaPmRoutingCounts counts = routing_counts_of(*pm, mine, device);
        CHECK(counts.leaving == mine_t.particles_away);
        CHECK(world.sum<std::uint64_t>(counts.arriving) == sum.particles_away);
        if (world.size() == 1) CHECK(counts.leaving + counts.arriving == 0);
      }
    }
  }
  orbis::gpu::set_rank_exchange(orbis::gpu::RankExchange::automatic);
}

TEST_CASE("PM over ranks on the GPUs: long range only") {
  const Comm world = Comm::world();
  const int device = orbis::test::rank_gpu_or_skip(world);
  orbis::PmSettings s;
  s.box_mpc_h = 50.0;
  s.grid_side = 16;
  s.window = orbis::Window::tsc;
  s.r_s_mpc_h = 0;   // PM-only: its two interlaced meshes stay on the host
  CHECK_THROWS_AS(orbis::CudaPmRanks(s, world, device), orbis::Error);
}
