// The energy check's W from the CUDA step engine's device positions (StepEngine::
// potential_energy_terms, issue #30): the pair sum with its chaining mesh made on the device
// (gpu::pair_potential_sum_device) against a brute-force O(N^2) minimum-image sum of the same
// truncated, softened pair potential, and bit for bit the host-built mesh's GPU sum (the same
// kernel, cell order and fixed-order sum); the engine's whole W against the existing path's
// (the particles on the host, the CUDA evaluator and a CudaPmSolver of the check's own) and
// the CPU backend's; nothing stays allocated; the same bits at every call; the mesh term summed
// in the force pass that expected the check (StepEngine::expect_potential_energy) the same
// bits, and not used once the particles drifted; and a run on the CUDA engine logs the W the
// host path gives for its particles. Returns 77 without a usable GPU.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/params.hpp"
#include "core/vec3.hpp"
#include "fmm/p2p.hpp"
#include "fmm/pair_energy.hpp"
#include "fmm/short_range.hpp"
#include "gpu/pair_energy_cuda.cuh"
#include "gpu/step_engine_cuda.hpp"
#include "integrate/energy.hpp"
#include "integrate/simulation.hpp"
#include "support/clustered_particles.hpp"
#include "support/gpu_skip.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;

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

// The reference: every pair i < j once, its minimal-image separation, psi = erfc(s / 2r_s) / s
// with s^2 = r^2 + eps^2 for r < cut; each particle's partners summed in long double.
double brute_force_pair_sum(const std::vector<Vec3d>& pos, double box, double r_s, double cut, double eps) {
  const auto image = [box](double d) { return d - box * std::nearbyint(d / box); };
  long double total = 0;
  for (std::size_t i = 0; i < pos.size(); ++i) {
    long double row = 0;
    for (std::size_t j = i + 1; j < pos.size(); ++j) {
      const double dx = image(pos[j].x - pos[i].x), dy = image(pos[j].y - pos[i].y), dz = image(pos[j].z - pos[i].z);
      const double r2 = dx * dx + dy * dy + dz * dz;
      if (r2 >= cut * cut) continue;
      const double s = std::sqrt(r2 + eps * eps);
      row += std::erfc(s / (2 * r_s)) / s;
    }
    total += row;
  }
  return static_cast<double>(total);
}

