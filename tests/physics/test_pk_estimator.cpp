// The P(k) estimator (analysis/power_spectrum.hpp) against independent references:
//  * a brute-force estimator: textbook CIC/TSC kernels scattered naively, a direct DFT of the
//    grid (no FFT), the same deconvolution, interlacing and binning, and the shot noise as a
//    direct 3D sum over alias images;
//  * Poisson samples, whose expected power is the shot noise column;
//  * the exact DFT of a clustered particle set, with and without interlacing (aliasing).
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <cstdio>
#include <random>
#include <vector>

#include "analysis/power_spectrum.hpp"

using orbis::PowerSpectrum;
using orbis::PowerSpectrumSettings;
using orbis::Vec3d;
using orbis::Window;
using cplx = std::complex<double>;

namespace {

constexpr double kPi = 3.14159265358979323846;

double kernel(Window w, double s) {
  s = std::abs(s);
  if (w == Window::cic) return s < 1 ? 1 - s : 0;
  if (s < 0.5) return 0.75 - s * s;
  return s < 1.5 ? 0.5 * (1.5 - s) * (1.5 - s) : 0;
}

double sinc_power(double t, int p) { return t == 0 ? 1.0 : std::pow(std::sin(t) / t, p); }

int signed_index(int i, int n) { return i <= n / 2 ? i : i - n; }

// Particle counts on the grid, every particle scattered to every node within two cells.
std::vector<double> naive_grid(const std::vector<Vec3d>& pos, double box, int n, Window w, double shift) {
  std::vector<double> g(static_cast<std::size_t>(n) * n * n, 0.0);
  const double cell = box / n;
  for (const auto& p0 : pos) {
    const Vec3d p{p0.x + shift * cell, p0.y + shift * cell, p0.z + shift * cell};
    const int c[3] = {static_cast<int>(std::floor(p.x / cell)), static_cast<int>(std::floor(p.y / cell)),
                      static_cast<int>(std::floor(p.z / cell))};
    for (int a = -2; a <= 3; ++a)
      for (int b = -2; b <= 3; ++b)
        for (int d = -2; d <= 3; ++d) {
          const int i = ((c[0] + a) % n + n) % n, j = ((c[1] + b) % n + n) % n, k = ((c[2] + d) % n + n) % n;
          const double w3 = kernel(w, orbis::periodic_wrap_delta(p.x - i * cell, box) / cell) *
                            kernel(w, orbis::periodic_wrap_delta(p.y - j * cell, box) / cell) *
                            kernel(w, orbis::periodic_wrap_delta(p.z - k * cell, box) / cell);
          g[(static_cast<std::size_t>(i) * n + j) * n + k] += w3;
        }
  }
  return g;
}

struct RefBin {
  double k = 0, power = 0, shot = 0;
  long modes = 0;
};

// The whole estimator written out plainly: direct DFT, every mode of the full k space inside
// the Nyquist sphere, linear bins by rounding |m|, shot noise by summing alias images in 3D.
std::vector<RefBin> brute_force(const std::vector<Vec3d>& pos, double box, int n, Window w, bool interlace) {
  const int p = w == Window::cic ? 2 : 3;
  const auto g1 = naive_grid(pos, box, n, w, 0.0);
  const auto g2 = interlace ? naive_grid(pos, box, n, w, 0.5) : std::vector<double>{};
  std::vector<cplx> twiddle(n * n);
  for (int m = 0; m < n; ++m)
    for (int x = 0; x < n; ++x) twiddle[m * n + x] = std::polar(1.0, -2 * kPi * m * x / n);
  std::vector<RefBin> bins(n / 2);
  const double count = static_cast<double>(pos.size()), volume = box * box * box;
  const int images = 6;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      for (int c = 0; c < n; ++c) {
        const int mx = signed_index(a, n), my = signed_index(b, n), mz = signed_index(c, n);
        const double m = std::sqrt(static_cast<double>(mx * mx + my * my + mz * mz));
        if (m == 0 || m > n / 2) continue;
        cplx f1 = 0, f2 = 0;
        for (int x = 0; x < n; ++x)
          for (int y = 0; y < n; ++y) {
            const cplx t = twiddle[a * n + x] * twiddle[b * n + y];
            for (int z = 0; z < n; ++z) {
              const std::size_t idx = (static_cast<std::size_t>(x) * n + y) * n + z;
              const cplx tz = t * twiddle[c * n + z];
              f1 += g1[idx] * tz;
              if (interlace) f2 += g2[idx] * tz;
            }
          }
        cplx f = f1;
        if (interlace) f = 0.5 * (f1 + f2 * std::polar(1.0, kPi * (mx + my + mz) / n));
        const double window = sinc_power(kPi * mx / n, p) * sinc_power(kPi * my / n, p) * sinc_power(kPi * mz / n, p);
        double alias = 0;
        for (int lx = -images; lx <= images; ++lx)
          for (int ly = -images; ly <= images; ++ly)
            for (int lz = -images; lz <= images; ++lz) {
              if (interlace && (lx + ly + lz) % 2 != 0) continue;
              alias += sinc_power(kPi * (mx + lx * n) / n, 2 * p) * sinc_power(kPi * (my + ly * n) / n, 2 * p) *
                       sinc_power(kPi * (mz + lz * n) / n, 2 * p);
            }
        RefBin& bin = bins[static_cast<int>(std::lround(m)) - 1];
        bin.k += m * 2 * kPi / box;
        bin.power += volume * std::norm(f / (count * window));
        bin.shot += volume / count * alias / (window * window);
        bin.modes += 1;
      }
  for (auto& b : bins)
    if (b.modes) b.k /= b.modes, b.power /= b.modes, b.shot /= b.modes;
  return bins;
}

std::vector<Vec3d> uniform(std::size_t count, double box, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, box);
  std::vector<Vec3d> pos(count);
  for (auto& p : pos) p = {u(rng), u(rng), u(rng)};
  return pos;
}

}  // namespace

