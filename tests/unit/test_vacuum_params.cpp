// The parameters of an isolated system's run ([gravity] boundary = "vacuum"): keys of the
// other kind of run refused, required ones asked for, the time span and the ICs checked before
// any work, each message naming the file, line and key; and what the run writes: a GADGET-4
// snapshot of a non-comoving run in the [units] system (ComovingIntegrationOn = 0, Time = t,
// Redshift 0, UnitLength_in_cm of a kpc, velocities dx/dt) with no cosmology in its echo.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "core/params.hpp"
#include "core/physical_units.hpp"
#include "fmm/short_range.hpp"
#include "integrate/conservation.hpp"
#include "integrate/simulation.hpp"
#include "io/hdf5_file.hpp"
#include "support/error_of.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;

namespace {

// A small isolated system's file (8 lines; the [output] folder is added by the tests).
const std::string kVacuum =
    "[ic]\nkind = \"plummer\"\nparticles = 256\n"
    "[gravity]\nboundary = \"vacuum\"\nsoftening = 0.05\nsolver = \"direct\"\n"
    "[time]\nt_end = 0.01\nmax_dt = 0.005\n"
    "[gpu]\nbackend = \"cpu\"\n";

using test::error_of;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

Params vacuum(const std::string& extra, const std::vector<std::string>& overrides = {}) {
  return Params::parse(kVacuum + extra, "iso.toml", overrides);
}

}  // namespace

TEST_CASE("vacuum parameters: a box, a cosmology or redshifts are refused, naming the key and the boundary") {
  std::string e = error_of([] { vacuum("[box]\nsize_mpc_h = 100.0\n"); });
  CAPTURE(e);
  CHECK(contains(e, "iso.toml:14"));
  CHECK(contains(e, "[box] size_mpc_h belongs to periodic (cosmological) runs"));
  CHECK(contains(e, "[gravity] boundary = \"vacuum\" (iso.toml:5)"));
  e = error_of([] { vacuum("", {"cosmology.omega_m=0.3"}); });
  CHECK(contains(e, "--set: [cosmology] omega_m belongs to periodic"));
  e = error_of([] { Params::parse("[ic]\nkind = \"plummer\"\nparticles = 256\n[gravity]\nboundary = \"vacuum\"\n"
                                  "softening = 0.05\nsolver = \"fmm\"\n[time]\nt_end = 1.0\nmax_dt = 0.1\n"
                                  "output_redshifts = [1.0]\n", "iso.toml"); });
  CHECK(contains(e, "iso.toml:11"));
  CHECK(contains(e, "[time] output_redshifts belongs to periodic"));
  // And the other way round: an isolated system's keys in a cosmological box.
  e = error_of([] { Params::parse("[box]\nsize_mpc_h = 100.0\nparticles_per_side = 8\n[time]\nt_end = 3.0\n", "box.toml"); });
  CHECK(contains(e, "box.toml:5: [time] t_end belongs to isolated-system"));
  CHECK(contains(e, "[gravity] boundary = \"periodic\" (box.toml (default))"));
}

TEST_CASE("vacuum parameters: required keys are asked for with the kind of run that needs them") {
  // [ic] particles goes with [ic] kind (an [ic] file says how many): asked for before any work.
  std::string e = error_of([] {
    Simulation sim(Params::parse("[ic]\nkind = \"plummer\"\n[gravity]\nboundary = \"vacuum\"\nsoftening = 0.05\n"
                                 "solver = \"fmm\"\n[time]\nt_end = 1.0\nmax_dt = 0.1\n", "iso.toml"));
  });
  CAPTURE(e);
  CHECK(contains(e, "iso.toml: [ic] kind = \"plummer\" needs [ic] particles"));
  // Neither kind nor file: the ICs are asked for.
  e = error_of([] {
    Simulation sim(Params::parse("[gravity]\nboundary = \"vacuum\"\nsoftening = 0.05\nsolver = \"fmm\"\n"
                                 "[time]\nt_end = 1.0\nmax_dt = 0.1\n", "iso.toml"));
  });
  CHECK(contains(e, "needs its ICs: [ic] kind"));
  CHECK(contains(e, "or [ic] file"));
  e = error_of([] { Params::parse("[gravity]\nboundary = \"vacuum\"\n[time]\nt_end = 1.0\nmax_dt = 0.1\n", "iso.toml"); });
  CHECK(contains(e, "missing required key [gravity] softening"));
  CHECK(contains(e, "for an isolated system"));
  // No particles at all: refused by the schema's range.
  e = error_of([] { vacuum("", {"ic.particles=0"}); });
  CHECK(contains(e, "[ic] particles = 0 is out of range"));
  // A periodic box still requires its box.
  e = error_of([] { Params::parse("[time]\nz_final = 0.0\n", "box.toml"); });
  CHECK(contains(e, "missing required key [box] size_mpc_h"));
}

