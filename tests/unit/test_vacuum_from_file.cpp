// An isolated system's run from a GADGET file ([gravity] boundary = "vacuum", [ic] file): a
// small two-type galaxy written here (a "disc" of type 2 with its own masses, a "halo" of type
// 1 from MassTable) runs a few steps from the file's Time, keeps its masses and types through
// the run into its snapshot, and continues from a checkpoint bit for bit as the run that was
// not stopped; [time] t_begin overrides the file's Time. The [ic] keys that do not go together
// are refused before any work, and so is a bad file through `orbis run` (exit 1, the file and
// the problem named).
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "core/error.hpp"
#include "core/params.hpp"
#include "core/physical_units.hpp"
#include "integrate/simulation.hpp"
#include "io/hdf5_file.hpp"
#include "io/system_file.hpp"
#include "support/error_of.hpp"
#include "support/run_command.hpp"
#include "support/scratch_dir.hpp"
#include "support/system_files.hpp"

using namespace orbis;

namespace {

constexpr double kTime = 0.5;   // the file's Time, kpc/(km/s)

// 40 disc particles (type 2, masses 0.01 .. 0.0139) and 60 halo particles (type 1, MassTable
// 0.02), slowly moving, in galaxy units.
test::TypeSet galaxy() { return test::two_type_galaxy(100, 40, 31); }

std::string write_galaxy(const test::ScratchDir& dir, const std::string& name = "galaxy.hdf5") {
  test::Hdf5SystemOptions o;
  o.time = kTime;
  o.units = test::galaxy_units();
  test::write_hdf5_system(dir.file(name), galaxy(), o);
  return dir.file(name);
}

std::string run_toml(const std::string& file, const std::string& out) {
  return "[ic]\nfile = \"" + file + "\"\n"
         "[gravity]\nboundary = \"vacuum\"\nsoftening = 0.1\nsolver = \"direct\"\n"
         "[time]\nt_end = 0.504\nmax_dt = 0.001\n"
         "[output]\ndirectory = \"" + out + "\"\n"
         "[gpu]\nbackend = \"cpu\"\n";
}

// The error of setting up a run of `params` ("" if none).
std::string setup_error(const Params& params) {
  return test::error_of([&] { Simulation sim(params); });
}

}  // namespace

TEST_CASE("vacuum run from a file: from its Time, its masses and types through the run into the snapshot") {
  const test::ScratchDir dir("vacuum_from_file");
  const std::string file = write_galaxy(dir);
  Simulation sim(Params::parse(run_toml(file, dir.file("out")), "run.toml"));
  const RunSummary summary = sim.run();
  CHECK(summary.steps >= 2);
  CHECK(summary.a_final == doctest::Approx(0.504).epsilon(1e-12));
  REQUIRE(sim.conservation_checks().size() == 2);
  CHECK(sim.conservation_checks().front().t == kTime);   // the run started at the file's Time
  // The engine's particles: the file's, in type order, their masses and types kept.
  const Particles& p = sim.particles();
  REQUIRE(p.size() == 100);
  REQUIRE(p.masses.size() == 100);
  REQUIRE(p.type.size() == 100);
  for (std::size_t i = 0; i < 100; ++i) {
    CAPTURE(i);
    CHECK(p.type[i] == (i < 60 ? 1 : 2));
    CHECK(p.masses[i] == (i < 60 ? 0.02 : 0.01 + 1e-4 * static_cast<double>(i - 60)));
  }
  CHECK(p.mass == doctest::Approx((60 * 0.02 + 40 * 0.01 + 1e-4 * 780) / 100).epsilon(1e-14));
  // The snapshot at the end: two groups, Masses for the disc only.
  const std::string snapshot = dir.file("out/snapshot_000.hdf5");
  H5Reader r(snapshot);
  CHECK(r.attribute<double>("/Header", "Time") == doctest::Approx(0.504).epsilon(1e-12));
  CHECK(r.attribute_array<double>("/Header", "MassTable") == std::vector<double>{0, 0.02, 0, 0, 0, 0});
  CHECK(r.has("/PartType2/Masses"));
  CHECK(r.attribute<double>("/Parameters", "time.t_begin") == kTime);
  const SystemFile back = read_system_file(snapshot, physical_units("galaxy"));
  CHECK(back.particles.masses == p.masses);
  CHECK(back.particles.type == p.type);

  // [time] t_begin overrides the file's Time.
  const test::ScratchDir other("vacuum_from_file_t0");
  Simulation early(Params::parse(run_toml(file, other.path()), "run.toml", {"time.t_begin=0.499"}));
  early.run();
  CHECK(early.conservation_checks().front().t == 0.499);
}

