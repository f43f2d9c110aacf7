// Bad input gets a clear message and exit code 1 before any work, and no file under a final
// name: one case each for a parameter error, a missing, truncated or corrupt IC file, a wrong
// HDF5 layout, NaN and Inf, particles far outside the box (near ones are wrapped, with a
// warning), zero particles, a particle count that is not particles_per_side^3, r_cut >= L/2,
// too little host memory, and a write that fails (the disk full).
#include <doctest/doctest.h>

#include <hdf5.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "core/params.hpp"
#include "core/units.hpp"
#include "io/snapshot.hpp"
#include "support/run_command.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;
using test::read_whole_file;
using test::run_command;
using test::write_whole_file;
namespace fs = std::filesystem;

namespace {

const std::string kRun = "[box]\nsize_mpc_h = 32.0\nparticles_per_side = 8\n[ic]\nz_init = 20.0\n"
                         "[gravity]\nsolver = \"pm\"\n[analysis]\nfof = false\n"
                         "[time]\nz_final = 19.0\noutput_redshifts = []\n[output]\ndirectory = \"out\"\n";

// A valid IC file of n particles on a grid-like pattern inside the 32 Mpc/h box.
void write_ics(const std::string& path, std::size_t n) {
  Particles p;
  p.resize(n);
  p.mass = 0.3144 * units::rho_crit0 * 32.0 * 32.0 * 32.0 / 512;
  for (std::size_t i = 0; i < n; ++i) {
    p.pos[i] = {4.0 * (i / 64 % 8) + 0.1, 4.0 * ((i / 8) % 8) + 0.2, 4.0 * (i % 8) + 0.3};
    p.id[i] = i + 1;
  }
  write_snapshot(path, p, 1.0 / 21.0, Params::parse(kRun, "writer.toml"));
}

// Sets element `index` of a double dataset of an existing file.
void set_value(const std::string& path, const std::string& dataset, std::size_t index, double value) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t set = H5Dopen2(file, dataset.c_str(), H5P_DEFAULT);
  std::vector<double> values(3 * 512);
  REQUIRE(H5Dread(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0);
  values.at(index) = value;
  REQUIRE(H5Dwrite(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0);
  H5Dclose(set);
  H5Fclose(file);
}

void remove_dataset(const std::string& path, const std::string& dataset) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(H5Ldelete(file, dataset.c_str(), H5P_DEFAULT) >= 0);
  H5Fclose(file);
}

// The names in `folder` that are not hidden (temporaries are).
std::vector<std::string> final_names(const std::string& folder) {
  std::vector<std::string> names;
  if (!fs::exists(folder)) return names;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (name[0] != '.') names.push_back(name);
  }
  return names;
}

// Runs `orbis run run.toml FLAGS` (after `prefix`, shell commands) in a fresh folder holding
// run.toml (kRun) and what `make_ics` writes as ics.hdf5.
struct Outcome {
  int status;
  std::string log;
  std::vector<std::string> outputs;   // final names in out/
};

template <typename MakeIcs>
Outcome run_case(const std::string& name, const std::string& flags, MakeIcs make_ics,
                 const std::string& prefix = "") {
  static test::ScratchDir dir("bad_input");
  const std::string folder = dir.file(name);
  fs::create_directories(folder);
  write_whole_file(folder + "/run.toml", kRun);
  make_ics(folder + "/ics.hdf5");
  Outcome o;
  o.status = run_command(prefix + "cd '" + folder + "' && " + std::string(ORBIS_BINARY) + " run run.toml " + flags,
                         folder + "/log.txt");
  o.log = read_whole_file(folder + "/log.txt");
  o.outputs = final_names(folder + "/out");
  return o;
}

const auto kNoIcs = [](const std::string&) {};
const auto kGoodIcs = [](const std::string& path) { write_ics(path, 512); };
const std::string kFromFile = "--set ic.file=ics.hdf5";

// Exit 1, the message, nothing in the output folder.
void check_refused(const Outcome& o, const std::string& message) {
  CAPTURE(o.log);
  CHECK(o.status == 1);
  CHECK(o.log.find("orbis: error:") != std::string::npos);
  CHECK(o.log.find(message) != std::string::npos);
  CHECK(o.outputs.empty());
}

}  // namespace

