// The device P(k) (gpu/power_spectrum_cuda.cuh) against the host estimator
// (analysis/power_spectrum.hpp, the reference: FFTW, the particles sorted and assigned on the
// CPU) on the test suite's clustered set (sheets, filaments, a Plummer halo across the box
// corner and a compact one), with some particles given outside [0, box) (both wrap them), for
// every setting: CIC and TSC, interlaced or not, fold 1 and 2, linear and log bins, a bin
// count of its own, shot noise subtracted. Both sum the same fixed-point counts and use the
// same tables, so they differ by the transforms' rounding (cuFFT vs FFTW) and the order of the
// bins' sums: the power to 1e-5 in every bin (the bar; measured far below it), the mode counts
// and folds exactly, k_mean and the shot noise to 1e-12. Also: the same bits at every call
// and for any particle order, and the memory estimate. Returns 77 without a usable GPU.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "analysis/power_spectrum.hpp"
#include "gpu/power_spectrum_cuda.cuh"
#include "support/clustered_particles.hpp"
#include "support/gpu_skip.hpp"
#include "support/power_spectrum_bits.hpp"

using namespace orbis;

namespace {

constexpr double kBox = 100.0;   // Mpc/h

std::vector<Vec3d> test_positions() {
  std::vector<Vec3d> pos = test::clustered_particles(32, kBox, 20261129);
  for (std::size_t p = 0; p < pos.size(); p += 97) pos[p].x += (p % 2 ? kBox : -kBox);
  for (std::size_t p = 5; p < pos.size(); p += 101) pos[p].z -= kBox;
  return pos;
}

// The positions as x | y | z blocks in device memory.
class DevicePositions {
 public:
  explicit DevicePositions(const std::vector<Vec3d>& pos, double box = kBox) : n_(pos.size()), box_(box) {
    std::vector<double> soa(3 * n_);
    for (std::size_t p = 0; p < n_; ++p)
      for (int d = 0; d < 3; ++d) soa[d * n_ + p] = pos[p][d];
    REQUIRE(cudaMalloc(&data_, soa.size() * sizeof(double)) == cudaSuccess);
    REQUIRE(cudaMemcpy(data_, soa.data(), soa.size() * sizeof(double), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~DevicePositions() { cudaFree(data_); }
  std::size_t size() const { return n_; }
  DevicePositions(const DevicePositions&) = delete;
  DevicePositions& operator=(const DevicePositions&) = delete;
  PowerSpectrum measure(gpu::CudaPowerSpectrum& estimator, const PowerSpectrumSettings& s) const {
    return estimator.measure(data_, data_ + n_, data_ + 2 * n_, n_, box_, s, nullptr);
  }

 private:
  std::size_t n_;
  double box_;
  double* data_ = nullptr;
};

double relative(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-300); }

std::string describe(const PowerSpectrumSettings& s) {
  return std::string(window_name(s.window)) + (s.interlacing ? " interlaced" : "") + " fold " +
         std::to_string(s.fold_factor) + (s.log_bins ? " log" : " linear") + " bins " + std::to_string(s.num_bins) +
         " mesh " + std::to_string(s.grid_side) + (s.subtract_shot_noise ? " shot noise subtracted" : "");
}

// Device against host, row by row; returns the largest relative power difference.
double compare(const PowerSpectrum& device, const PowerSpectrum& host) {
  REQUIRE(device.bins.size() == host.bins.size());
  REQUIRE(host.bins.size() > 3);
  CHECK(device.num_particles == host.num_particles);
  CHECK(device.box_mpc_h == host.box_mpc_h);
  double worst = 0;
  for (std::size_t i = 0; i < host.bins.size(); ++i) {
    const PowerSpectrumBin& d = device.bins[i];
    const PowerSpectrumBin& h = host.bins[i];
    INFO("bin " << i << " k = " << h.k_mean << " modes " << h.modes);
    CHECK(d.modes == h.modes);
    CHECK(d.fold == h.fold);
    CHECK(relative(d.k_mean, h.k_mean) < 1e-12);
    CHECK(relative(d.shot_noise, h.shot_noise) < 1e-12);
    CHECK(std::isnan(d.linear));
    const double r = relative(d.power, h.power);
    CHECK(r < 1e-5);
    worst = std::max(worst, r);
  }
  return worst;
}

}  // namespace

TEST_CASE("device P(k) equals the host estimator's for every setting") {
  test::require_gpu_or_skip();
  const std::vector<Vec3d> pos = test_positions();
  const DevicePositions device(pos);
  gpu::CudaPowerSpectrum estimator;
  double worst = 0;
  for (Window window : {Window::cic, Window::tsc})
    for (bool interlacing : {false, true})
      for (int fold : {1, 2})
        for (bool log_bins : {false, true}) {
          PowerSpectrumSettings s;
          s.grid_side = 64;
          s.window = window;
          s.interlacing = interlacing;
          s.fold_factor = fold;
          s.log_bins = log_bins;
          INFO(describe(s));
          worst = std::max(worst, compare(device.measure(estimator, s), measure_power_spectrum(pos, kBox, s)));
        }
  // A mesh that is not a power of two, a bin count of its own, the shot noise subtracted.
  PowerSpectrumSettings s;
  s.grid_side = 48;
  s.fold_factor = 3;
  s.num_bins = 7;
  s.subtract_shot_noise = true;
  for (bool log_bins : {false, true}) {
    s.log_bins = log_bins;
    INFO(describe(s));
    worst = std::max(worst, compare(device.measure(estimator, s), measure_power_spectrum(pos, kBox, s)));
  }
  std::printf("device vs host P(k), 18 settings: largest relative power difference %.3e\n", worst);
  std::fflush(stdout);
}

TEST_CASE("device P(k): the same bits at every call and for any particle order; memory estimate") {
  test::require_gpu_or_skip();
  std::vector<Vec3d> pos = test_positions();
  gpu::CudaPowerSpectrum estimator;
  PowerSpectrumSettings s;
  s.grid_side = 64;
  s.fold_factor = 2;
  const DevicePositions device(pos);
  const PowerSpectrum first = device.measure(estimator, s);
  CHECK(test::same_bits(device.measure(estimator, s), first));
  std::shuffle(pos.begin(), pos.end(), std::mt19937_64(7));
  const DevicePositions shuffled(pos);
  CHECK(test::same_bits(shuffled.measure(estimator, s), first));

  // The sums, two meshes and the folded copy at least; less without interlacing and folding.
  const std::size_t mesh = 64 * 64 * 66 * sizeof(double);
  const std::size_t full = estimator.device_bytes(pos.size(), s);
  CHECK(full >= 64 * 64 * 64 * 8 + 2 * mesh + 24 * pos.size());
  s.interlacing = false;
  s.fold_factor = 1;
  CHECK(estimator.device_bytes(pos.size(), s) <= full - mesh - 24 * pos.size());
}

TEST_CASE("device P(k) of the headline's size: 256^3 clustered particles on a 512^3 mesh, interlaced TSC") {
  test::require_gpu_or_skip();
  // The 128^3 clustered set tiled 2 x 2 x 2 into a box twice as large: 256^3 particles.
  constexpr double kBig = 1000.0;
  const std::vector<Vec3d> tile = test::clustered_particles(128, kBig / 2, 20261129);
  std::vector<Vec3d> pos;
  pos.reserve(8 * tile.size());
  for (int t = 0; t < 8; ++t)
    for (const Vec3d& x : tile)
      pos.push_back({x.x + (t & 1) * kBig / 2, x.y + (t >> 1 & 1) * kBig / 2, x.z + (t >> 2 & 1) * kBig / 2});
  const DevicePositions device(pos, kBig);
  gpu::CudaPowerSpectrum estimator;
  PowerSpectrumSettings s;
  s.grid_side = 512;
  const auto seconds = [&] {
    const auto start = std::chrono::steady_clock::now();
    const PowerSpectrum pk = device.measure(estimator, s);
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(pk.bins.size() == 256);
    CHECK(pk.num_particles == device.size());
    return t;
  };
  const double first = seconds();   // the cuFFT plan made
  const double again = seconds();
  std::printf("device P(k), %zu particles on 512^3, interlaced TSC: %.1f ms (first call, the plan made), %.1f ms "
              "after (%s); device memory %.2f GiB\n",
              device.size(), 1e3 * first, 1e3 * again, estimator.last_phases().c_str(),
              static_cast<double>(estimator.device_bytes(device.size(), s)) / (1 << 30));
  std::fflush(stdout);
  CHECK(again < 1.0);   // the host estimator takes seconds
}
