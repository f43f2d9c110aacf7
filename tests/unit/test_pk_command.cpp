// `orbis pk SNAPSHOT` on a snapshot written by write_snapshot() reproduces the in-process
// estimator, through both output files (text and HDF5).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/power_spectrum.hpp"
#include "core/params.hpp"
#include "io/hdf5_file.hpp"
#include "io/snapshot.hpp"

TEST_CASE("orbis pk on a written snapshot reproduces measure_power_spectrum") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::absolute("pk_command_test");
  fs::remove_all(dir);
  fs::create_directories(dir);

  const double box = 40.0, a = 0.5;
  const auto params = orbis::Params::parse("[box]\nsize_mpc_h = 40.0\nparticles_per_side = 12\n", "test");
  orbis::Particles particles;
  particles.resize(12 * 12 * 12);
  particles.mass = 1.7;
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<double> u(0, box);
  for (std::size_t i = 0; i < particles.size(); ++i) {
    particles.pos[i] = {u(rng), u(rng), u(rng)};
    particles.mom[i] = {0, 0, 0};
    particles.id[i] = i + 1;
  }
  const std::string snap = (dir / "snap_000.hdf5").string();
  orbis::write_snapshot(snap, particles, a, params);

  const std::string base = (dir / "pk_out").string();
  const std::string command = std::string(ORBIS_BINARY) + " pk " + snap +
                              " --grid 16 --window cic --fold 2 --out " + base + " > " +
                              (dir / "log.txt").string() + " 2>&1";
  REQUIRE(std::system(command.c_str()) == 0);

  orbis::PowerSpectrumSettings s;
  s.grid_side = 16;
  s.window = orbis::Window::cic;
  s.fold_factor = 2;
  const auto expected = orbis::measure_power_spectrum(particles.pos, box, s);
  REQUIRE(expected.bins.size() > 5);

  // Text: one header line, then k, P, N_modes, shot noise, P_lin (nan), fold.
  std::ifstream text(base + ".txt");
  REQUIRE(text.good());
  std::string header;
  std::getline(text, header);
  CHECK(header.rfind("# k_mean [h/Mpc]  P [(Mpc/h)^3]  N_modes", 0) == 0);
  CHECK(header.find("a = 0.5") != std::string::npos);
  std::size_t row = 0;
  for (std::string line; std::getline(text, line); ++row) {
    REQUIRE(row < expected.bins.size());
    std::istringstream in(line);
    double k, p, shot;
    long modes;
    std::string linear;
    int fold;
    in >> k >> p >> modes >> shot >> linear >> fold;
    const auto& b = expected.bins[row];
    CHECK(k == doctest::Approx(b.k_mean).epsilon(1e-11));
    CHECK(p == doctest::Approx(b.power).epsilon(1e-11));
    CHECK(modes == b.modes);
    CHECK(shot == doctest::Approx(b.shot_noise).epsilon(1e-11));
    CHECK(linear == "nan");
    CHECK(fold == b.fold);
  }
  CHECK(row == expected.bins.size());

  // HDF5: header attributes and the columns, bit for bit.
  orbis::H5Reader h5(base + ".hdf5");
  CHECK(h5.attribute<double>("/Header", "Time") == a);
  CHECK(h5.attribute<double>("/Header", "Redshift") == doctest::Approx(1.0));
  CHECK(h5.attribute<double>("/Header", "BoxSize") == box);
  CHECK(h5.attribute<std::uint64_t>("/Header", "NumPart") == particles.size());
  CHECK(h5.attribute<std::int32_t>("/Header", "Grid") == 16);
  CHECK(h5.attribute_string("/Header", "Window") == "cic");
  CHECK(h5.attribute<std::int32_t>("/Header", "Interlacing") == 1);
  CHECK(h5.attribute<std::int32_t>("/Header", "FoldFactor") == 2);
  CHECK(h5.has("/Parameters"));
  CHECK(h5.has("/Config"));
  const auto k = h5.read<double>("/PowerSpectrum/K");
  const auto p = h5.read<double>("/PowerSpectrum/Power");
  const auto modes = h5.read<std::int64_t>("/PowerSpectrum/NumModes");
  REQUIRE(k.size() == expected.bins.size());
  for (std::size_t i = 0; i < k.size(); ++i) {
    CHECK(k[i] == expected.bins[i].k_mean);
    CHECK(p[i] == doctest::Approx(expected.bins[i].power).epsilon(1e-13));
    CHECK(modes[i] == expected.bins[i].modes);
  }

  // The plot script finds the outputs in the folder and writes its PNG.
  const std::string png = (dir / "power.png").string();
  const std::string plot = std::string(ORBIS_PYTHON) + " " + ORBIS_SOURCE_DIR +
                           "/analysis/python/plot_power.py " + dir.string() + " --out " + png +
                           " > /dev/null 2>&1";
  CHECK(std::system(plot.c_str()) == 0);
  CHECK(fs::exists(png));
  fs::remove_all(dir);
}

TEST_CASE("orbis pk rejects bad options before any work") {
  const std::string missing = std::string(ORBIS_BINARY) + " pk does_not_exist.hdf5 > /dev/null 2>&1";
  CHECK(std::system(missing.c_str()) != 0);
}
