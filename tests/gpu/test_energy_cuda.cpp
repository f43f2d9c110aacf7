// The energy diagnostic with the CUDA backend: the GPU's pair sum (gpu/pair_energy_cuda.cu)
// equals the CPU's on a clustered set (through the chaining mesh and through the one-cell
// fallback), and over ranks its shares with ghosts add up to the one-rank sum; the GPU's mesh term (CudaPmSolver::potential_energy) equals the FFTW path's
// (PmSolver::potential_energy) to the mesh precision, is the energy check's mesh term with the
// CUDA backend, and keeps no device memory; a W with the pair sum on the GPU matches the Ewald
// sum; and a short run on the CUDA step engine keeps the Layzer-Irvine residual small.
// Returns 77 without a usable GPU.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/params.hpp"
#include "fmm/p2p.hpp"
#include "fmm/pair_energy.hpp"
#include "gpu/pm_cuda.hpp"
#include "integrate/energy.hpp"
#include "integrate/simulation.hpp"
#include "pm/pm_solver.hpp"
#include "support/clustered_particles.hpp"
#include "support/ewald.hpp"
#include "support/gpu_skip.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;

TEST_CASE("GPU pair sum of the energy check: the CPU's; a W on the GPU: the Ewald sum's") {
  test::require_gpu_or_skip();
  const double box = 64.0;
  const std::vector<Vec3d> pos = test::clustered_particles(40, box, 11);
  const auto gpu = make_p2p_evaluator("cuda", 0);
  for (double cut : {5.0, 12.0, 30.0}) {   // reach 2, reach 1, one cell
    CAPTURE(cut);
    PairPotentialInput in;
    in.positions = &pos;
    in.box = box;
    in.r_s = cut / 5;
    in.cut = cut;
    in.softening = 0.02;
    const double cpu = pair_potential_sum_cpu(in), cuda = gpu->pair_potential_sum(in);
    std::printf("cut %.0f: pair sum CPU %.15e GPU %.15e (%.1e)\n", cut, cpu, cuda, cuda / cpu - 1);
    CHECK(cpu > 0);
    CHECK(cuda == doctest::Approx(cpu).epsilon(1e-11));
  }
  const Particles p = test::clustered_particle_set(16, 32.0, 99);
  const double ewald = test::ewald_potential_energy(p.pos, p.mass, 32.0);
  // The sharp cut's W is the Newtonian one to the split's error; the shifted cut (the
  // default) takes T(x_c) (x/x_c)^2 off each pair's force inside the cut, which no other term
  // restores, so its W (that of the forces the run integrates) lies 5.1e-5 from the Ewald sum
  // here (measured on an H200): a looser bar for it.
  for (const char* cut : {"sharp", "shifted"}) {
    CAPTURE(cut);
    EnergyCheck check(Params::parse(std::string("[box]\nsize_mpc_h = 32.0\nparticles_per_side = 16\n[gravity]\n"
                                                "pm_grid_side = 64\nsoftening_over_spacing = 0.0\nshort_range_cut = \"") +
                                        cut + "\"\n[gpu]\nbackend = \"cuda\"\n",
                                    "energy_cuda.toml"));
    const double w = check.potential(p).total();
    std::printf("%s cut: aW with the pair sum on the GPU %.8e, Ewald %.8e (%.1e)\n", cut, w, ewald, w / ewald - 1);
    CHECK(std::abs(w / ewald - 1) < (std::string(cut) == "sharp" ? 1e-5 : 1e-4));
  }
}

TEST_CASE("GPU pair sum over ranks: each rank's share with its ghosts adds up to the one-rank sum") {
  test::require_gpu_or_skip();
  // Three "ranks" emulated in one process: the particles cut into slabs along x (one slab
  // wraps the periodic boundary), every other slab's particles within the cut as ghosts. The
  // shares (own pairs once, own-ghost pairs by ghost_pair_weight) must add up to the whole
  // set's sum, which counts every pair within the cut once; and the CPU's shares equal the
  // GPU's. Two particles at one position straddle two ranks (the half-each tie).
  const double box = 64.0, cut = 9.0;
  std::vector<Vec3d> pos = test::clustered_particles(32, box, 7);
  pos.push_back(Vec3d{20.0, 5.0, 5.0});
  pos.push_back(Vec3d{20.0, 5.0, 5.0});
  const auto gpu = make_p2p_evaluator("cuda", 0);
  PairPotentialInput in;
  in.box = box;
  in.r_s = cut / 5.5;
  in.cut = cut;
  in.softening = 0.05;
  in.positions = &pos;
  const double whole = pair_potential_sum_cpu(in);
  const auto rank_of = [&](std::size_t i) {
    if (i + 2 >= pos.size()) return static_cast<int>(i + 2 - pos.size());   // the tie: ranks 0 and 1
    const double x = std::fmod(pos[i].x + 10.0, box);
    return x < 25.0 ? 0 : (x < 45.0 ? 1 : 2);
  };
  double gpu_total = 0, cpu_total = 0;
  for (int r = 0; r < 3; ++r) {
    std::vector<Vec3d> mine, ghosts;
    for (std::size_t i = 0; i < pos.size(); ++i) {
      if (rank_of(i) == r) mine.push_back(pos[i]);
      else ghosts.push_back(pos[i]);   // more than the cut needs: the rule must still count each pair once
    }
    mine.insert(mine.end(), ghosts.begin(), ghosts.end());
    PairPotentialInput share = in;
    share.positions = &mine;
    share.ghosts = ghosts.size();
    const double on_gpu = gpu->pair_potential_sum(share), on_cpu = pair_potential_sum_cpu(share);
    CHECK(on_gpu == doctest::Approx(on_cpu).epsilon(1e-11));
    gpu_total += on_gpu;
    cpu_total += on_cpu;
  }
  std::printf("pair sum over 3 ranks: GPU %.15e, one rank %.15e (%.1e)\n", gpu_total, whole, gpu_total / whole - 1);
  CHECK(whole > 0);
  CHECK(gpu_total == doctest::Approx(whole).epsilon(1e-11));
  CHECK(cpu_total == doctest::Approx(whole).epsilon(1e-11));
}