TEST_CASE("P(k) equals a brute-force DFT estimator on a few hundred particles") {
  const double box = 10.0;
  const int n = 12;
  std::mt19937_64 rng(11);
  const auto pos = uniform(300, box, rng);
  for (Window w : {Window::cic, Window::tsc})
    for (bool interlace : {false, true}) {
      PowerSpectrumSettings s;
      s.grid_side = n;
      s.window = w;
      s.interlacing = interlace;
      const PowerSpectrum pk = orbis::measure_power_spectrum(pos, box, s);
      const auto ref = brute_force(pos, box, n, w, interlace);
      REQUIRE(pk.bins.size() == ref.size());
      double worst_p = 0, worst_shot = 0;
      for (std::size_t b = 0; b < ref.size(); ++b) {
        CHECK(pk.bins[b].modes == ref[b].modes);
        CHECK(pk.bins[b].k_mean == doctest::Approx(ref[b].k).epsilon(1e-12));
        worst_p = std::max(worst_p, std::abs(pk.bins[b].power / ref[b].power - 1));
        worst_shot = std::max(worst_shot, std::abs(pk.bins[b].shot_noise / ref[b].shot - 1));
      }
      std::printf("brute force %s interlacing %d: max |dP/P| = %.1e, max |dshot/shot| = %.1e\n",
                  orbis::window_name(w), interlace, worst_p, worst_shot);
      CHECK(worst_p < 1e-6);
      CHECK(worst_shot < 1e-4);   // the 3D image sum stops at |l| = 6
      // At low k the shot noise is V/N (its aliases vanish there).
      CHECK(pk.bins[0].shot_noise == doctest::Approx(box * box * box / 300).epsilon(0.01));
    }
}

TEST_CASE("a uniform Poisson sample has P(k) = shot noise") {
  const double box = 100.0;
  const int n = 32, realisations = 16;
  const std::size_t count = 20000;
  for (Window w : {Window::cic, Window::tsc})
    for (bool interlace : {false, true}) {
      PowerSpectrumSettings s;
      s.grid_side = n;
      s.window = w;
      s.interlacing = interlace;
      // Mode-weighted sums of P and of the shot-noise column in three k ranges (in k_F):
      // [1, 8), [8, 12), [12, 16]; each holds >= 1000 independent modes per realisation.
      double power[3] = {0, 0, 0}, shot[3] = {0, 0, 0};
      std::mt19937_64 rng(100 + static_cast<int>(w) * 2 + interlace);
      double high_shot_ratio = 0;
      for (int r = 0; r < realisations; ++r) {
        const PowerSpectrum pk = orbis::measure_power_spectrum(uniform(count, box, rng), box, s);
        for (const auto& b : pk.bins) {
          const double m = b.k_mean * box / (2 * kPi);
          const int range = m < 8 ? 0 : (m < 12 ? 1 : 2);
          power[range] += b.power * b.modes;
          shot[range] += b.shot_noise * b.modes;
        }
        high_shot_ratio = pk.bins.back().shot_noise / (box * box * box / count);
      }
      std::printf("Poisson %s interlacing %d: <P>/<shot> = %.4f %.4f %.4f in k/k_F [1,8) [8,12) [12,16]; "
                  "shot/(V/N) at k_Nyquist = %.3f\n", orbis::window_name(w), interlace,
                  power[0] / shot[0], power[1] / shot[1], power[2] / shot[2], high_shot_ratio);
      for (int range = 0; range < 3; ++range) CHECK(std::abs(power[range] / shot[range] - 1) < 0.03);
    }
}

