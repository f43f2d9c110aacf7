// The energy check's mesh term over ranks on the GPUs (CudaPmRanks::potential_energy,
// gpu/pm_cuda_ranks.hpp) against independent paths to the same quantity:
// - the host PM over the same ranks (PmSolver::potential_energy: FFTW's reproducible lines, so
//   bitwise its one-rank value) and the one-GPU CudaPmSolver on all the particles (one 3D
//   cuFFT): both assign the same fixed-point density, so only the transforms' rounding
//   separates them: relative 1e-6 for a float mesh (test_energy_cuda's bar between the GPU's
//   and the FFTW float mesh's W), 1e-12 for double. Particles as tests/mpi/test_pm_ranks_cuda:
//   clustered, spread over the ranks unevenly (a rank with none in half the cases), at and
//   around every slab boundary and the periodic seam, two outside the box; mesh sides 3 ranks
//   do not divide, slabs thinner than the ghost planes, a rank with no plane; CIC and TSC, one
//   mesh and two interlaced, float and double. The value is the same bits on every rank, from
//   call to call, for the particles dealt out over the ranks differently, and through the
//   device-pointer entry; the energy-only object gives back every byte it took from the pool
//   and holds no slabs; a CudaPmRanks built for forces gives the same energy and its forces
//   and traffic record are the same after it as before; its force pass asked for the energy
//   too gives the same energy bits and the same forces.
// - the energy check (integrate/energy.hpp) over the ranks with [gpu] backend = "cuda": every
//   term the one-rank check's (one GPU: CudaPmSolver and the GPU pair sum), the mesh term
//   being CudaPmRanks::potential_energy's, and with backend "cpu" the host PM's, bitwise.
// All ranks share the machine's GPUs (local rank modulo devices); 77 (skipped) on every rank
// unless every rank has one.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/params.hpp"
#include "domain/rank_domains.hpp"
#include "gpu/pm_cuda.hpp"
#include "gpu/pm_cuda_ranks.hpp"
#include "integrate/energy.hpp"
#include "pm/pm_solver.hpp"
#include "support/clustered_particles.hpp"
#include "support/device_positions.hpp"
#include "support/gpu_ranks.hpp"
#include "support/rank_shares.hpp"

using orbis::Comm;
using orbis::CudaPmRanks;
using orbis::Vec3d;

namespace {

struct Case {
  int mesh;
  orbis::Window window;
  bool double_mesh;
  bool interlaced;
  bool empty_last_rank;
};

double relative(double x, double reference) { return std::abs(x - reference) / std::abs(reference); }

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// True on every rank when every rank holds the same bits of x.
bool same_on_every_rank(double x, const Comm& comm) {
  const std::vector<double> all = comm.allgather(x);
  bool same = true;
  for (double v : all) same = same && same_bits(v, x);
  return comm.all(same);
}

// Bytes of this device's pool in use (allocated, not given back) once the device is idle.
std::uint64_t pool_bytes_in_use(int device) {
  cudaSetDevice(device);
  cudaDeviceSynchronize();
  cudaMemPool_t pool = nullptr;
  cudaDeviceGetDefaultMemPool(&pool, device);
  std::uint64_t used = 0;
  cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
  return used;
}

// The energy through the device-pointer entry, positions x | y | z on a stream of the caller's.
double device_entry_energy(CudaPmRanks& pm, const std::vector<Vec3d>& pos, double mass, int device) {
  const orbis::test::DevicePositions d(pos, device);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  const double w = pm.potential_energy(d.data(), d.size(), mass, stream);
  cudaStreamDestroy(stream);
  return w;
}

}  // namespace