namespace {

// Bytes of the device's pool in use (arrays allocated and not given back), after the device
// has finished what was queued.
std::uint64_t pool_bytes_in_use() {
  cudaDeviceSynchronize();
  int device = 0;
  cudaGetDevice(&device);
  cudaMemPool_t pool = nullptr;
  cudaDeviceGetDefaultMemPool(&pool, device);
  std::uint64_t used = 0;
  cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
  return used;
}

}  // namespace

TEST_CASE("GPU mesh term of the energy check: PmSolver::potential_energy's, CIC and TSC, float and double meshes") {
  test::require_gpu_or_skip();
  const double box = 100.0, mass = 3.7;
  // The clustered set (sheets, filaments, a halo across the box corner, a compact one), and a
  // few particles one box away, which both solvers wrap.
  std::vector<Vec3d> pos = test::clustered_particles(32, box, 20261127);
  for (std::size_t p = 0; p < pos.size(); p += 97) pos[p].x += (p % 2 ? box : -box);
  for (std::size_t p = 5; p < pos.size(); p += 101) pos[p].z -= box;
  // The same particles in another order: the fixed-point assignment gives the same bits.
  std::vector<Vec3d> shuffled = pos;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(7));
  // 64^3: twice the particles per side; 48^3: a side that is not a power of two.
  for (int mesh : {64, 48})
    for (bool double_mesh : {false, true})
      for (Window window : {Window::cic, Window::tsc}) {
        PmSettings s;
        s.box_mpc_h = box;
        s.grid_side = mesh;
        s.window = window;
        s.double_mesh = double_mesh;
        s.r_s_mpc_h = 2.4 * box / mesh;   // the default rs_over_cell
        const double cpu = PmSolver(s).potential_energy(pos, mass);
        CudaPmSolver gpu(s);
        const std::uint64_t pool_before = pool_bytes_in_use();
        const double w = gpu.potential_energy(pos, mass);
        // Float: both paths round the mesh to float (the FFTW path its density sums too); the
        // FFTW float mesh's W is within 2.3e-7 of its double mesh's on these four meshes.
        const double bar = double_mesh ? 1e-12 : 1e-6;
        std::printf("%d^3 %s mesh, %s: W_mesh CPU %.15e GPU %.15e (%.1e, bar %.0e)\n", mesh,
                    double_mesh ? "double" : "float ", window_name(window), cpu, w, w / cpu - 1, bar);
        CAPTURE(mesh);
        CAPTURE(double_mesh);
        CAPTURE(window_name(window));
        CHECK(cpu < 0);   // a bound, clustered set: the long-range W is a real, negative energy
        CHECK(std::abs(w / cpu - 1) < bar);
        // Deterministic: the same bits again, for the particles in any order, and through the
        // device-pointer call on a caller's stream.
        CHECK(gpu.potential_energy(pos, mass) == w);
        CHECK(gpu.potential_energy(shuffled, mass) == w);
        const std::size_t n = pos.size();
        std::vector<double> soa(3 * n);
        for (std::size_t p = 0; p < n; ++p)
          for (int c = 0; c < 3; ++c) soa[c * n + p] = pos[p][c];
        double* d = nullptr;
        REQUIRE(cudaMalloc(&d, soa.size() * sizeof(double)) == cudaSuccess);
        REQUIRE(cudaMemcpy(d, soa.data(), soa.size() * sizeof(double), cudaMemcpyHostToDevice) == cudaSuccess);
        cudaStream_t stream = nullptr;
        REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
        CHECK(gpu.potential_energy(d, d + n, d + 2 * n, n, mass, stream) == w);
        cudaStreamDestroy(stream);
        cudaFree(d);
        // Nothing stays allocated: the meshes and the staged positions went back to the pool.
        CHECK(pool_bytes_in_use() == pool_before);
        CHECK(gpu.memory().particles == 0);
        // A force pass asked for the energy too (the step engine's, before an energy check):
        // potential_energy()'s bits from the modes it transforms, and the same forces.
        for (bool interlaced : {false, true}) {
          CAPTURE(interlaced);
          PmSettings si = s;
          si.interlaced = interlaced;
          CudaPmSolver pm(si);
          std::vector<Vec3d> plain, along;
          double w_along = 1.0;
          pm.accelerations(pos, mass, plain);
          pm.accelerations(pos, mass, along, nullptr, &w_along);
          CHECK(w_along == pm.potential_energy(pos, mass));
          REQUIRE(along.size() == plain.size());
          CHECK(std::memcmp(along.data(), plain.data(), along.size() * sizeof(Vec3d)) == 0);
        }
      }
  // PM-only has no long-range potential to sum: an error, as on the host.
  PmSettings full;
  full.box_mpc_h = box;
  full.grid_side = 32;
  CHECK_THROWS_AS(PmSolver(full).potential_energy(pos, mass), Error);
  CHECK_THROWS_AS(CudaPmSolver(full).potential_energy(pos, mass), Error);
  std::vector<Vec3d> acc;
  double w_full = 0;
  CHECK_THROWS_AS(CudaPmSolver(full).accelerations(pos, mass, acc, nullptr, &w_full), Error);
}