TEST_CASE("vacuum parameters: leaf-cell pairs are on unless [gravity] leaf_cell_pairs = false, and only in vacuum") {
  CHECK(vacuum_short_range_settings(vacuum("")).leaf_cell);
  CHECK_FALSE(vacuum_short_range_settings(vacuum("", {"gravity.leaf_cell_pairs=false"})).leaf_cell);
  CHECK_THROWS_AS(vacuum("", {"gravity.leaf_cell_pairs=3"}), Error);
  // A periodic box's file does not take it (the key is vacuum's).
  const std::string box = error_of([] {
    Params::parse("[box]\nsize_mpc_h = 100.0\nparticles_per_side = 16\n[gravity]\nleaf_cell_pairs = false\n",
                  "box.toml");
  });
  CHECK(contains(box, "leaf_cell_pairs"));
}

TEST_CASE("vacuum parameters: the time span and the merger's orbit are checked before any work") {
  test::ScratchDir dir("vacuum_params");
  const std::string out = "[output]\ndirectory = \"" + dir.path() + "\"\n";
  std::string e = error_of([&] { Simulation sim(vacuum(out, {"time.t_begin=0.01"})); });
  CAPTURE(e);
  CHECK(contains(e, "iso.toml:9: [time] t_end = 0.01 must be after --set: [time] t_begin = 0.01"));
  e = error_of([&] { Simulation sim(vacuum(out, {"time.output_times=[0.02]"})); });
  CHECK(contains(e, "[time] output_times: output time 0.02 lies outside the run"));
  e = error_of([&] { Simulation sim(vacuum(out, {"ic.kind=merger"})); });
  CHECK(contains(e, "[ic] kind = \"merger\" needs [ic] separation"));
  e = error_of([&] { Simulation sim(vacuum(out, {"ic.kind=merger", "ic.separation=1.0", "ic.pericentre=2.0"})); });
  CHECK(contains(e, "[ic] pericentre = 2 exceeds --set: [ic] separation = 1"));
}

TEST_CASE("vacuum run: the snapshot is GADGET-4's non-comoving layout in galaxy units") {
  test::ScratchDir dir("vacuum_snapshot");
  Simulation sim(vacuum("[output]\ndirectory = \"" + dir.path() + "\"\n"));
  const RunSummary summary = sim.run();
  CHECK(summary.a_final == doctest::Approx(0.01));
  H5Reader file(dir.file("snapshot_000.hdf5"));   // the only output: the end
  CHECK(file.attribute<double>("/Header", "Time") == doctest::Approx(0.01));
  CHECK(file.attribute<double>("/Header", "Redshift") == 0.0);
  CHECK(file.attribute<double>("/Header", "BoxSize") == 0.0);
  CHECK(file.attribute<double>("/Header", "UnitLength_in_cm") == kKpcInCm);
  CHECK(file.attribute<double>("/Header", "UnitVelocity_in_cm_per_s") == 1e5);
  CHECK(file.attribute<double>("/Header", "HubbleParam") == 1.0);
  CHECK(file.attribute<std::int32_t>("/Parameters", "ComovingIntegrationOn") == 0);
  CHECK(file.attribute<double>("/Parameters", "GravityConstantInternal") == kGalaxyG);
  CHECK(file.attribute<double>("/Parameters", "TimeMax") == 0.01);
  CHECK_FALSE(file.has_attribute("/Parameters", "cosmology.omega_m"));
  // Velocities are dx/dt, the run's momenta, in ID order (the engine keeps the ICs' order).
  const std::vector<double> v = file.read<double>("/PartType1/Velocities");
  const Particles& p = sim.particles();
  REQUIRE(v.size() == 3 * p.size());
  for (std::size_t i = 0; i < p.size(); i += 17) {
    REQUIRE(p.id[i] == i + 1);
    CHECK(v[3 * i] == p.mom[i].x);
    CHECK(v[3 * i + 2] == p.mom[i].z);
  }
  std::ifstream used(dir.file("used_parameters.toml"));
  std::stringstream text;
  text << used.rdbuf();
  CHECK_FALSE(contains(text.str(), "omega_m"));
  CHECK(contains(text.str(), "system = 'galaxy'"));
}