TEST_CASE("mesh energy over ranks on the GPUs: the host PM's and the one-GPU PM's to the transforms' rounding") {
  const Comm world = Comm::world();
  const int device = orbis::test::rank_gpu_or_skip(world);
  const double box = 50.0, mass = 0.7;
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
  for (const Case& c : cases) {
    const std::string what = std::to_string(c.mesh) + "^3 " + orbis::window_name(c.window) + ' ' +
                             (c.double_mesh ? "double" : "float") + (c.interlaced ? ", interlaced" : ", one mesh") +
                             (c.empty_last_rank ? ", last rank empty, " : ", ") + std::to_string(world.size()) +
                             " ranks";
    INFO(what);
    const orbis::PmSettings s = orbis::test::slab_test_settings(box, c.mesh, c.window, c.double_mesh, c.interlaced);
    const std::vector<Vec3d> all = orbis::test::slab_boundary_particles(box, c.mesh, world.size());
    const std::vector<Vec3d> mine = orbis::test::uneven_share(all, world, c.empty_last_rank, 0);
    if (c.empty_last_rank && world.size() > 1 && world.rank() == world.size() - 1) CHECK(mine.empty());

    // The references: the host PM over the same ranks, the one-GPU PM on every particle.
    const double host = orbis::PmSolver(s, world).potential_energy(mine, mass);
    const double one_gpu = orbis::CudaPmSolver(s, device).potential_energy(all, mass);

    std::string why;
    std::unique_ptr<CudaPmRanks> pm = orbis::make_cuda_pm_ranks(s, world, device, &why, CudaPmRanks::Use::energy);
    REQUIRE_MESSAGE(pm != nullptr, why);
    CHECK(pm->mesh_bytes() == 0);   // no slabs held
    const std::uint64_t pool_before = pool_bytes_in_use(device);
    const double w = pm->potential_energy(mine, mass);
    const std::uint64_t pool_after = pool_bytes_in_use(device);
    const double bar = c.double_mesh ? 1e-12 : 1e-6;
    if (world.is_root())
      std::printf("%-50s W_mesh %.15e: vs host slabs %.1e, vs one GPU %.1e (bar %.0e)\n", what.c_str(), w,
                  relative(w, host), relative(w, one_gpu), bar);
    CHECK(host < 0);   // a clustered set: the long-range W is negative
    CHECK(relative(w, host) < bar);
    CHECK(relative(w, one_gpu) < bar);
    CHECK(same_on_every_rank(w, world));
    CHECK(world.all(pool_after == pool_before));   // every byte back to the pool
    CHECK(pm->mesh_bytes() == 0);

    // The same bits again, with the particles dealt out over the ranks differently (the
    // density's integer sums do not see who held a particle), and through the device entry.
    CHECK(same_bits(pm->potential_energy(mine, mass), w));
    const std::vector<Vec3d> other = orbis::test::uneven_share(all, world, false, 3);
    CHECK(same_bits(pm->potential_energy(other, mass), w));
    CHECK(same_bits(device_entry_energy(*pm, mine, mass, device), w));
    CHECK(world.all(pool_bytes_in_use(device) == pool_before));

    // A CudaPmRanks built for forces: the same energy in its own slabs, and its forces and
    // traffic record the same bits after the energy call as before it.
    std::unique_ptr<CudaPmRanks> forces = orbis::make_cuda_pm_ranks(s, world, device, &why);
    REQUIRE_MESSAGE(forces != nullptr, why);
    std::vector<Vec3d> acc_before, acc_after;
    forces->accelerations(mine, mass, acc_before);
    const orbis::PmRankTraffic traffic_before = forces->traffic();
    const double w_forces = forces->potential_energy(mine, mass);
    const orbis::PmRankTraffic traffic_after = forces->traffic();
    forces->accelerations(mine, mass, acc_after);
    if (world.is_root()) std::printf("%-50s forces' object: W_mesh %.15e\n", what.c_str(), w_forces);
    CHECK(relative(w_forces, w) < 1e-14);
    REQUIRE(acc_after.size() == acc_before.size());
    CHECK(world.all(std::memcmp(acc_before.data(), acc_after.data(), acc_before.size() * sizeof(Vec3d)) == 0));
    CHECK(traffic_after.particles == traffic_before.particles);
    CHECK(traffic_after.particle_bytes == traffic_before.particle_bytes);
    CHECK(traffic_after.ghost_bytes == traffic_before.ghost_bytes);
    CHECK(traffic_after.transpose_bytes == traffic_before.transpose_bytes);

    // The force pass that sums the energy too: potential_energy()'s bits, the same forces.
    double w_along = 1.0;
    std::vector<Vec3d> acc_along;
    forces->accelerations(mine, mass, acc_along, nullptr, &w_along);
    CHECK(same_bits(w_along, w_forces));
    CHECK(same_on_every_rank(w_along, world));
    REQUIRE(acc_along.size() == acc_before.size());
    CHECK(world.all(std::memcmp(acc_before.data(), acc_along.data(), acc_before.size() * sizeof(Vec3d)) == 0));
  }
}