TEST_CASE("the energy check's mesh term: on the GPU with the CUDA backend, on the host with the CPU's") {
  test::require_gpu_or_skip();
  const Particles p = test::clustered_particle_set(16, 32.0, 99);
  const std::string common = "[box]\nsize_mpc_h = 32.0\nparticles_per_side = 16\n[gravity]\npm_grid_side = 64\n";
  const Params on_gpu = Params::parse(common + "[gpu]\nbackend = \"cuda\"\n", "energy_mesh_cuda.toml");
  const Params on_cpu = Params::parse(common + "[gpu]\nbackend = \"cpu\"\n", "energy_mesh_cpu.toml");
  const PotentialEnergy gpu = EnergyCheck(on_gpu).potential(p), cpu = EnergyCheck(on_cpu).potential(p);
  // Each is its solver's own sum, bit for bit (both are deterministic).
  const PmSettings s = PmSettings::from_params(on_gpu);
  CHECK(gpu.mesh == CudaPmSolver(s).potential_energy(p.pos, p.mass));
  CHECK(cpu.mesh == PmSolver(s).potential_energy(p.pos, p.mass));
  std::printf("energy check, float mesh: W_mesh GPU %.15e CPU %.15e (%.1e); W GPU %.10e CPU %.10e\n", gpu.mesh,
              cpu.mesh, gpu.mesh / cpu.mesh - 1, gpu.total(), cpu.total());
  CHECK(gpu.mesh == doctest::Approx(cpu.mesh).epsilon(1e-6));
  // The other terms are the same sums (the pairs' to 1e-11): W differs by the mesh term's
  // difference (the terms cancel, so relative to W it is larger).
  CHECK(std::abs(gpu.total() - cpu.total()) < 1e-6 * std::abs(cpu.mesh) + 1e-10 * std::abs(cpu.pairs));
}

TEST_CASE("a short run on the CUDA step engine keeps the Layzer-Irvine residual small") {
  test::require_gpu_or_skip();
  test::ScratchDir dir("energy_cuda_run");
  const Params params = Params::parse(
      "[box]\nsize_mpc_h = 32.0\nparticles_per_side = 32\n[ic]\nz_init = 19.0\nseed = 5\n"
      "[time]\nz_final = 2.0\noutput_redshifts = [2.0]\n[analysis]\npk = false\nfof = false\nenergy_check_every = 8\n"
      "[gpu]\nbackend = \"cuda\"\n[output]\nsnapshots = false\ndirectory = \"" + dir.path() + "\"\n",
      "energy_cuda_run.toml");
  Simulation sim(params);
  const RunSummary summary = sim.run();
  const EnergyBudget& b = sim.state().energy;
  REQUIRE(b.started == 1);
  const Particles& p = sim.particles();
  const double a = summary.a_final;
  double sum_p2 = 0;
  for (const Vec3d& m : p.mom) sum_p2 += norm2(m);
  const double ak = 0.5 * p.mass * sum_p2 / a;
  EnergyCheck check(params);
  const double aw = check.potential(p).total();
  const double residual = (ak + aw + b.k_integral - (b.ak_start + b.aw_start)) / std::abs(aw);
  std::printf("CUDA engine, z = 19 -> 2 in %lld steps: aK %.5e, aW %.5e, int K da %.5e; Layzer-Irvine residual %.3e\n",
              static_cast<long long>(summary.steps), ak, aw, b.k_integral, residual);
  CHECK(aw < 0);
  CHECK(std::abs(residual) < 5e-3);
}