TEST_CASE("a parameter error names the file, line and key") {
  check_refused(run_case("parameter", "--set gravity.theta=5", kNoIcs), "[gravity] theta");
  check_refused(run_case("unknown_key", "--set time.zfinal=1.0", kNoIcs), "zfinal");
}

TEST_CASE("a missing, truncated or corrupt IC file") {
  check_refused(run_case("missing", "--set ic.file=none.hdf5", kNoIcs), "none.hdf5");
  check_refused(run_case("truncated", "--set ic.file=cut.hdf5",
                         [](const std::string& path) {
                           write_ics(path, 512);
                           const std::string bytes = read_whole_file(path);
                           write_whole_file(fs::path(path).parent_path() / "cut.hdf5", bytes.substr(0, bytes.size() / 2));
                         }),
                "truncated");
  check_refused(run_case("corrupt", kFromFile,
                         [](const std::string& path) { write_whole_file(path, std::string(4096, 'x')); }),
                "is not an HDF5 file");
}

TEST_CASE("an IC file without the GADGET layout") {
  check_refused(run_case("layout", kFromFile,
                         [](const std::string& path) {
                           write_ics(path, 512);
                           remove_dataset(path, "/PartType1/Velocities");
                         }),
                "has no dataset /PartType1/Velocities");
}

TEST_CASE("NaN and Inf positions and velocities") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  check_refused(run_case("nan", kFromFile,
                         [&](const std::string& path) {
                           write_ics(path, 512);
                           set_value(path, "/PartType1/Coordinates", 100, nan);
                         }),
                "position nan in /PartType1/Coordinates");
  check_refused(run_case("inf", kFromFile,
                         [&](const std::string& path) {
                           write_ics(path, 512);
                           set_value(path, "/PartType1/Velocities", 7, inf);
                         }),
                "velocity inf in /PartType1/Velocities");
}

TEST_CASE("particles outside the box: far is an error, near is wrapped with a warning") {
  check_refused(run_case("far", kFromFile,
                         [](const std::string& path) {
                           write_ics(path, 512);
                           set_value(path, "/PartType1/Coordinates", 5, 200.0);
                         }),
                "more than one box length outside");
  const Outcome near = run_case("near", kFromFile,
                                [](const std::string& path) {
                                  write_ics(path, 512);
                                  set_value(path, "/PartType1/Coordinates", 5, 32.5);
                                });
  CAPTURE(near.log);
  CHECK(near.status == 0);
  CHECK(near.log.find("wrapped periodically into the box") != std::string::npos);
}

TEST_CASE("zero particles, or not particles_per_side^3") {
  check_refused(run_case("zero", kFromFile, [](const std::string& path) { write_ics(path, 0); }),
                "holds 0 particles");
  check_refused(run_case("not_cube", kFromFile, [](const std::string& path) { write_ics(path, 500); }),
                "holds 500 particles");
}

TEST_CASE("r_cut >= L/2, and too little host memory") {
  check_refused(run_case("r_cut", "--set gravity.solver=treepm --set gravity.pm_grid_side=8", kNoIcs),
                "must be < BoxSize/2");
  check_refused(run_case("memory", "--set box.particles_per_side=8192 --set box.size_mpc_h=8192", kNoIcs),
                "of host memory");
}

TEST_CASE("a write that fails (the disk full) stops the run and leaves no file under a final name") {
  // A file size limit makes every write beyond 16 KiB fail (EFBIG) as a full disk would.
  const Outcome o = run_case("disk_full", "", kNoIcs, "trap '' XFSZ; ulimit -f 32; export OMPI_MCA_ess_singleton_isolated=1; ");
  CAPTURE(o.log);
  CHECK(o.status == 1);
  CHECK(o.log.find("cannot finish writing 'out/snapshot_000.hdf5'") != std::string::npos);
  CHECK(o.log.find("File too large") != std::string::npos);
  for (const auto& name : o.outputs) CHECK(name.rfind("snapshot_", 0) != 0);
}
