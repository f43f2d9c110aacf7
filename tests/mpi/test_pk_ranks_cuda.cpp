// P(k) over ranks on the GPUs (gpu/power_spectrum_cuda_ranks.hpp: the meshes in x slabs over
// the ranks' GPUs) against independent paths to the same spectrum:
// - the host estimator over the same ranks (measure_power_spectrum: FFTW's reproducible lines
//   on x slabs, bitwise its one-rank value, tests/mpi/test_pk_ranks) and the one-GPU spectrum
//   of all the particles (gpu/power_spectrum_cuda.cuh: one 3D cuFFT). All three assign the
//   same fixed-point counts (the same double mesh values) and weigh the modes with the same
//   tables, so they differ only by the transforms' rounding and the order of the bins' sums.
//   Bar. A double FFT's error in a mode is ~1e-16 log2(n^3) (~3e-15 here) of the rms mode;
//   the clustered set's modes are within ~10^2 of the rms in amplitude, interlacing cancels
//   the aliased part near the Nyquist frequency (a factor of a few), and a bin averages its
//   modes' errors: ~1e-12 of a bin's power at worst. The bar is 1e-10 of the power in every
//   bin (the measured value is printed); mode counts and folds exactly; k_mean and shot noise,
//   sums of the same terms in other orders, to 1e-12.
//   Particles: the clustered set (sheets, filaments, a Plummer halo across the box corner and
//   a compact one), with particles at and around every slab boundary, at the periodic seam
//   and outside the box, spread over the ranks unevenly (the last rank none in some cases);
//   TSC and CIC, interlaced and not, folds 1, 2 and 3, linear and log bins, a bin count of its
//   own with the shot noise subtracted; mesh sides 3 ranks do not divide, slabs thinner than
//   the ghost planes, a rank with no plane. The value is the same bits on every rank, at
//   every call and for the particles dealt out over the ranks differently, and every byte the
//   call takes from the device pool goes back. At the headline's size (256^3 particles, 512^3
//   mesh, each rank its x slab of the box) the times of both are printed.
// - the CUDA step engine over ranks (CudaStepEngine::power_spectrum): its spectrum equals the
//   one-rank engine's (the one-GPU spectrum) on the same particles, to the same bar, after a
//   PM step's domain update (migration) and a drift.
// - a short run with the CUDA backend over ranks: its outputs' P(k) files equal the one-rank
//   run's, at the starting output (the ICs, the same positions: the same bar) and at the end
//   (positions ~1e-7 of the box apart after a few steps: 1e-3, see the test).
// All ranks share the machine's GPUs (local rank modulo devices); 77 (skipped) on every rank
// unless every rank has one.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/power_spectrum.hpp"
#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/params.hpp"
#include "gpu/power_spectrum_cuda.cuh"
#include "gpu/pm_cuda_ranks.hpp"
#include "gpu/power_spectrum_cuda_ranks.hpp"
#include "gpu/step_engine_cuda.hpp"
#include "integrate/simulation.hpp"
#include "io/hdf5_file.hpp"
#include "support/clustered_particles.hpp"
#include "support/device_positions.hpp"
#include "support/gpu_ranks.hpp"
#include "support/mpi_scratch.hpp"
#include "support/power_spectrum_bits.hpp"
#include "support/rank_shares.hpp"

using orbis::Comm;
using orbis::PowerSpectrum;
using orbis::PowerSpectrumSettings;
using orbis::Vec3d;

using orbis::test::DevicePositions;