namespace {

// Exact binned power of the particles on the modes F m of the box, m on the half-space index
// set of an n^3 mesh inside its Nyquist sphere: P = V |(1/N) sum_j e^{-i k.x_j}|^2, bins by
// rounding |m|, weighted as the estimator weights them (k and -k).
std::vector<double> exact_binned(const std::vector<Vec3d>& pos, double box, int n, int fold) {
  const int half = n / 2, span = 2 * half + 1;
  std::vector<cplx> ex(pos.size() * span), ey(ex.size()), ez(ex.size());
  for (std::size_t j = 0; j < pos.size(); ++j)
    for (int m = -half; m <= half; ++m) {
      const double q = -2 * kPi * m * fold / box;
      ex[j * span + m + half] = std::polar(1.0, q * pos[j].x);
      ey[j * span + m + half] = std::polar(1.0, q * pos[j].y);
      ez[j * span + m + half] = std::polar(1.0, q * pos[j].z);
    }
  std::vector<double> exact(half, 0.0), weight(half, 0.0);
  const double volume = box * box * box, count = static_cast<double>(pos.size());
  for (int mx = -half + 1; mx <= half; ++mx)
    for (int my = -half + 1; my <= half; ++my)
      for (int mz = 0; mz <= half; ++mz) {
        const double m = std::sqrt(static_cast<double>(mx * mx + my * my + mz * mz));
        if (m == 0 || m > half) continue;
        cplx sum = 0;
        for (std::size_t j = 0; j < pos.size(); ++j) {
          const std::size_t o = j * span + half;
          sum += ex[o + mx] * ey[o + my] * ez[o + mz];
        }
        const double wgt = (mz == 0 || mz == half) ? 1 : 2;
        const int b = static_cast<int>(std::lround(m)) - 1;
        exact[b] += wgt * volume * std::norm(sum / count);
        weight[b] += wgt;
      }
  for (int b = 0; b < half; ++b) exact[b] /= weight[b];
  return exact;
}

// Clumps of 10 particles with a Gaussian spread of `spread` (Mpc/h): power at every k up to
// Nyquist and beyond, so aliasing matters.
std::vector<Vec3d> clumps(double box, int count, double spread, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, box);
  std::normal_distribution<double> g(0, spread);
  std::vector<Vec3d> pos;
  for (int c = 0; c < count; ++c) {
    const Vec3d centre{u(rng), u(rng), u(rng)};
    for (int i = 0; i < 10; ++i)
      pos.push_back({orbis::periodic_wrap_position(centre.x + g(rng), box),
                     orbis::periodic_wrap_position(centre.y + g(rng), box),
                     orbis::periodic_wrap_position(centre.z + g(rng), box)});
  }
  return pos;
}

}  // namespace

TEST_CASE("interlacing reduces aliasing against the exact DFT of a clustered set") {
  const double box = 100.0;
  const int n = 32, half = n / 2;
  const auto pos = clumps(box, 800, 0.3 * box / n, 5);
  const auto exact = exact_binned(pos, box, n, 1);
  for (Window w : {Window::cic, Window::tsc}) {
    double rms[2] = {0, 0}, worst[2] = {0, 0};
    for (bool interlace : {false, true}) {
      PowerSpectrumSettings s;
      s.grid_side = n;
      s.window = w;
      s.interlacing = interlace;
      const PowerSpectrum pk = orbis::measure_power_spectrum(pos, box, s);
      int used = 0;
      for (int b = 0; b + 1 <= 0.75 * half; ++b, ++used) {   // up to 3/4 of the Nyquist frequency
        const double err = pk.bins[b].power / exact[b] - 1;
        rms[interlace] += err * err;
        worst[interlace] = std::max(worst[interlace], std::abs(err));
      }
      rms[interlace] = std::sqrt(rms[interlace] / used);
    }
    std::printf("aliasing %s up to 0.75 k_Ny: rms %.2e -> %.2e, max %.2e -> %.2e with interlacing "
                "(factor %.1f)\n", orbis::window_name(w), rms[0], rms[1], worst[0], worst[1], rms[0] / rms[1]);
    CHECK(rms[1] * 5 < rms[0]);
    CHECK(worst[1] < 0.01);
  }
}

