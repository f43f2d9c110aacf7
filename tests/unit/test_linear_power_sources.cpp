// LinearPower: sigma8 normalisation and sigma_r against independent integrals and exact
// results, tables and CAMB transfer files (interpolation, extrapolation, errors), and the
// parameter-file entry point.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/params.hpp"
#include "cosmology/linear_power.hpp"
#include "cosmology/linear_power_eh.hpp"

using orbis::LinearPower;
namespace fs = std::filesystem;

namespace {

// sigma^2(R) by the trapezoid rule in ln k on a fine grid: independent of GSL's adaptive rule.
double sigma_trapezoid(const LinearPower& p, double r) {
  const double ln_lo = std::log(1e-6), ln_hi = std::log(1e4 / r);
  const int n = 400000;
  double sum = 0;
  for (int i = 0; i <= n; ++i) {
    const double k = std::exp(ln_lo + (ln_hi - ln_lo) * i / n), x = k * r;
    const double w = 3.0 * (std::sin(x) - x * std::cos(x)) / (x * x * x);
    sum += (i == 0 || i == n ? 0.5 : 1.0) * k * k * k * p(k) * w * w;
  }
  return std::sqrt(sum * (ln_hi - ln_lo) / n / (2.0 * M_PI * M_PI));
}

fs::path temp_folder(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("orbis_test_linear_power_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const orbis::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("sigma8 normalisation is recovered by an independent trapezoid integral") {
  for (bool wiggles : {true, false}) {
    const auto p = LinearPower::eisenstein_hu(0.3144, 0.0494, 0.6732, 0.966, 0.812, wiggles);
    CHECK(sigma_trapezoid(p, 8.0) == doctest::Approx(0.812).epsilon(1e-6));
    CHECK(p.sigma8() == doctest::Approx(0.812).epsilon(1e-9));
    for (double r : {1.0, 4.0, 20.0, 50.0}) CHECK(p.sigma_r(r) == doctest::Approx(sigma_trapezoid(p, r)).epsilon(1e-6));
  }
}

TEST_CASE("sigma_r of power laws P = A k^n matches the exact integrals") {
  // sigma^2(R) = A / (2 pi^2) R^-(n+3) int x^(n+2) W(x)^2 dx, with int x W^2 dx = 9/4 (n = -1)
  // and int W^2 dx = 3 pi / 5 (n = -2). Three-row tables exercise the power-law
  // extrapolation too: it carries these spectra exactly to any k.
  const double a = 123.0;
  const auto p1 = LinearPower::from_points({0.1, 1.0, 10.0}, {a / 0.1, a, a / 10.0}, std::nullopt);
  const auto p2 = LinearPower::from_points({0.1, 1.0, 10.0}, {a / 0.01, a, a / 100.0}, std::nullopt);
  for (double r : {2.0, 8.0, 30.0}) {
    CHECK(p1.sigma_r(r) == doctest::Approx(std::sqrt(a / (2 * M_PI * M_PI) / (r * r) * 9.0 / 4.0)).epsilon(1e-7));
    CHECK(p2.sigma_r(r) == doctest::Approx(std::sqrt(a / (2 * M_PI * M_PI) / r * 3.0 * M_PI / 5.0)).epsilon(1e-7));
  }
  // Rescaled to a sigma8, the amplitude follows: sigma8^2 = A' / (2 pi^2) / 64 * 9/4.
  const auto q = LinearPower::from_points({0.1, 1.0, 10.0}, {a / 0.1, a, a / 10.0}, 0.5);
  CHECK(q(3.0) == doctest::Approx(0.25 * 2 * M_PI * M_PI * 64.0 * 4.0 / 9.0 / 3.0).epsilon(1e-7));
}

TEST_CASE("a (k, P) table is interpolated in log-log and extrapolated as a power law") {
  const auto eh = LinearPower::eisenstein_hu(0.3144, 0.0494, 0.6732, 0.966, 0.812, true);
  std::vector<double> k, pk;
  for (double lk = -4; lk <= 2.0001; lk += 1.0 / 60) k.push_back(std::pow(10.0, lk)), pk.push_back(eh(k.back()));
  const auto table = LinearPower::from_points(k, pk, std::nullopt);
  CHECK(table.k_min_h_mpc() == doctest::Approx(1e-4));
  CHECK(table.k_max_h_mpc() == doctest::Approx(100.0));
  for (std::size_t i = 0; i + 1 < k.size(); i += 7) {
    const double mid = std::sqrt(k[i] * k[i + 1]);
    INFO("k = " << mid);
    CHECK(table(mid) == doctest::Approx(eh(mid)).epsilon(2e-4));
  }
  CHECK(table.sigma8() == doctest::Approx(0.812).epsilon(1e-4));
  // Below the table: the slope of the first two rows (n_s on these scales, T ~ 1).
  const double slope_lo = std::log(pk[1] / pk[0]) / std::log(k[1] / k[0]);
  CHECK(table(1e-6) == doctest::Approx(pk[0] * std::pow(1e-6 / k[0], slope_lo)).epsilon(1e-10));
  const std::size_t n = k.size();
  const double slope_hi = std::log(pk[n - 1] / pk[n - 2]) / std::log(k[n - 1] / k[n - 2]);
  CHECK(table(1e3) == doctest::Approx(pk[n - 1] * std::pow(1e3 / k[n - 1], slope_hi)).epsilon(1e-10));
  CHECK(table(0.0) == 0.0);
}

TEST_CASE("CAMB transfer files: total matter from column 7, or column 2; P = A k^n_s T^2") {
  const auto dir = temp_folder("camb");
  const orbis::EisensteinHu model(0.3144, 0.0494, 0.6732);
  std::string seven = "# k/h CDM baryon photon nu mass_nu total\n", two;
  for (double lk = -4; lk <= 2.0001; lk += 0.02) {
    const double k = std::pow(10.0, lk), t = model.transfer(k);
    // CAMB's columns are T/k^2 up to a constant: the factor 7.5 must not matter.
    seven += fmt::format("{:.10e} {:.6e} 0 0 0 0 {:.10e}\n", k, 1.0, 7.5 * t);
    two += fmt::format("{:.10e} {:.10e}\n", k, t);
  }
  write(dir / "camb7.dat", seven);
  write(dir / "camb2.dat", two);
  const auto eh = LinearPower::eisenstein_hu(0.3144, 0.0494, 0.6732, 0.966, 0.812, true);
  for (const char* name : {"camb7.dat", "camb2.dat"}) {
    const auto camb = LinearPower::camb_transfer((dir / name).string(), 0.966, 0.812);
    CHECK(camb.source() == orbis::PowerSource::camb_transfer);
    for (double k : {1e-3, 0.013, 0.07, 0.15, 0.33, 1.7, 20.0}) {
      INFO(name << ", k = " << k);
      CHECK(camb(k) == doctest::Approx(eh(k)).epsilon(3e-4));
    }
  }
}

TEST_CASE("malformed power files are refused with file, line and what was expected") {
  const auto dir = temp_folder("errors");
  const std::string missing = (dir / "nope.txt").string();
  CHECK(error_of([&] { LinearPower::table(missing, std::nullopt); }).find(missing) != std::string::npos);
  write(dir / "text.txt", "# k P\n0.1 100\n0.2 90\n0.3 eighty\n0.4 70\n");
  auto message = error_of([&] { LinearPower::table((dir / "text.txt").string(), std::nullopt); });
  CHECK(message.find("text.txt:4:") != std::string::npos);
  CHECK(message.find("expected a finite number") != std::string::npos);
  write(dir / "order.txt", "0.1 100\n0.3 90\n0.2 80\n");
  message = error_of([&] { LinearPower::table((dir / "order.txt").string(), std::nullopt); });
  CHECK(message.find("order.txt:3:") != std::string::npos);
  CHECK(message.find("ascending") != std::string::npos);
  write(dir / "columns.txt", "0.1 100 1\n0.2 90\n0.3 80 1\n");
  CHECK(error_of([&] { LinearPower::table((dir / "columns.txt").string(), std::nullopt); }).find("columns.txt:2:") !=
        std::string::npos);
  write(dir / "negative.txt", "0.1 100\n0.2 -90\n0.3 80\n");
  message = error_of([&] { LinearPower::table((dir / "negative.txt").string(), std::nullopt); });
  CHECK(message.find("negative.txt:2:") != std::string::npos);
  CHECK(message.find("positive") != std::string::npos);
  write(dir / "short.txt", "# only two rows\n0.1 100\n0.2 90\n");
  CHECK(error_of([&] { LinearPower::table((dir / "short.txt").string(), std::nullopt); }).find("at least 3") !=
        std::string::npos);
  write(dir / "one_column.txt", "0.1\n0.2\n0.3\n");
  CHECK(error_of([&] { LinearPower::camb_transfer((dir / "one_column.txt").string(), 1, 0.8); })
            .find("one_column.txt:1:") != std::string::npos);
}

TEST_CASE("LinearPower::from_params: sources, files relative to the parameter file") {
  const auto dir = temp_folder("params");
  fs::create_directories(dir / "data");
  std::string table;
  for (double lk = -3; lk <= 1.0001; lk += 0.1) table += fmt::format("{} {}\n", std::pow(10.0, lk), 1e4 * std::pow(10.0, -lk));
  write(dir / "data" / "pk.txt", table);
  const std::string base = "[box]\nsize_mpc_h = 100.0\nparticles_per_side = 16\n";
  write(dir / "run.toml", base + "[ic]\npower_spectrum = \"table\"\npower_file = \"data/pk.txt\"\n"
                                 "normalise_to_sigma8 = false\n");
  const auto p = LinearPower::from_params(orbis::Params::load((dir / "run.toml").string()));
  CHECK(p.source() == orbis::PowerSource::table);
  CHECK(p(0.5) == doctest::Approx(2e4).epsilon(1e-6));   // P = 1e4 / k used as given

  const auto q = LinearPower::from_params(orbis::Params::load((dir / "run.toml").string(), {"ic.normalise_to_sigma8=true"}));
  CHECK(q.sigma8() == doctest::Approx(0.812).epsilon(1e-6));   // the schema's default sigma8

  write(dir / "eh.toml", base + "[cosmology]\nsigma8 = 0.9\n[ic]\npower_spectrum = \"eisenstein_hu_nowiggle\"\n");
  const auto eh = LinearPower::from_params(orbis::Params::load((dir / "eh.toml").string()));
  CHECK(eh.source() == orbis::PowerSource::eisenstein_hu_nowiggle);
  CHECK(eh.sigma8() == doctest::Approx(0.9).epsilon(1e-8));

  auto message = error_of([&] {
    LinearPower::from_params(orbis::Params::load((dir / "eh.toml").string(), {"ic.normalise_to_sigma8=false"}));
  });
  CHECK(message.find("normalise_to_sigma8") != std::string::npos);
  message = error_of([&] {
    LinearPower::from_params(orbis::Params::load((dir / "eh.toml").string(), {"ic.power_spectrum=camb_transfer"}));
  });
  CHECK(message.find("ic.power_file") != std::string::npos);
  message = error_of([&] {
    LinearPower::from_params(orbis::Params::load((dir / "run.toml").string(), {"ic.power_file=data/missing.txt"}));
  });
  CHECK(message.find("missing.txt") != std::string::npos);
}