namespace {

constexpr double kPowerBar = 1e-10;   // relative, every bin (see the header)
constexpr double kSumsBar = 1e-12;    // k_mean and shot noise

// tests/support/rank_shares.hpp's set that probes the slabs, with more particles outside the
// box (every estimator wraps them).
std::vector<Vec3d> test_particles(double box, int n, int ranks) {
  std::vector<Vec3d> all = orbis::test::slab_boundary_particles(box, n, ranks);
  for (std::size_t p = 3; p < all.size(); p += 101) all[p].z -= box;
  for (std::size_t p = 7; p < all.size(); p += 97) all[p].x += box;
  return all;
}

double relative(double x, double reference) { return std::abs(x - reference) / std::max(std::abs(reference), 1e-300); }

// True on every rank when every rank holds the same bits of pk.
bool same_on_every_rank(const PowerSpectrum& pk, const Comm& comm) {
  std::vector<double> mine;
  for (const auto& b : pk.bins) {
    mine.push_back(b.k_mean);
    mine.push_back(b.power);
    mine.push_back(b.shot_noise);
    mine.push_back(static_cast<double>(b.modes));
    mine.push_back(b.fold);
  }
  const std::vector<double> all = comm.allgatherv(mine);
  bool same = all.size() == mine.size() * static_cast<std::size_t>(comm.size());
  for (std::size_t at = 0; same && at < all.size(); at += mine.size())
    same = std::memcmp(all.data() + at, mine.data(), mine.size() * sizeof(double)) == 0;
  return comm.all(same);
}

// Row by row against a reference; the largest relative power difference. No REQUIRE: the
// callers' collectives follow. The power is compared relative to itself, but no finer than
// 1e-9 of the largest bin's: a set tiled 2 x 2 x 2 has no power at the box's odd modes in
// exact arithmetic (its lowest bin holds only rounding, measured 8e-2 apart relatively).
double compare(const PowerSpectrum& pk, const PowerSpectrum& reference) {
  CHECK(pk.num_particles == reference.num_particles);
  CHECK(pk.bins.size() == reference.bins.size());
  CHECK(reference.bins.size() >= 2);
  double largest = 0;
  for (const orbis::PowerSpectrumBin& h : reference.bins) largest = std::max(largest, std::abs(h.power));
  double worst = 0;
  for (std::size_t i = 0; i < std::min(pk.bins.size(), reference.bins.size()); ++i) {
    const orbis::PowerSpectrumBin& d = pk.bins[i];
    const orbis::PowerSpectrumBin& h = reference.bins[i];
    INFO("bin " << i << " k = " << h.k_mean << " modes " << h.modes << " fold " << h.fold);
    CHECK(d.modes == h.modes);
    CHECK(d.fold == h.fold);
    CHECK(relative(d.k_mean, h.k_mean) < kSumsBar);
    CHECK(relative(d.shot_noise, h.shot_noise) < kSumsBar);
    const double r = std::abs(d.power - h.power) / std::max(std::abs(h.power), 1e-9 * largest);
    CHECK(r < kPowerBar);
    worst = std::max(worst, r);
  }
  return worst;
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

std::string describe(const PowerSpectrumSettings& s, int ranks, bool empty_last) {
  return std::to_string(s.grid_side) + "^3 " + orbis::window_name(s.window) + (s.interlacing ? " interlaced" : "") +
         " fold " + std::to_string(s.fold_factor) + (s.log_bins ? " log" : " linear") + " bins " +
         std::to_string(s.num_bins) + (s.subtract_shot_noise ? " shot noise subtracted" : "") +
         (empty_last ? ", last rank empty, " : ", ") + std::to_string(ranks) + " ranks";
}

}  // namespace

TEST_CASE("P(k) over ranks on the GPUs: the host estimator's and the one-GPU spectrum's to the transforms' rounding") {
  const Comm world = Comm::world();
  const int device = orbis::test::rank_gpu_or_skip(world);
  const double box = 50.0;
  struct Case {
    int mesh;
    orbis::Window window;
    bool interlacing;
    int fold;
    bool log_bins;
    int num_bins;
    bool subtract_shot_noise;
    bool empty_last_rank;
  };
  const Case cases[] = {
      {32, orbis::Window::tsc, true, 1, false, 0, false, false},   // 3 ranks: 11, 11, 10 planes
      {32, orbis::Window::cic, false, 2, false, 0, false, true},
      {20, orbis::Window::tsc, true, 2, true, 0, false, true},     // 3 ranks: 7, 7, 6
      {24, orbis::Window::cic, true, 3, false, 7, true, false},
      {6, orbis::Window::tsc, true, 1, false, 0, false, false},    // 2 planes a rank, 3 ghost planes
      {4, orbis::Window::tsc, false, 2, false, 0, false, true},    // 3 ranks: 2, 2 and 0 planes
  };
  orbis::gpu::CudaPowerSpectrumRanks estimator(world, device);
  orbis::gpu::CudaPowerSpectrum one_gpu;
  double worst_host = 0, worst_one_gpu = 0;
  for (const Case& c : cases) {
    PowerSpectrumSettings s;
    s.grid_side = c.mesh;
    s.window = c.window;
    s.interlacing = c.interlacing;
    s.fold_factor = c.fold;
    s.log_bins = c.log_bins;
    s.num_bins = c.num_bins;
    s.subtract_shot_noise = c.subtract_shot_noise;
    const std::string what = describe(s, world.size(), c.empty_last_rank);
    INFO(what);
    const std::vector<Vec3d> all = test_particles(box, c.mesh, world.size());
    const std::vector<Vec3d> mine = orbis::test::uneven_share(all, world, c.empty_last_rank, 0);
    if (c.empty_last_rank && world.size() > 1 && world.rank() == world.size() - 1) CHECK(mine.empty());

    // The references: the host estimator over the same ranks, the one-GPU spectrum of all.
    const PowerSpectrum host = orbis::measure_power_spectrum(mine, box, s, {}, world);
    const DevicePositions every(all, device);
    const PowerSpectrum single =
        one_gpu.measure(every.data(), every.data() + all.size(), every.data() + 2 * all.size(), all.size(), box, s,
                        nullptr);

    const DevicePositions positions(mine, device);
    const std::size_t estimate = estimator.device_bytes(mine.size(), box, s);
    const std::uint64_t pool_before = pool_bytes_in_use(device);
    const std::optional<PowerSpectrum> pk = estimator.measure(positions.data(), mine.size(), box, s, nullptr);
    const std::uint64_t pool_after = pool_bytes_in_use(device);
    CHECK(pk.has_value());
    if (!pk) continue;   // on every rank alike
    const double vs_host = compare(*pk, host), vs_one_gpu = compare(*pk, single);
    worst_host = std::max(worst_host, vs_host);
    worst_one_gpu = std::max(worst_one_gpu, vs_one_gpu);
    if (world.is_root())
      std::printf("%-72s %zu bins: power vs host %.1e, vs one GPU %.1e (bar %.0e); %s; %.2f MiB a rank (estimate)\n",
                  what.c_str(), pk->bins.size(), vs_host, vs_one_gpu, kPowerBar, estimator.last_phases().c_str(),
                  static_cast<double>(estimate) / (1 << 20));
    CHECK(same_on_every_rank(*pk, world));
    CHECK(world.all(pool_after == pool_before));   // every byte back to the pool
    CHECK(std::isnan(pk->bins.front().linear));

    // The same bits again, and with the particles dealt out over the ranks differently (the
    // counts' integer sums do not see who held a particle).
    const std::optional<PowerSpectrum> again = estimator.measure(positions.data(), mine.size(), box, s, nullptr);
    CHECK((again && orbis::test::same_bits(*again, *pk)));
    const std::vector<Vec3d> other = orbis::test::uneven_share(all, world, false, 3);
    const DevicePositions other_positions(other, device);
    const std::optional<PowerSpectrum> redealt =
        estimator.measure(other_positions.data(), other.size(), box, s, nullptr);
    CHECK((redealt && orbis::test::same_bits(*redealt, *pk)));
  }
  if (world.is_root())
    std::printf("P(k) over %d ranks on the GPUs: largest relative power difference %.3e vs the host, %.3e vs one GPU\n",
                world.size(), worst_host, worst_one_gpu);
  std::fflush(stdout);
}

// The transposes through the force PM's exchange (CUDA IPC, device to device) move the same
// bytes as those through host memory: the same spectrum, bit for bit.
TEST_CASE("P(k) over ranks on the GPUs: the transposes borrowed from the force PM's exchange give the same bits") {
  const Comm world = Comm::world();
  const int device = orbis::test::rank_gpu_or_skip(world);
  const double box = 50.0;
  orbis::PmSettings forces;   // a float mesh whose transposes move more bytes than the P(k)'s
  forces.box_mpc_h = box;
  forces.grid_side = 64;
  forces.r_s_mpc_h = 1.25 * box / forces.grid_side;
  std::string why;
  std::unique_ptr<orbis::CudaPmRanks> pm = orbis::make_cuda_pm_ranks(forces, world, device, &why);
  REQUIRE_MESSAGE(pm != nullptr, why);
  const std::vector<Vec3d> all = test_particles(box, 32, world.size());
  const std::vector<Vec3d> mine = orbis::test::uneven_share(all, world, false, 0);
  std::vector<Vec3d> acc;
  pm->accelerations(mine, 0.7, acc);   // chooses the exchange
  orbis::gpu::DeviceAlltoallv* lent = pm->peer_transposes();
  CHECK(world.all(lent != nullptr) == world.any(lent != nullptr));   // the choice is every rank's
  if (!lent) {
    MESSAGE("no CUDA IPC between these ranks' devices: nothing to borrow");
    return;
  }
  orbis::gpu::CudaPowerSpectrumRanks estimator(world, device);
  const DevicePositions positions(mine, device);
  for (const bool interlacing : {true, false}) {
    PowerSpectrumSettings s;
    s.grid_side = 32;
    s.interlacing = interlacing;
    INFO(describe(s, world.size(), false));
    const std::optional<PowerSpectrum> staged = estimator.measure(positions.data(), mine.size(), box, s, nullptr);
    const std::optional<PowerSpectrum> peer =
        estimator.measure(positions.data(), mine.size(), box, s, nullptr, lent);
    CHECK(staged.has_value());
    CHECK((peer && staged && orbis::test::same_bits(*peer, *staged)));
  }
}

TEST_CASE("P(k) over ranks on the GPUs: no particles anywhere and bad settings are every rank's error") {
  const Comm world = Comm::world();
  const int device = orbis::test::rank_gpu_or_skip(world);
  orbis::gpu::CudaPowerSpectrumRanks estimator(world, device);
  PowerSpectrumSettings s;
  s.grid_side = 16;
  const DevicePositions none(std::vector<Vec3d>{}, device);
  CHECK_THROWS_AS(estimator.measure(none.data(), 0, 50.0, s, nullptr), orbis::Error);
  s.grid_side = 15;
  CHECK_THROWS_AS(estimator.measure(none.data(), 0, 50.0, s, nullptr), orbis::Error);
  s.grid_side = 16;
  s.fold_factor = 0;
  CHECK_THROWS_AS(estimator.measure(none.data(), 0, 50.0, s, nullptr), orbis::Error);
}

TEST_CASE("P(k) over ranks of the headline's size: 256^3 clustered particles on a 512^3 mesh, interlaced TSC") {
  const Comm world = Comm::world();
  const int device = orbis::test::rank_gpu_or_skip(world);
  // The 128^3 clustered set tiled 2 x 2 x 2 into a box twice as large: 256^3 particles, each
  // rank those of its x slab of the box (as ORB domains of a few ranks nearly are).
  constexpr double kBig = 1000.0;
  const std::vector<Vec3d> tile = orbis::test::clustered_particles(128, kBig / 2, 20261129);
  std::vector<Vec3d> mine;
  for (int t = 0; t < 8; ++t)
    for (const Vec3d& x : tile) {
      const Vec3d p{x.x + (t & 1) * kBig / 2, x.y + (t >> 1 & 1) * kBig / 2, x.z + (t >> 2 & 1) * kBig / 2};
      const int rank = std::min(static_cast<int>(p.x / kBig * world.size()), world.size() - 1);
      if (rank == world.rank()) mine.push_back(p);
    }
  PowerSpectrumSettings s;
  s.grid_side = 512;
  orbis::gpu::CudaPowerSpectrumRanks estimator(world, device);
  const DevicePositions positions(mine, device);
  const auto measure = [&](double& seconds) {
    world.barrier();
    const auto start = std::chrono::steady_clock::now();
    std::optional<PowerSpectrum> pk = estimator.measure(positions.data(), mine.size(), kBig, s, nullptr);
    seconds = world.max(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return pk;
  };
  double first = 0, again = 0, host_seconds = 0;
  const std::optional<PowerSpectrum> planned = measure(first);   // the cuFFT plans made
  const std::optional<PowerSpectrum> pk = measure(again);
  CHECK(planned.has_value());
  CHECK(pk.has_value());
  if (!pk) return;   // on every rank alike
  CHECK(pk->bins.size() == 256);
  CHECK(pk->num_particles == 256u * 256u * 256u);
  const std::string phases = estimator.last_phases();
  world.barrier();
  const auto start = std::chrono::steady_clock::now();
  const PowerSpectrum host = orbis::measure_power_spectrum(mine, kBig, s, {}, world);
  host_seconds = world.max(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  const double worst = compare(*pk, host);
  if (world.is_root())
    std::printf("P(k) of 256^3 particles on 512^3 over %d ranks on the GPUs: %.1f ms (first call, the plans made), "
                "%.1f ms after (%s); the host estimator over the same ranks %.1f ms; power vs host %.1e\n",
                world.size(), 1e3 * first, 1e3 * again, phases.c_str(), 1e3 * host_seconds, worst);
  std::fflush(stdout);
}

namespace {

orbis::Params engine_params() {
  return orbis::Params::parse(
      "[box]\nsize_mpc_h = 100.0\nparticles_per_side = 16\n"
      "[gpu]\nbackend = \"cuda\"\ntree_rebuild_every = 1\n"
      "[gravity]\nsolver = \"treepm\"\ntop_node_particles = 64\n"
      "[analysis]\npk_grid_side = 40\npk_fold_factor = 2\n",
      "pk_ranks_cuda.toml");
}

}  // namespace

TEST_CASE("the CUDA engine's P(k) over ranks equals the one-rank engine's to the transforms' rounding") {
  const Comm world = Comm::world();
  const int device = orbis::test::rank_gpu_or_skip(world);
  const double box = 100.0;
  orbis::Particles all = orbis::test::clustered_particle_set(16, box, 99);
  all.time_bin.assign(all.size(), 0);
  for (std::size_t i = 0; i < all.size(); ++i) all.mom[i] = Vec3d{std::sin(0.1 * i), std::cos(0.3 * i), 0.2} * 300.0;
  const orbis::Params params = engine_params();
  const PowerSpectrumSettings s = PowerSpectrumSettings::from_params(params);
  orbis::CudaStepEngine reference(params, device, Comm::self());
  orbis::CudaStepEngine engine(params, device, world);
  reference.load(all);
  engine.load(orbis::test::strided_share(all, world));   // the PM step's domain update migrates most
  for (orbis::CudaStepEngine* e : {&reference, &engine}) {
    orbis::ForceStats stats;
    e->compute_forces(true, 0, stats);   // over ranks: the domains updated, the particles migrated
    e->drift(3e-3);                      // the same arithmetic per particle on both
  }
  const std::optional<PowerSpectrum> one = reference.power_spectrum(s);
  const std::optional<PowerSpectrum> many = engine.power_spectrum(s);
  CHECK(one.has_value());
  CHECK(many.has_value());   // on every rank alike
  if (!one || !many) return;
  INFO(world.size() << " ranks, " << describe(s, world.size(), false));
  const double worst = compare(*many, *one);
  // And the host estimator on the engine's own particles over the ranks.
  const PowerSpectrum host = orbis::measure_power_spectrum(engine.particles().pos, box, s, {}, world);
  const double vs_host = compare(*many, host);
  if (world.is_root())
    std::printf("CUDA engine over %d ranks: P(k) vs the one-rank engine's %.1e, vs the host estimator %.1e (bar %.0e)\n",
                world.size(), worst, vs_host, kPowerBar);
  CHECK(same_on_every_rank(*many, world));
  CHECK(world.sum<std::uint64_t>(engine.particles().size()) == all.size());
}

namespace {

orbis::Params run_params(const std::string& directory) {
  // tests/mpi/test_run_ranks_cuda.cpp's run, shorter, with an output at the start (the ICs)
  // and P(k) folded; no snapshots or catalogues.
  return orbis::Params::parse(
      "[box]\nsize_mpc_h = 64.0\nparticles_per_side = 16\n[ic]\nz_init = 1.0\nseed = 4242\n"
      "[gpu]\nbackend = \"cuda\"\ntree_max_refits = 0\n[gravity]\ntop_node_particles = 64\n"
      "[time]\nz_final = 0.9\noutput_redshifts = [1.0, 0.9]\n"
      "[analysis]\nfof = false\npk_fold_factor = 2\n[output]\nsnapshots = false\ndirectory = \"" + directory + "\"\n",
      "pk_ranks_cuda_run.toml");
}

struct PkFile {
  std::vector<double> k, power, shot;
  std::vector<std::int64_t> modes;
  std::vector<std::int32_t> fold;
};

PkFile read_pk(const std::string& path) {
  const orbis::H5Reader f(path);
  return {f.read<double>("/PowerSpectrum/K"), f.read<double>("/PowerSpectrum/Power"),
          f.read<double>("/PowerSpectrum/ShotNoise"), f.read<std::int64_t>("/PowerSpectrum/NumModes"),
          f.read<std::int32_t>("/PowerSpectrum/Fold")};
}

double largest_power_difference(const PkFile& a, const PkFile& b) {
  CHECK(a.power.size() == b.power.size());
  CHECK(a.power.size() > 10);
  CHECK(a.modes == b.modes);
  CHECK(a.fold == b.fold);
  double worst = 0;
  for (std::size_t i = 0; i < std::min(a.power.size(), b.power.size()); ++i) {
    CHECK(relative(b.k[i], a.k[i]) < kSumsBar);
    CHECK(relative(b.shot[i], a.shot[i]) < kSumsBar);
    worst = std::max(worst, relative(b.power[i], a.power[i]));
  }
  return worst;
}

}  // namespace

TEST_CASE("a run's P(k) outputs with the CUDA engine over ranks equal the one-rank run's") {
  const Comm world = Comm::world();
  orbis::test::rank_gpu_or_skip(world);
  const orbis::test::SharedScratchDir dir("pk_ranks_cuda", world);
  const std::string one = dir.file("one"), many = dir.file("many");
  if (world.is_root()) orbis::Simulation(run_params(one), {}, Comm::self()).run();
  world.barrier();
  const orbis::RunSummary summary = orbis::Simulation(run_params(many), {}, world).run();
  if (!world.is_root()) return;
  MESSAGE(world.size() << " ranks, " << summary.steps << " steps");
  CHECK(summary.steps > 0);
  // The starting output: the ICs, the same positions on any rank count.
  const double start = largest_power_difference(read_pk(one + "/powerspec_000.hdf5"),
                                                read_pk(many + "/powerspec_000.hdf5"));
  // The end: the ranks' forces differ from one rank's by the transforms' and the forest's
  // float rounding (tests/mpi/test_run_ranks_cuda), which moves the particles by ~1e-7 of the
  // box over these few steps; a bin's power moves by ~2 k dx of its modes (k dx < 3.2 h/Mpc x
  // 6.4e-6 Mpc/h ~ 2e-5 for dx ~ 1e-7 of the box), averaged over them: 1e-3 is a wide bar
  // for a check that the path works after steps, when the positions are no longer the ICs'.
  const double end = largest_power_difference(read_pk(one + "/powerspec_001.hdf5"),
                                              read_pk(many + "/powerspec_001.hdf5"));
  MESSAGE("largest relative power difference from the one-rank run: " << start << " at the start (bar " << kPowerBar
                                                                      << "), " << end << " at the end (bar 1e-3)");
  CHECK(start < kPowerBar);
  CHECK(end < 1e-3);
}