TEST_CASE("folding reaches F times the Nyquist frequency") {
  // A 16^3 mesh folded 4 times against the exact DFT on the modes 4 m of the box; the
  // unfolded rows (below half the unfolded Nyquist frequency) against the exact modes m.
  const double box = 100.0;
  const int n = 16, half = n / 2, fold = 4;
  const auto pos = clumps(box, 800, 0.6, 9);
  const auto exact_folded = exact_binned(pos, box, n, fold);
  const auto exact = exact_binned(pos, box, n, 1);
  PowerSpectrumSettings s;
  s.grid_side = n;
  s.fold_factor = fold;
  const PowerSpectrum pk = orbis::measure_power_spectrum(pos, box, s);
  const double k_f = 2 * kPi / box;
  int unfolded_rows = 0, folded_rows = 0;
  double worst = 0, k_max = 0;
  for (const auto& b : pk.bins) {
    const double m = b.k_mean / (k_f * b.fold);   // in units of that spectrum's fundamental
    const int bin = static_cast<int>(std::lround(m)) - 1;
    if (b.fold == 1) {
      ++unfolded_rows;
      CHECK(b.k_mean < 0.5 * half * k_f + 1e-12);
      worst = std::max(worst, std::abs(b.power / exact[bin] - 1));
    } else {
      ++folded_rows;
      CHECK(b.fold == fold);
      if (bin + 1 <= 0.75 * half) worst = std::max(worst, std::abs(b.power / exact_folded[bin] - 1));
      k_max = std::max(k_max, b.k_mean);
    }
  }
  std::printf("folding x%d on a %d^3 mesh: %d unfolded + %d folded rows up to k = %.3f h/Mpc "
              "(unfolded Nyquist %.3f); max |dP/P| vs exact DFT %.2e\n", fold, n, unfolded_rows,
              folded_rows, k_max, half * k_f, worst);
  CHECK(unfolded_rows == half / 2 - 1);   // bins centred below k_Ny / 2
  CHECK(k_max > 0.9 * fold * half * k_f);
  CHECK(worst < 0.01);
}

TEST_CASE("log bins, coarse linear bins and shot-noise subtraction regroup the same modes") {
  const double box = 50.0;
  const auto pos = clumps(box, 300, 1.0, 21);
  PowerSpectrumSettings s;
  s.grid_side = 24;
  const PowerSpectrum fine = orbis::measure_power_spectrum(pos, box, s);
  auto totals = [](const PowerSpectrum& pk) {
    double modes = 0, power = 0;
    for (const auto& b : pk.bins) modes += b.modes, power += b.power * b.modes;
    return std::pair<double, double>{modes, power};
  };
  const auto reference = totals(fine);
  PowerSpectrumSettings log_bins = s;
  log_bins.log_bins = true;
  PowerSpectrumSettings coarse = s;
  coarse.num_bins = 4;
  for (const auto& other : {log_bins, coarse}) {
    const PowerSpectrum pk = orbis::measure_power_spectrum(pos, box, other);
    const auto t = totals(pk);
    CHECK(t.first == reference.first);
    CHECK(t.second == doctest::Approx(reference.second).epsilon(1e-12));
    for (std::size_t b = 1; b < pk.bins.size(); ++b) CHECK(pk.bins[b].k_mean > pk.bins[b - 1].k_mean);
  }
  CHECK(orbis::measure_power_spectrum(pos, box, coarse).bins.size() == 4);
  // Log bins: 10 per decade from k_F to k_Nyquist (12 k_F): ceil(10.8) = 11, the empty ones dropped.
  CHECK(orbis::measure_power_spectrum(pos, box, log_bins).bins.size() <= 11);

  PowerSpectrumSettings subtracted = s;
  subtracted.subtract_shot_noise = true;
  const PowerSpectrum sub = orbis::measure_power_spectrum(pos, box, subtracted, [](double k) { return 2.0 * k; });
  for (std::size_t b = 0; b < sub.bins.size(); ++b) {
    CHECK(sub.bins[b].power == doctest::Approx(fine.bins[b].power - fine.bins[b].shot_noise).epsilon(1e-12));
    CHECK(sub.bins[b].linear == 2.0 * sub.bins[b].k_mean);
    CHECK(std::isnan(fine.bins[b].linear));
  }
}