// Positions as the step engine keeps them: x | y | z blocks of n in device memory.
struct DevicePositions {
  double* d = nullptr;
  std::size_t n = 0;
  explicit DevicePositions(const std::vector<Vec3d>& pos) : n(pos.size()) {
    std::vector<double> soa(3 * n);
    for (std::size_t p = 0; p < n; ++p)
      for (int c = 0; c < 3; ++c) soa[c * n + p] = pos[p][c];
    REQUIRE(cudaMalloc(&d, soa.size() * sizeof(double)) == cudaSuccess);
    REQUIRE(cudaMemcpy(d, soa.data(), soa.size() * sizeof(double), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~DevicePositions() { cudaFree(d); }
  DevicePositions(const DevicePositions&) = delete;
  DevicePositions& operator=(const DevicePositions&) = delete;
};

Params engine_params(const std::string& backend, const std::string& gravity_extra = "") {
  return Params::parse("[box]\nsize_mpc_h = 32.0\nparticles_per_side = 16\n[gravity]\npm_grid_side = 64\n" +
                           gravity_extra + "[gpu]\nbackend = \"" + backend + "\"\n",
                       "energy_device_" + backend + ".toml");
}

// The energy check's pair rule for these parameters (EnergyCheck's: the force's cut).
PotentialEnergyRequest request_for(const Params& params) {
  const ShortRangeSettings s = short_range_settings(params, 1.0);
  PotentialEnergyRequest r;
  r.box = params.get_real("box.size_mpc_h");
  r.r_s = s.r_s;
  r.cut = p2p_settings_of(s).r_cut;
  r.softening = s.softening;
  return r;
}

}  // namespace

TEST_CASE("the pair sum with the chaining mesh made on the device: the brute-force sum's, the host mesh's bits") {
  test::require_gpu_or_skip();
  const double box = 64.0;
  std::vector<Vec3d> pos = test::clustered_particles(16, box, 11);   // 4096, haloes, sheets, filaments
  // Particles on the box's faces (cell 0 and the last cell), pairs across the periodic boundary.
  pos.push_back(Vec3d{0.0, 0.0, 0.0});
  pos.push_back(Vec3d{std::nextafter(box, 0.0), std::nextafter(box, 0.0), 0.5});
  pos.push_back(Vec3d{0.25, std::nextafter(box, 0.0), 63.9});
  const DevicePositions d(pos);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  const auto evaluator = make_p2p_evaluator("cuda", 0);
  for (double cut : {5.3, 12.7, 30.1}) {   // reach 2 with 24 and 10 cells a side; one cell (the minimal image)
    CAPTURE(cut);
    PairPotentialInput in;
    in.positions = &pos;
    in.box = box;
    in.r_s = cut / 5;
    in.cut = cut;
    in.softening = 0.02;
    const double brute = brute_force_pair_sum(pos, box, in.r_s, cut, in.softening);
    const std::uint64_t pool_before = pool_bytes_in_use();
    const double device = gpu::pair_potential_sum_device(d.d, d.d + d.n, d.d + 2 * d.n, d.n, in, stream);
    CHECK(pool_bytes_in_use() == pool_before);   // the mesh, the sorted copy, the sums went back
    const double host_mesh = evaluator->pair_potential_sum(in);
    std::printf("cut %.1f: pair sum, device mesh %.17e, host mesh %.17e, brute force %.17e (%.1e)\n", cut, device,
                host_mesh, brute, device / brute - 1);
    CHECK(brute > 0);
    CHECK(device == doctest::Approx(brute).epsilon(1e-12));
    // The device's cell order is the host's (a stable sort by cell), the kernel and the
    // block sums are one: the same bits.
    CHECK(device == host_mesh);
    // Deterministic: the same bits again.
    CHECK(gpu::pair_potential_sum_device(d.d, d.d + d.n, d.d + 2 * d.n, d.n, in, stream) == device);
  }
  // Over ranks: the last positions are another rank's ghosts (this rank's share of the pairs,
  // the CPU sum's rule), and positions may lie outside the box (a refitted forest's, wrapped as
  // read): the CPU sum of the wrapped positions with the same ghosts, to rounding.
  PairPotentialInput with_ghosts;
  with_ghosts.positions = &pos;
  with_ghosts.box = box;
  with_ghosts.r_s = 12.7 / 5;
  with_ghosts.cut = 12.7;
  with_ghosts.softening = 0.02;
  with_ghosts.ghosts = pos.size() / 3;
  const double cpu = pair_potential_sum_cpu(with_ghosts);
  std::vector<Vec3d> moved = pos;
  for (std::size_t i = 0; i < moved.size(); i += 7) moved[i].x += moved[i].x < box / 2 ? box : -box;
  const DevicePositions m(moved);
  std::vector<Vec3d> wrapped = moved;
  for (Vec3d& x : wrapped)
    for (int k = 0; k < 3; ++k) x[k] = periodic_wrap_position(x[k], box);
  with_ghosts.positions = &wrapped;
  const double cpu_moved = pair_potential_sum_cpu(with_ghosts);
  const double device_moved = gpu::pair_potential_sum_device(m.d, m.d + m.n, m.d + 2 * m.n, m.n, with_ghosts, stream);
  std::printf("with %zu ghosts: device %.17e, CPU %.17e (%.1e); the CPU's before the moves %.17e\n",
              with_ghosts.ghosts, device_moved, cpu_moved, device_moved / cpu_moved - 1, cpu);
  CHECK(device_moved == doctest::Approx(cpu_moved).epsilon(1e-12));
  CHECK(cpu_moved == doctest::Approx(cpu).epsilon(1e-12));   // a whole box away: the same pairs
  with_ghosts.ghosts = 0;
  CHECK(gpu::pair_potential_sum_device(m.d, m.d + m.n, m.d + 2 * m.n, m.n, with_ghosts, stream) !=
        doctest::Approx(device_moved).epsilon(1e-6));   // the ghosts' share is not all the pairs
  cudaStreamDestroy(stream);
}

TEST_CASE("the CUDA step engine's W: the existing path's, the CPU backend's; nothing kept, the same bits again") {
  test::require_gpu_or_skip();
  // Double meshes: the cuFFT and FFTW mesh terms then agree to ~1e-12 (float: 1e-6).
  const std::string double_mesh = "pm_mesh_precision = \"double\"\n";
  for (const std::string& mesh : {std::string(), double_mesh}) {
    CAPTURE(mesh);
    const Params params = engine_params("cuda", mesh);
    Particles p = test::clustered_particle_set(16, 32.0, 99);
    p.mom.assign(p.size(), Vec3d{0, 0, 0});
    // The existing path: the particles on the host, the CUDA evaluator's pair sum (its mesh
    // built on the host), the check's own CudaPmSolver.
    const PotentialEnergy host = EnergyCheck(params).potential(p);
    CudaStepEngine engine(params);
    engine.load(p);
    const std::uint64_t pool_before = pool_bytes_in_use();
    // The engine offers the terms (else the check below would take the host path unseen).
    const std::optional<PotentialEnergyTerms> terms = engine.potential_energy_terms(request_for(params));
    REQUIRE(terms.has_value());
    CHECK(terms->count == p.size());
    CHECK(terms->mass == p.mass);
    CHECK(!terms->mesh_from_forces);   // no force pass announced it: a pass of its own
    EnergyCheck check(params);
    const PotentialEnergy w = check.potential(engine);
    CHECK(pool_bytes_in_use() == pool_before);
    std::printf("%s mesh: aW from the engine %.15e (mesh %.15e, pairs %.15e), host path %.15e (mesh %.15e, pairs "
                "%.15e)\n", mesh.empty() ? "float" : "double", w.total(), w.mesh, w.pairs, host.total(), host.mesh,
                host.pairs);
    // The same positions, the same kernels, the same order of every sum: the same bits.
    CHECK(w.mesh == host.mesh);
    CHECK(w.pairs == host.pairs);
    CHECK(w.self == host.self);
    CHECK(w.background == host.background);
    CHECK(w.total() == doctest::Approx(host.total()).epsilon(1e-12));
    // Deterministic, and the engine's particles are where they were.
    const PotentialEnergy again = check.potential(engine);
    CHECK(again.mesh == w.mesh);
    CHECK(again.pairs == w.pairs);
    const Particles& after = engine.particles();
    CHECK(std::memcmp(after.pos.data(), p.pos.data(), p.size() * sizeof(Vec3d)) == 0);
    // The CPU backend's W (FFTW mesh, the CPU pair sum with its erfc table): the pairs to
    // 1e-11; the whole W to the mesh precision of the pieces (they cancel in W).
    const PotentialEnergy cpu = EnergyCheck(engine_params("cpu", mesh)).potential(p);
    CHECK(w.pairs == doctest::Approx(cpu.pairs).epsilon(1e-11));
    const double scale = std::abs(cpu.mesh) + std::abs(cpu.pairs) + cpu.self + cpu.background;
    const double bar = mesh.empty() ? 1e-6 : 1e-11;
    std::printf("  CPU backend aW %.15e: |difference| / sum of |terms| %.1e (bar %.0e)\n", cpu.total(),
                std::abs(w.total() - cpu.total()) / scale, bar);
    CHECK(std::abs(w.total() - cpu.total()) < bar * scale);
  }
}

TEST_CASE("the CUDA step engine's mesh term from the force pass: its own pass's bits, and not after a drift") {
  test::require_gpu_or_skip();
  for (const std::string& mesh : {std::string(), std::string("pm_mesh_precision = \"double\"\n")}) {
    CAPTURE(mesh);
    const Params params = engine_params("cuda", mesh);
    Particles p = test::clustered_particle_set(16, 32.0, 99);
    for (std::size_t i = 0; i < p.size(); ++i) {   // a drift that changes the clustering
      const double t = static_cast<double>(i);
      p.mom[i] = Vec3d{50 * std::sin(t), 50 * std::cos(1.3 * t), 50 * std::sin(2.1 * t)};
    }
    const PotentialEnergy host = EnergyCheck(params).potential(p);   // the PM's own pass, on the host's copy
    CudaStepEngine engine(params);
    engine.load(p);
    ForceStats stats;
    engine.expect_potential_energy(true);
    engine.compute_forces(true, 0, stats);
    const std::vector<Vec3d> acc_along = engine.accelerations();
    EnergyCheck check(params);
    const PotentialEnergy along = check.potential(engine);
    CHECK(host.mesh < 0);
    CHECK(check.last_mesh_from_forces());
    CHECK(along.mesh == host.mesh);   // the force pass's modes: the same bits
    CHECK(along.pairs == host.pairs);
    // The forces do not depend on it: a pass without the expectation gives the same bits.
    engine.compute_forces(true, 0, stats);
    const std::vector<Vec3d> acc_plain = engine.accelerations();
    REQUIRE(acc_plain.size() == acc_along.size());
    CHECK(std::memcmp(acc_plain.data(), acc_along.data(), acc_plain.size() * sizeof(Vec3d)) == 0);
    // After a drift the force pass's value is stale: the check sums the moved particles'.
    engine.expect_potential_energy(true);
    engine.compute_forces(true, 0, stats);
    engine.drift(0.05);
    const Particles& moved = engine.particles();
    const PotentialEnergy moved_host = EnergyCheck(params).potential(moved);
    const PotentialEnergy after = check.potential(engine);
    CHECK(!check.last_mesh_from_forces());
    CHECK(after.mesh == doctest::Approx(moved_host.mesh).epsilon(1e-12));
    CHECK(after.mesh != doctest::Approx(host.mesh).epsilon(1e-6));
  }
}

TEST_CASE("a run on the CUDA step engine logs the W the host path gives for its particles") {
  test::require_gpu_or_skip();
  test::ScratchDir dir("energy_device_run");
  // The run's last check (at its end, z = 2) comes from the engine's device positions. The
  // mesh is set: the host path's EnergyCheck must use the run's (an automatic one is chosen
  // by the run, 3N on one GPU).
  const Params params = Params::parse(
      "[box]\nsize_mpc_h = 32.0\nparticles_per_side = 32\n[gravity]\npm_grid_side = 96\n[ic]\nz_init = 19.0\nseed = 5\n"
      "[time]\nz_final = 2.0\noutput_redshifts = [2.0]\n[analysis]\npk = false\nfof = false\nenergy_check_every = 8\n"
      "[gpu]\nbackend = \"cuda\"\n[output]\nsnapshots = false\ndirectory = \"" + dir.path() + "\"\n",
      "energy_device_run.toml");
  Simulation sim(params);
  const RunSummary summary = sim.run();
  REQUIRE(!sim.energy_checks().empty());
  const EnergyCheckRecord& last = sim.energy_checks().back();
  CHECK(last.a == doctest::Approx(summary.a_final).epsilon(1e-14));
  const double aw = EnergyCheck(params).potential(sim.particles()).total();
  std::printf("run on the CUDA engine: the last check's aW %.15e, the host path's for the final particles %.15e\n",
              last.aw, aw);
  CHECK(last.aw == doctest::Approx(aw).epsilon(1e-12));
  // Every check (the start, every 8 PM steps, the end) took its mesh term from the force pass
  // the run loop announced it to (Simulation's w_due, StepEngine::expect_potential_energy).
  CHECK(sim.energy_checks_from_forces() == static_cast<std::int64_t>(sim.energy_checks().size()));
}
