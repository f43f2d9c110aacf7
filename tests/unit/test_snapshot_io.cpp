// Snapshot files: our own round trip is exact; files written the GADGET-4/N-GenIC way by an
// independent h5py script (32-bit IDs, float positions, shuffled, multi-file, cosmology in
// /Parameters, no HighWord) read correctly; writes are atomic.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <unistd.h>

#include "core/error.hpp"
#include "core/params.hpp"
#include "io/hdf5_file.hpp"
#include "io/snapshot.hpp"

namespace fs = std::filesystem;
using namespace orbis;

namespace {
fs::path scratch(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("orbis_test_snapshot_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}
Params small_params() {
  return Params::parse("[box]\nsize_mpc_h = 50.0\nparticles_per_side = 4\n[cosmology]\nomega_m = 0.3\n", "t.toml");
}
}  // namespace

TEST_CASE("our snapshots round-trip exactly") {
  Params params = small_params();
  Particles p;
  p.resize(64);
  p.mass = 3.25;
  for (std::size_t i = 0; i < 64; ++i) {
    p.pos[i] = {0.7 * i, 50.0 - 0.3 * i - 1e-9, std::fmod(1.1 * i * i, 50.0)};
    p.mom[i] = {std::sin(i) * 100, std::cos(i) * 50, -3.0 * i};
    p.id[i] = (std::uint64_t{1} << 40) + i;   // needs 64 bits
  }
  const double a = 0.25;
  const auto path = scratch("snap.hdf5").string();
  write_snapshot(path, p, a, params);
  Snapshot s = read_snapshot(path);
  CHECK(s.header.a == a);
  CHECK(s.header.box_mpc_h == 50.0);
  CHECK(s.header.num_total == 64);
  CHECK(s.header.omega_m == 0.3);
  CHECK(s.header.omega_lambda == doctest::Approx(0.7));
  CHECK(s.particles.mass == p.mass);
  for (std::size_t i = 0; i < 64; ++i) {
    CHECK(s.particles.id[i] == p.id[i]);
    for (int d = 0; d < 3; ++d) {
      CHECK(s.particles.pos[i][d] == p.pos[i][d]);
      CHECK(s.particles.mom[i][d] == doctest::Approx(p.mom[i][d]).epsilon(1e-15));
    }
  }
  // Provenance: every parameter is stored, and the velocity convention is written down.
  H5Reader r(path);
  CHECK(r.attribute<double>("/Parameters", "cosmology.omega_m") == 0.3);
  CHECK(r.attribute<std::int64_t>("/Parameters", "box.particles_per_side") == 4);
  CHECK(r.attribute_string("/Parameters", "gravity.solver") == "treepm");
  CHECK(r.attribute_string("/PartType1/Velocities", "Description").find("sqrt(a)") != std::string::npos);
  CHECK(r.attribute_array<std::uint32_t>("/Header", "NumPart_Total_HighWord")[1] == 0);
  CHECK(r.attribute_array<double>("/Parameters", "time.output_redshifts").size() == 4);
  // The atomic writer leaves nothing but the final file behind.
  for (const auto& entry : fs::directory_iterator(fs::path(path).parent_path()))
    CHECK(entry.path().filename().string().find(".tmp.") == std::string::npos);
}

TEST_CASE("/Parameters carries GADGET-4's names for units, cosmology, box and softening") {
  // What pynbody and yt read from GADGET-4 files, with the values of this parameter file.
  const Params params = Params::parse(
      "[box]\nsize_mpc_h = 40.0\nparticles_per_side = 8\n[cosmology]\nomega_m = 0.25\nomega_b = 0.04\n"
      "h = 0.71\n[gravity]\nsoftening_over_spacing = 0.02\n", "t.toml");
  Particles p;
  p.resize(8);
  p.mass = 2.0;
  for (std::size_t i = 0; i < 8; ++i) p.id[i] = i + 1;
  const auto path = scratch("gadget_names.hdf5").string();
  write_snapshot(path, p, 0.5, params);
  H5Reader r(path);
  const std::string g = "/Parameters";
  // GADGET's unit lengths carry no h: 1 Mpc, 1e10 Msun and 1 km/s in cgs, so that stored
  // values are Mpc/h and 1e10 Msun/h.
  CHECK(r.attribute<double>(g, "UnitLength_in_cm") == doctest::Approx(3.0857e24).epsilon(1e-4));
  CHECK(r.attribute<double>(g, "UnitMass_in_g") == doctest::Approx(1.989e43).epsilon(1e-4));
  CHECK(r.attribute<double>(g, "UnitVelocity_in_cm_per_s") == 1e5);
  CHECK(r.attribute<double>(g, "Hubble") == 100.0);   // H0 in (km/s)/(Mpc/h)
  // G = 6.674e-8 cm^3 g^-1 s^-2 in (Mpc/h) (km/s)^2 / (1e10 Msun/h): 6.674e-8 * 1.989e43 / (3.0857e24 * 1e10).
  CHECK(r.attribute<double>(g, "GravityConstantInternal") == doctest::Approx(43.02).epsilon(1e-3));
  CHECK(r.attribute<double>(g, "HubbleParam") == 0.71);
  CHECK(r.attribute<double>(g, "Omega0") == 0.25);
  CHECK(r.attribute<double>(g, "OmegaLambda") == doctest::Approx(0.75));   // flat when not given
  CHECK(r.attribute<double>(g, "OmegaBaryon") == 0.04);
  CHECK(r.attribute<double>(g, "BoxSize") == 40.0);
  CHECK(r.attribute<std::int32_t>(g, "ComovingIntegrationOn") == 1);
  CHECK(r.attribute<double>(g, "SofteningComovingClass0") == doctest::Approx(0.02 * 40.0 / 8));
  CHECK(r.attribute<double>(g, "SofteningMaxPhysClass0") == doctest::Approx(0.02 * 40.0 / 8));
  CHECK(r.attribute<std::int32_t>(g, "SofteningClassOfPartType1") == 0);
  // orbis's own keys stay beside them, and the header keeps its fields.
  CHECK(r.attribute<double>(g, "cosmology.h") == 0.71);
  CHECK(r.attribute<double>("/Header", "HubbleParam") == 0.71);
  CHECK(r.attribute<double>("/Header", "BoxSize") == 40.0);
}

TEST_CASE("NumPart_Total is the whole 64-bit count; HighWord is 0 and is added only to a 32-bit low word") {
  Params params = small_params();
  Particles p;
  p.resize(3);
  p.mass = 1.0;
  for (std::size_t i = 0; i < 3; ++i) p.id[i] = i + 1;
  const auto path = scratch("highword.hdf5").string();
  write_snapshot(path, p, 1.0, params);
  H5Reader r(path);
  CHECK(r.attribute_array<std::uint64_t>("/Header", "NumPart_Total") == std::vector<std::uint64_t>{0, 3, 0, 0, 0, 0});
  CHECK(r.attribute_array<std::uint32_t>("/Header", "NumPart_Total_HighWord") == std::vector<std::uint32_t>(6, 0));
  const std::uint64_t big = (std::uint64_t{3} << 32) + 17;   // 2048^3 is of this size
  CHECK(gadget_total_count(17, 3) == big);                       // GADGET-2/3: low + high words
  CHECK(gadget_total_count(big, 0) == big);                      // GADGET-4, orbis
  CHECK(gadget_total_count(big, 3) == big);                      // a 64-bit count with its high word repeated
  CHECK(gadget_total_count(5, 0) == 5);
}

TEST_CASE("accelerations are written on request, with their units and comoving factors") {
  Params params = small_params();
  Particles p;
  p.resize(8);
  p.mass = 1.0;
  std::vector<Vec3d> acc(8);
  for (std::size_t i = 0; i < 8; ++i) {
    p.pos[i] = {1.0 * i, 2.0, 3.0};
    p.id[i] = i + 1;
    acc[i] = {0.5 * i, -1.0 * i, 1e3};
  }
  params.set("time.output_redshifts", std::vector<double>{});   // an empty list is stored too
  const auto plain = scratch("noacc.hdf5").string(), with = scratch("acc.hdf5").string();
  write_snapshot(plain, p, 0.5, params);
  write_snapshot(with, p, 0.5, params, {&acc});
  CHECK_FALSE(H5Reader(plain).has("/PartType1/Acceleration"));
  H5Reader r(with);
  CHECK(r.attribute_array<double>("/Parameters", "time.output_redshifts").empty());
  REQUIRE(r.has("/PartType1/Acceleration"));
  const auto stored = r.read<double>("/PartType1/Acceleration");
  REQUIRE(stored.size() == 24);
  for (std::size_t i = 0; i < 8; ++i)
    for (int d = 0; d < 3; ++d) CHECK(stored[3 * i + d] == acc[i][d]);
  CHECK(r.attribute<double>("/PartType1/Acceleration", "a_scaling") == -2.0);
  CHECK(r.attribute_string("/PartType1/Acceleration", "Description").find("dp/dt = g / a") != std::string::npos);
}

TEST_CASE("an uncommitted write leaves no file under the final name") {
  const auto path = scratch("never.hdf5").string();
  {
    H5Writer w(path);
    w.create_group("/Header");
    // destroyed without commit(): as if the run died here
  }
  CHECK_FALSE(fs::exists(path));
  for (const auto& entry : fs::directory_iterator(fs::path(path).parent_path()))
    CHECK(entry.path().filename().string().find("never") == std::string::npos);
}

TEST_CASE("GADGET-4/N-GenIC-layout ICs written by h5py read correctly, single and multi-file") {
  for (int variant = 0; variant < 3; ++variant) {   // 1 file, 3 files, 1 file in kpc/h and m/s
    const int nfiles = variant == 1 ? 3 : 1;
    CAPTURE(variant);
    const auto base = scratch("ngenic" + std::to_string(variant)).string();
    const std::string cmd = std::string(ORBIS_PYTHON) + " " + ORBIS_SOURCE_DIR +
                            "/tests/support/write_gadget_ics.py " + base + " 6 " + std::to_string(nfiles) +
                            (variant == 2 ? " kpc" : "");
    REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, "needs python3 with numpy and h5py: " << cmd);
    Snapshot s = read_snapshot(nfiles == 1 ? base + ".hdf5" : base);
    CHECK(s.header.num_files == nfiles);
    CHECK(s.header.num_total == 216);
    CHECK(s.header.box_mpc_h == doctest::Approx(50.0).epsilon(1e-12));
    CHECK(s.header.omega_m == 0.3);   // found in /Parameters
    CHECK(s.particles.mass == 12.5);
    std::map<std::uint64_t, std::size_t> by_id;
    for (std::size_t i = 0; i < s.particles.size(); ++i) by_id[s.particles.id[i]] = i;
    REQUIRE(by_id.size() == 216);
    std::ifstream expected(base + ".expected.txt");
    std::uint64_t id;
    double x[3], u[3];
    int rows = 0;
    while (expected >> id >> x[0] >> x[1] >> x[2] >> u[0] >> u[1] >> u[2]) {
      ++rows;
      REQUIRE(by_id.count(id));
      const std::size_t i = by_id[id];
      for (int d = 0; d < 3; ++d) {
        CHECK(s.particles.pos[i][d] == doctest::Approx(x[d]).epsilon(2e-6));
        CHECK(s.particles.mom[i][d] == doctest::Approx(u[d] * std::pow(0.02, 1.5)).epsilon(1e-6));
      }
    }
    CHECK(rows == 216);
  }
}

TEST_CASE("a 2-file set reads by the run's name X.hdf5, the set's name X and its first file X.0.hdf5") {
  Params params = Params::parse(
      "[box]\nsize_mpc_h = 50.0\nparticles_per_side = 2\n[cosmology]\nomega_m = 0.3\n"
      "[output]\nfiles_per_snapshot = 2\n", "t.toml");
  Particles p;
  p.resize(8);
  p.mass = 1.5;
  for (std::size_t i = 0; i < 8; ++i) {
    p.pos[i] = {1.0 + 5.0 * i, 2.0 * i, 49.0 - i};
    p.mom[i] = {10.0 * i, -1.0 * i, 0.5};
    p.id[i] = 100 + i;
  }
  const auto dir = scratch("set");
  fs::create_directories(dir);
  const std::string stem = (dir / "snapshot_003").string();
  const auto written = write_snapshot(stem + ".hdf5", p, 0.5, params);
  REQUIRE(written == std::vector<std::string>{stem + ".0.hdf5", stem + ".1.hdf5"});
  REQUIRE_FALSE(fs::exists(stem + ".hdf5"));
  for (const std::string& name : {stem + ".hdf5", stem, stem + ".0.hdf5"}) {
    CAPTURE(name);
    CHECK(snapshot_first_file(name) == stem + ".0.hdf5");
    const Snapshot s = read_snapshot(name);
    CHECK(s.header.num_files == 2);
    REQUIRE(s.particles.size() == 8);   // both files, not the first alone
    for (std::size_t i = 0; i < 8; ++i) {
      CHECK(s.particles.id[i] == p.id[i]);
      CHECK(s.particles.pos[i][0] == p.pos[i][0]);
    }
  }
  // A name that matches nothing lists every name tried.
  const std::string run_name = (dir / "snapshot_004.hdf5").string();
  const std::string run_tried = "tried '" + run_name + "', '" + (dir / "snapshot_004.0.hdf5").string() + "'";
  CHECK_THROWS_WITH_AS(read_snapshot(run_name), doctest::Contains(run_tried.c_str()), Error);
  const std::string set_name = (dir / "snapshot_004").string();
  const std::string set_tried = "tried '" + set_name + "', '" + set_name + ".hdf5', '" + set_name + ".0.hdf5'";
  CHECK_THROWS_WITH_AS(read_snapshot(set_name), doctest::Contains(set_tried.c_str()), Error);
}

TEST_CASE("unreadable snapshots give clear errors") {
  CHECK_THROWS_WITH_AS(read_snapshot(scratch("missing").string()),
                       doctest::Contains("not found"), Error);
  const auto text = scratch("text.hdf5").string();
  std::ofstream(text) << "not hdf5";
  CHECK_THROWS_WITH_AS(read_snapshot(text), doctest::Contains("not an HDF5 file"), Error);
}