TEST_CASE("vacuum run: a restart from a checkpoint ends bitwise where the run without one ends") {
  test::ScratchDir whole("vacuum_whole"), parts("vacuum_parts");
  // Both runs land on t = 0.03 (an output), so their steps are the same up to there.
  const std::vector<std::string> longer = {"time.t_end=0.05", "time.output_times=[0.03]", "checkpoint.every_steps=7"};
  Simulation uninterrupted(vacuum("[output]\nsnapshots = false\ndirectory = \"" + whole.path() + "\"\n", longer));
  uninterrupted.run();
  // The same run stopped at t = 0.03 (its checkpoints on the way), then continued to 0.05.
  {
    Simulation first(vacuum("[output]\nsnapshots = false\ndirectory = \"" + parts.path() + "\"\n",
                            {"time.t_end=0.03", "time.output_times=[0.03]", "checkpoint.every_steps=7"}));
    first.run();
  }
  Simulation resumed(vacuum("[output]\nsnapshots = false\ndirectory = \"" + parts.path() + "\"\n", longer),
                     RunOptions{true, true});
  const RunSummary summary = resumed.run();
  CHECK(summary.a_final == doctest::Approx(0.05));
  const Particles& a = uninterrupted.particles();
  const Particles& b = resumed.particles();
  REQUIRE(a.size() == b.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    for (int d = 0; d < 3; ++d) differ += a.pos[i][d] != b.pos[i][d] || a.mom[i][d] != b.mom[i][d];
  CHECK(differ == 0);
}

TEST_CASE("conserved quantities of two bodies against their closed forms") {
  Particles p;
  p.mass = 2.0;
  p.pos = {Vec3d{1, 0, 0}, Vec3d{-2, 0, 0}};
  p.mom = {Vec3d{0, 3, 0}, Vec3d{0, -1, 1}};
  const ConservedQuantities c = conserved_quantities(p, 5.0, softened_pair_sum(p.pos, 4.0));
  CHECK(c.potential == doctest::Approx(-5.0 * 2 * 2 / std::sqrt(9.0 + 16.0)));   // -G m^2 / sqrt(r^2 + eps^2)
  CHECK(c.kinetic == doctest::Approx(0.5 * 2 * (9 + 2)));
  CHECK(c.momentum.y == doctest::Approx(4.0));
  CHECK(c.momentum.z == doctest::Approx(2.0));
  // L = m sum x × v: (1,0,0) × (0,3,0) = (0,0,3); (-2,0,0) × (0,-1,1) = (0,2,2).
  CHECK(c.angular_momentum.y == doctest::Approx(4.0));
  CHECK(c.angular_momentum.z == doctest::Approx(10.0));
  const ConservationRecord r = conservation_record(1.0, c, &c);
  CHECK(r.energy_drift == 0.0);
}

TEST_CASE("conservation drifts of a system that starts at rest: scaled by the velocities it gains") {
  Particles p;
  p.pos = {{1, 0, 0}, {-1, 0, 0}};
  p.mom = {{0, 0, 0}, {0, 0, 0}};
  p.id = {1, 2};
  p.mass = 1.0;
  const ConservedQuantities start = conserved_quantities(p, 1.0, softened_pair_sum(p.pos, 0.0));
  CHECK(start.v_rms == 0.0);
  // Later the bodies fall in, and a force error has left P = (0, 0.2, 0) behind.
  p.mom = {{-1, 0.1, 0}, {1, 0.1, 0}};
  const ConservedQuantities now = conserved_quantities(p, 1.0, softened_pair_sum(p.pos, 0.0));
  const ConservationRecord r = conservation_record(2.0, now, &start);
  // |dP| / (M v) with v = now's rms velocity sqrt(1.01): 0.2 / (2 sqrt(1.01)).
  CHECK(r.momentum_drift == doctest::Approx(0.2 / (2 * std::sqrt(1.01))));
}
