// The device friends-of-friends (gpu/fof_cuda.cuh) against the host linker (analysis/fof.hpp,
// the reference: its groups are what the catalogues hold) as partitions: the labels (each
// particle's smallest group-member index) must be equal, particle for particle, on uniform
// sets (pairs and small groups up to near percolation), clumps across the box's faces,
// edges and corners, grids of one and two coarse cells per side (periodic images aliasing one
// cell), the test suite's clustered set, and pairs placed at the linking length to within a
// few ulps across the faces (decided by rounding: the device must round as the host does),
// plus pairs at exactly the linking length (linked: <=) and one ulp beyond (not). The small
// sets are also checked against a brute-force search. Then the CUDA step engine's hook
// (StepEngine::fof_labels) after a drift: its labels index particles() and give the host
// path's catalogue bit for bit; and a run's catalogues (made from the engine's groups) are the
// host finder's of its snapshots. Bad positions are refused. Returns 77 without a usable GPU.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "analysis/fof.hpp"
#include "analysis/halo_catalogue.hpp"
#include "core/error.hpp"
#include "core/params.hpp"
#include "gpu/fof_cuda.cuh"
#include "gpu/step_engine_cuda.hpp"
#include "integrate/simulation.hpp"
#include "io/catalogue.hpp"
#include "io/snapshot.hpp"
#include "support/clustered_particles.hpp"
#include "support/fof_labels.hpp"
#include "support/fof_samples.hpp"
#include "support/gpu_skip.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;