TEST_CASE("vacuum run from a file: a restart continues bit for bit, masses and types kept") {
  const test::ScratchDir whole("vacuum_file_whole"), parts("vacuum_file_parts");
  const std::string file = write_galaxy(whole);
  const std::vector<std::string> longer = {"time.output_times=[0.502]", "checkpoint.every_steps=1",
                                           "output.snapshots=false"};
  Simulation uninterrupted(Params::parse(run_toml(file, whole.file("out")), "run.toml", longer));
  uninterrupted.run();
  {
    std::vector<std::string> shorter = longer;
    shorter.push_back("time.t_end=0.502");
    Simulation first(Params::parse(run_toml(file, parts.path()), "run.toml", shorter));
    first.run();
  }
  Simulation resumed(Params::parse(run_toml(file, parts.path()), "run.toml", longer), RunOptions{true, true});
  CHECK(resumed.run().a_final == doctest::Approx(0.504).epsilon(1e-12));
  const Particles& a = uninterrupted.particles();
  const Particles& b = resumed.particles();
  REQUIRE(a.size() == b.size());
  CHECK(b.masses == a.masses);
  CHECK(b.type == a.type);
  CHECK(b.mass == a.mass);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    for (int d = 0; d < 3; ++d) differ += a.pos[i][d] != b.pos[i][d] || a.mom[i][d] != b.mom[i][d];
  CHECK(differ == 0);
}

TEST_CASE("vacuum run from a file: keys that do not go with it are refused before any work") {
  const test::ScratchDir dir("vacuum_file_keys");
  const std::string file = write_galaxy(dir);
  const std::string toml = run_toml(file, dir.file("out"));
  std::string e = setup_error(Params::parse(toml, "run.toml", {"ic.kind=plummer"}));
  CHECK(e.find("--set: [ic] kind and run.toml:2: [ic] file are both given") != std::string::npos);
  e = setup_error(Params::parse(toml, "run.toml", {"ic.particles=100"}));
  CHECK(e.find("--set: [ic] particles: a key of the built-in generators") != std::string::npos);
  e = setup_error(Params::parse(toml, "run.toml", {"ic.mass_ratio=2"}));
  CHECK(e.find("[ic] mass_ratio: a key of the built-in generators") != std::string::npos);
  // A box belongs to periodic runs (the schema's scopes), and so does the binary length unit.
  CHECK_THROWS_WITH_AS(Params::parse(toml, "run.toml", {"box.size_mpc_h=100"}),
                       doctest::Contains("[box] size_mpc_h belongs to periodic (cosmological) runs"), Error);
  CHECK_THROWS_WITH_AS(Params::parse(toml, "run.toml", {"ic.file_length_unit=Mpc/h"}),
                       doctest::Contains("[ic] file_length_unit belongs to periodic"), Error);
  // mass_ratio is the merger's.
  e = setup_error(Params::parse("[ic]\nkind = \"plummer\"\nparticles = 8\nmass_ratio = 2.0\n"
                             "[gravity]\nboundary = \"vacuum\"\nsoftening = 0.1\nsolver = \"fmm\"\n[time]\nt_end = 1.0\nmax_dt = 0.1\n",
                             "iso.toml"));
  CHECK(e.find("iso.toml:4: [ic] mass_ratio applies to [ic] kind = \"merger\" only") != std::string::npos);
}

TEST_CASE("vacuum run from a file: `orbis run` refuses a bad file with exit 1, naming it and the problem") {
  const test::ScratchDir dir("vacuum_file_bad");
  test::TypeSet set = galaxy();
  set[2].ids[5] = set[1].ids[7];   // two particles with ID 8
  test::Hdf5SystemOptions o;
  o.units = test::galaxy_units();
  test::write_hdf5_system(dir.file("twice.hdf5"), set, o);
  test::write_whole_file(dir.file("run.toml"), run_toml("twice.hdf5", dir.file("out")));
  const int status = test::run_command("cd '" + dir.path() + "' && " + std::string(ORBIS_BINARY) + " run run.toml",
                                       dir.file("log.txt"));
  const std::string log = test::read_whole_file(dir.file("log.txt"));
  CAPTURE(log);
  CHECK(status == 1);
  CHECK(log.find("orbis: error:") != std::string::npos);
  CHECK(log.find("'twice.hdf5': duplicate particle ID 48: particle 7 of type 1") != std::string::npos);
  // `orbis ic` makes built-in ICs only.
  write_galaxy(dir, "good.hdf5");
  test::write_whole_file(dir.file("ic.toml"), run_toml("good.hdf5", dir.file("ic_out")));
  CHECK(test::run_command("cd '" + dir.path() + "' && " + std::string(ORBIS_BINARY) + " ic ic.toml",
                          dir.file("ic_log.txt")) == 1);
  CHECK(test::read_whole_file(dir.file("ic_log.txt")).find("`orbis ic` makes the built-in ICs of [ic] kind") !=
        std::string::npos);
}