TEST_CASE("mesh energy over ranks on the GPUs: no particles anywhere, and long range only") {
  const Comm world = Comm::world();
  const int device = orbis::test::rank_gpu_or_skip(world);
  orbis::PmSettings s;
  s.box_mpc_h = 50.0;
  s.grid_side = 16;
  s.window = orbis::Window::tsc;
  s.r_s_mpc_h = 3.0;
  CudaPmRanks pm(s, world, device, CudaPmRanks::Use::energy);
  CHECK(pm.potential_energy(std::vector<Vec3d>{}, 1.0) == 0.0);
  std::vector<Vec3d> acc;
  CHECK_THROWS_AS(pm.accelerations(std::vector<Vec3d>{}, 1.0, acc), orbis::Error);   // built for the energy
  s.r_s_mpc_h = 0;   // PM-only: no long-range potential to sum, on the host either
  CHECK_THROWS_AS(CudaPmRanks(s, world, device, CudaPmRanks::Use::energy), orbis::Error);
}

namespace {

orbis::Params energy_params(const std::string& backend, const std::string& precision) {
  // r_s = 1.2 Mpc/h on the 64^3 mesh, the cut 6.6 Mpc/h (test_energy_ranks.cpp's set-up).
  return orbis::Params::parse("[box]\nsize_mpc_h = 32.0\nparticles_per_side = 16\n[gravity]\npm_grid_side = 64\n"
                              "pm_mesh_precision = \"" + precision + "\"\n[gpu]\nbackend = \"" + backend + "\"\n",
                              "energy_ranks_cuda.toml");
}

}  // namespace

TEST_CASE("the energy check over ranks with the CUDA backend: the one-rank check's W") {
  const Comm world = Comm::world();
  const int device = orbis::test::rank_gpu_or_skip(world);
  const double box = 32.0;
  const orbis::Particles all = orbis::test::clustered_particle_set(16, box, 99);
  // Every rank a strided share, then into rank domains as the run's engine holds them.
  orbis::Particles mine;
  mine.mass = all.mass;
  for (std::size_t i = static_cast<std::size_t>(world.rank()); i < all.size(); i += world.size()) {
    mine.pos.push_back(all.pos[i]);
    mine.mom.push_back(all.mom[i]);
    mine.id.push_back(all.id[i]);
  }
  orbis::RankDomains domains(box, 16, 4, world);
  domains.update(mine, 0.0);
  REQUIRE(world.sum<std::uint64_t>(mine.size()) == all.size());

  for (const std::string precision : {"double", "float"}) {
    INFO(precision << " mesh, " << world.size() << " ranks");
    const orbis::Params params = energy_params("cuda", precision);
    orbis::EnergyCheck one(params, Comm::self());   // one GPU: CudaPmSolver and the GPU pair sum
    const orbis::PotentialEnergy reference = one.potential(all);
    orbis::EnergyCheck many(params, world);
    REQUIRE(many.enabled());
    const orbis::PotentialEnergy w = many.potential(mine);
    const double mesh_bar = precision == "double" ? 1e-12 : 1e-6;
    if (world.is_root())
      std::printf("%s mesh, %d ranks: aW %.12e (one rank %.12e), mesh %.1e, pairs %.1e relative\n", precision.c_str(),
                  world.size(), w.total(), reference.total(), relative(w.mesh, reference.mesh),
                  relative(w.pairs, reference.pairs));
    CHECK(reference.total() < 0);
    CHECK(relative(w.mesh, reference.mesh) < mesh_bar);
    CHECK(relative(w.pairs, reference.pairs) < 1e-10);
    CHECK(relative(w.self, reference.self) < 1e-12);
    CHECK(relative(w.background, reference.background) < 1e-12);
    CHECK(std::abs(w.total() - reference.total()) <
          mesh_bar * std::abs(reference.mesh) + 1e-10 * std::abs(reference.pairs));
    CHECK(same_on_every_rank(w.total(), world));
    CHECK(same_bits(many.potential(mine).total(), w.total()));   // the same bits again

    // Its mesh term is the GPUs' over ranks (one rank: the one-GPU PM's), bit for bit.
    const orbis::PmSettings s = orbis::PmSettings::from_params(params);
    if (world.size() > 1) {
      CudaPmRanks gpus(s, world, device, CudaPmRanks::Use::energy);
      CHECK(same_bits(w.mesh, gpus.potential_energy(mine.pos, mine.mass)));
    } else {
      CHECK(same_bits(w.mesh, orbis::CudaPmSolver(s, device).potential_energy(mine.pos, mine.mass)));
    }
    // With backend "cpu" the host PM's over the ranks, as before.
    orbis::EnergyCheck on_cpu(energy_params("cpu", precision), world);
    CHECK(same_bits(on_cpu.potential(mine).mesh, orbis::PmSolver(s, world).potential_energy(mine.pos, mine.mass)));
  }
}