namespace {

// The positions as x | y | z blocks in device memory.
class DevicePositions {
 public:
  explicit DevicePositions(const std::vector<Vec3d>& pos) : n_(pos.size()) {
    std::vector<double> soa(3 * n_);
    for (std::size_t p = 0; p < n_; ++p)
      for (int d = 0; d < 3; ++d) soa[d * n_ + p] = pos[p][d];
    REQUIRE(cudaMalloc(&data_, std::max<std::size_t>(soa.size(), 1) * sizeof(double)) == cudaSuccess);
    REQUIRE(cudaMemcpy(data_, soa.data(), soa.size() * sizeof(double), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~DevicePositions() { cudaFree(data_); }
  DevicePositions(const DevicePositions&) = delete;
  DevicePositions& operator=(const DevicePositions&) = delete;
  std::vector<std::uint32_t> labels(double box, double link) const {
    return gpu::fof_labels(data_, data_ + n_, data_ + 2 * n_, n_, box, link, nullptr);
  }

 private:
  std::size_t n_;
  double* data_ = nullptr;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Device labels equal to the host linker's (and to the brute force's for small sets).
void check_set(const std::vector<Vec3d>& pos, double box, double link, const std::string& what) {
  INFO(what << ": " << pos.size() << " particles, link " << link);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::uint32_t> host = testing::host_fof_labels(pos, box, link);
  const double host_s = seconds_since(t0);
  const DevicePositions on_device(pos);
  const auto t1 = std::chrono::steady_clock::now();
  const std::vector<std::uint32_t> device = on_device.labels(box, link);
  const double device_s = seconds_since(t1);
  REQUIRE(device.size() == host.size());
  std::size_t differ = 0, first = 0;
  for (std::size_t i = 0; i < host.size(); ++i)
    if (device[i] != host[i] && differ++ == 0) first = i;
  CAPTURE(first);
  CHECK(differ == 0);
  if (pos.size() <= 5000) CHECK(testing::brute_force_labels(pos, box, link) == host);
  std::printf("fof %s: %zu particles, %zu groups of >= 2, %zu of >= 32; host %.3f s, device %.3f s\n", what.c_str(),
              pos.size(), testing::count_groups(host, 2), testing::count_groups(host, 32), host_s, device_s);
}

// Plummer clumps across faces, an edge and a corner, and inside, in a uniform background.
std::vector<Vec3d> clumpy(std::uint64_t seed, double box) {
  std::mt19937_64 rng(seed);
  std::vector<Vec3d> pos;
  testing::add_uniform(pos, 6000, box, rng);
  testing::add_plummer(pos, 2000, {0.02 * box, 0.5 * box, 0.5 * box}, 0.01 * box, 0.1 * box, box, rng);   // face
  testing::add_plummer(pos, 1500, {0.99 * box, 0.005 * box, 0.3 * box}, 0.008 * box, 0.08 * box, box, rng);   // edge
  testing::add_plummer(pos, 1000, {0.999 * box, 0.999 * box, 0.001 * box}, 0.005 * box, 0.05 * box, box, rng); // corner
  testing::add_plummer(pos, 3000, {0.4 * box, 0.6 * box, 0.7 * box}, 0.003 * box, 0.05 * box, box, rng);   // dense
  return pos;
}

}  // namespace

TEST_CASE("device FoF: the host linker's groups on uniform, clumpy, tiny and clustered sets") {
  test::require_gpu_or_skip();
  {
    std::mt19937_64 rng(1);
    std::vector<Vec3d> pos;
    testing::add_uniform(pos, 4000, 10.0, rng);
    for (double b : {0.2, 0.5, 0.8}) check_set(pos, 10.0, fof::linking_length(pos.size(), 10.0, b), "uniform");
  }
  {
    const std::vector<Vec3d> pos = clumpy(2, 50.0);
    for (double b : {0.2, 0.4}) check_set(pos, 50.0, fof::linking_length(pos.size(), 50.0, b), "clumpy");
  }
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {   // one or two coarse cells per side
    std::mt19937_64 rng(100 + seed);
    std::vector<Vec3d> pos;
    testing::add_uniform(pos, seed % 2 ? 20 : 45, 1.0, rng);
    for (double link : {0.22, 0.3, 0.45}) {
      CHECK(fof::grid_shape(1.0, link, pos.size()).coarse_side <= 2);
      check_set(pos, 1.0, link, "tiny " + std::to_string(seed));
    }
  }
  {
    const std::vector<Vec3d> pos = test::clustered_particles(64, 100.0, 2026);
    check_set(pos, 100.0, fof::linking_length(pos.size(), 100.0, 0.2), "clustered 64^3");
  }
}

TEST_CASE("device FoF: pairs at the linking length decide as on the host, across the faces too") {
  test::require_gpu_or_skip();
  // 1000 particles in a box of 100: spacing 10, b = 0.25 gives a linking length of 2.5, exact.
  constexpr double box = 100.0;
  constexpr std::size_t n = 1000;
  const double link = fof::linking_length(n, box, 0.25);
  REQUIRE(link == 2.5);
  std::vector<Vec3d> pos;
  pos.push_back({10.0, 50.0, 50.0});   // 0, 1: exactly l apart: friends
  pos.push_back({12.5, 50.0, 50.0});
  pos.push_back({20.0, 60.0, 50.0});   // 2, 3: one ulp beyond l: not friends
  pos.push_back({std::nextafter(22.5, 100.0), 60.0, 50.0});
  pos.push_back({99.0, 30.0, 30.0});   // 4, 5: exactly l across the x face: friends
  pos.push_back({1.5, 30.0, 30.0});
  // Pairs l + delta apart (delta a few ulps of the positions) from near the box's faces, across
  // them: these are decided by the rounding of each operation. Two pairs across the corner, 24
  // across the edges, the rest across one face each (sparse enough that few chain together).
  std::mt19937_64 rng(77);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const std::size_t first_pair = pos.size();
  for (std::size_t k = 0; pos.size() + 2 <= 700; ++k) {
    Vec3d a, dir;
    for (int d = 0; d < 3; ++d) {
      const bool cross = k < 2 ? true : k < 26 ? d != static_cast<int>(k % 3) : d == static_cast<int>(k % 3);
      if (cross) {
        const bool high = u(rng) < 0.5;
        const double inside = 0.9 * link * u(rng);
        a[d] = high ? box - inside : inside;
        if (a[d] >= box) a[d] = std::nextafter(box, 0.0);
        dir[d] = (high ? 1.0 : -1.0) * (0.3 + u(rng));
      } else {
        a[d] = 5 + 90 * u(rng);
        dir[d] = 2 * u(rng) - 1;
      }
    }
    dir *= 1.0 / std::sqrt(norm2(dir));
    const double length = link + (u(rng) - 0.5) * 6e-14;
    Vec3d b = a + dir * length;
    for (int d = 0; d < 3; ++d) b[d] = periodic_wrap_position(b[d], box);
    pos.push_back(a);
    pos.push_back(b);
  }
  testing::add_uniform(pos, n - pos.size(), box, rng);
  REQUIRE(pos.size() == n);

  const std::vector<std::uint32_t> host = testing::host_fof_labels(pos, box, link);
  CHECK(host[1] == host[0]);
  CHECK(host[3] != host[2]);
  CHECK(host[5] == host[4]);
  std::size_t linked = 0, pairs = 0;
  for (std::size_t k = first_pair; k + 1 < 700; k += 2, ++pairs) linked += host[k] == host[k + 1];
  INFO(linked << " of " << pairs << " near-l pairs linked by the host");
  CHECK(linked > pairs / 10);   // both outcomes occur: the test sees the rounding
  CHECK(linked < pairs - pairs / 10);
  // Pairs the other order of operations (x_b - (x_a - shift) for the host's x_a - (x_b + shift))
  // would decide otherwise: a device that took the wrong particle as the host's a would fail.
  std::size_t flips = 0;
  for (std::size_t k = first_pair; k + 1 < 700; k += 2) {
    double r2a = 0, r2b = 0;
    for (int d = 0; d < 3; ++d) {
      const double raw = pos[k][d] - pos[k + 1][d];
      const double shift = raw > box / 2 ? box : raw < -box / 2 ? -box : 0.0;
      const double ea = pos[k][d] - (pos[k + 1][d] + shift), eb = pos[k + 1][d] - (pos[k][d] - shift);
      r2a += ea * ea;
      r2b += eb * eb;
    }
    flips += (r2a <= link * link) != (r2b <= link * link);
  }
  CHECK(flips > 0);
  const std::vector<std::uint32_t> device = DevicePositions(pos).labels(box, link);
  CHECK(device == host);
}

TEST_CASE("device FoF: the CUDA engine's labels give the host path's catalogue, after a drift") {
  test::require_gpu_or_skip();
  constexpr int side = 32;
  constexpr double box = 100.0;
  const Params params = Params::parse(
      "[box]\nsize_mpc_h = " + std::to_string(box) + "\nparticles_per_side = " + std::to_string(side) +
          "\n[gpu]\nbackend = \"cuda\"\n[gravity]\nsolver = \"treepm\"\n[analysis]\nfof = true\nfof_min_members = 20\n",
      "fof_cuda.toml");
  Particles p = test::clustered_particle_set(side, box, 2027);
  std::mt19937_64 rng(5);
  std::normal_distribution<double> gauss(0.0, 300.0);
  for (auto& m : p.mom) m = Vec3d{gauss(rng), gauss(rng), gauss(rng)};
  CudaStepEngine engine(params);
  engine.load(p);
  engine.drift(2e-4);   // moves the particles (some across the faces), wrapped on the device
  const double b = fof::config_from_params(params).linking_length_over_spacing;
  const std::optional<std::vector<std::uint32_t>> labels = engine.fof_labels(b);
  REQUIRE(labels.has_value());
  const Particles& now = engine.particles();
  const double link = fof::linking_length(now.size(), box, b);
  CHECK(*labels == testing::host_fof_labels(now.pos, box, link));
  const GroupCatalogue host = halo::find_haloes(now, box, 0.5, params);
  const GroupCatalogue got = halo::find_haloes_from_labels(now, *labels, box, 0.5, params);
  CHECK(host.size() >= 3);
  CHECK(testing::catalogue_difference(got, host) == "");
  // Called again: the same labels (the pool's memory came back between the calls).
  CHECK(engine.fof_labels(b) == labels);
}

TEST_CASE("device FoF: positions outside the box and impossible sizes are refused with a message") {
  test::require_gpu_or_skip();
  std::vector<Vec3d> pos{{0.1, 0.2, 0.3}, {0.5, 0.5, 0.5}, {0.9, 0.1, 0.4}};   // 0 and 2: friends across x
  CHECK(DevicePositions(pos).labels(1.0, 0.3) == std::vector<std::uint32_t>{0, 1, 0});
  CHECK_THROWS_AS(DevicePositions(pos).labels(1.0, 0.6), Error);   // link >= box/2
  CHECK_THROWS_AS(DevicePositions(pos).labels(1.0, 0.0), Error);
  pos[1].y = 1.0;   // at the box's side: outside [0, box)
  CHECK_THROWS_AS(DevicePositions(pos).labels(1.0, 0.3), Error);
  pos[1].y = std::nan("");
  CHECK_THROWS_AS(DevicePositions(pos).labels(1.0, 0.3), Error);
  CHECK_THROWS_AS(DevicePositions(std::vector<Vec3d>{}).labels(1.0, 0.3), Error);
}

TEST_CASE("device FoF of the headline's size: 256^3 clustered particles, the host's groups, the time of each") {
  test::require_gpu_or_skip();
  // The 128^3 clustered set tiled 2 x 2 x 2 into a box twice as large (as the P(k) test's).
  constexpr double big = 256.0;
  const std::vector<Vec3d> tile = test::clustered_particles(128, big / 2, 2028);
  std::vector<Vec3d> pos;
  pos.reserve(8 * tile.size());
  for (int t = 0; t < 8; ++t)
    for (const Vec3d& x : tile)
      pos.push_back({x.x + (t & 1) * big / 2, x.y + (t >> 1 & 1) * big / 2, x.z + (t >> 2 & 1) * big / 2});
  check_set(pos, big, fof::linking_length(pos.size(), big, 0.2), "clustered 256^3");
}

TEST_CASE("GPU run: the catalogues made from the device's groups are the host finder's of the snapshots") {
  test::require_gpu_or_skip();
  test::ScratchDir dir("fof_cuda_run");
  const Params params = Params::parse(
      "[box]\nsize_mpc_h = 32.0\nparticles_per_side = 32\n[ic]\nz_init = 19.0\nseed = 78\n"
      "[time]\nz_final = 1.0\noutput_redshifts = [3.0, 1.0]\n"
      "[analysis]\npk = false\nfof = true\nfof_min_members = 10\n[gpu]\nbackend = \"cuda\"\n"
      "[output]\nsnapshots = true\ndirectory = \"" + dir.path() + "\"\n",
      "fof_cuda_run.toml");
  Simulation sim(params);
  sim.run();
  for (const char* number : {"000", "001"}) {
    CAPTURE(number);
    const Snapshot snap = read_snapshot(dir.file(std::string("snapshot_") + number + ".hdf5"));
    const GroupCatalogue host = halo::find_haloes(snap.particles, snap.header.box_mpc_h, snap.header.a, params);
    const std::string host_file = dir.file(std::string("host_") + number + ".hdf5");
    write_catalogue(host_file, host, params);
    const GroupCatalogue want = read_catalogue(host_file);
    const GroupCatalogue got = read_catalogue(dir.file(halo::catalogue_file_name(number[2] - '0')));
    // The snapshot's velocities come back through its unit conversion: to rounding there;
    // everything else (membership, order, positions, masses) bit for bit.
    REQUIRE(got.size() == want.size());
    CHECK(got.ids == want.ids);
    CHECK(got.len == want.len);
    CHECK(got.offset == want.offset);
    CHECK(got.mass == want.mass);
    CHECK(got.min_pot_id == want.min_pot_id);
    CHECK(got.m_mean200 == want.m_mean200);
    CHECK(got.m_crit200 == want.m_crit200);
    for (std::size_t g = 0; g < got.size(); ++g)
      for (int d = 0; d < 3; ++d) {
        CHECK(got.pos[g][d] == want.pos[g][d]);
        CHECK(got.cm[g][d] == want.cm[g][d]);
        CHECK(got.vel_pec[g][d] == doctest::Approx(want.vel_pec[g][d]).epsilon(1e-9));
      }
    if (std::string(number) == "001") CHECK(got.size() >= 5);
  }
}
