// [ic] file: a run starts from an IC file at the file's redshift, and a file that does not
// match the parameters (box, particle count, cosmology) stops the run before any work.
#include <doctest/doctest.h>

#include <cmath>

#include "core/error.hpp"
#include "core/params.hpp"
#include "core/units.hpp"
#include "integrate/simulation.hpp"
#include "io/snapshot.hpp"
#include "support/gadget_binary_writer.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;

TEST_CASE("a run starts from an IC file at its redshift and checks it against the parameters") {
  test::ScratchDir dir("run_from_file");
  const std::string base = "[box]\nsize_mpc_h = 32.0\nparticles_per_side = 8\n"
                           "[gravity]\nsolver = \"pm\"\n[analysis]\npk = false\nfof = false\n"
                           "[output]\nsnapshots = true\ndirectory = \"" + dir.path() + "\"\n"
                           "[time]\nz_final = 19.0\noutput_redshifts = []\n";
  Particles p;
  p.resize(512);
  p.mass = 0.3144 * units::rho_crit0 * 32.0 * 32.0 * 32.0 / 512;
  for (std::size_t i = 0; i < 512; ++i) {
    p.pos[i] = {4.0 * (i / 64) + 0.1, 4.0 * ((i / 8) % 8), 4.0 * (i % 8)};
    p.id[i] = i + 1;
  }
  const std::string ics = dir.file("my_ics.hdf5");
  const double a_file = 1.0 / 31.0;   // z = 30, not the parameter file's z_init
  write_snapshot(ics, p, a_file, Params::parse(base, "writer.toml"));

  Simulation sim(Params::parse(base + "[ic]\nfile = \"" + ics + "\"\n", "run.toml"));
  const RunSummary summary = sim.run();
  CHECK(summary.steps > 0);
  CHECK(summary.a_final == doctest::Approx(1.0 / 20.0).epsilon(1e-12));
  CHECK(sim.particles().size() == 512);
  CHECK(sim.particles().mass == p.mass);
  const Snapshot out = read_snapshot(dir.file("snapshot_000.hdf5"));
  CHECK(out.header.redshift == doctest::Approx(19.0).epsilon(1e-12));
  // The parameters as given: [gpu] device = -1 (the default: each rank its node's GPU) stays
  // -1, not the device this rank took, so that a rerun from the file on several ranks
  // spreads them over the GPUs again.
  CHECK(Params::load(dir.file("used_parameters.toml")).get_int("gpu.device") == -1);

  CHECK_THROWS_WITH_AS(Simulation(Params::parse(base + "[ic]\nfile = \"" + ics + "\"\n", "run.toml",
                                                {"box.size_mpc_h=64"})),
                       doctest::Contains("BoxSize 32"), Error);
  CHECK_THROWS_WITH_AS(Simulation(Params::parse(base + "[ic]\nfile = \"" + ics + "\"\n", "run.toml",
                                                {"box.particles_per_side=16"})),
                       doctest::Contains("holds 512 particles"), Error);
  CHECK_THROWS_WITH_AS(Simulation(Params::parse(base + "[ic]\nfile = \"" + ics + "\"\n", "run.toml",
                                                {"cosmology.omega_m=0.25"})),
                       doctest::Contains("Omega0"), Error);
  CHECK_THROWS_WITH_AS(Simulation(Params::parse(base + "[ic]\nfile = \"" + ics + "\"\n", "run.toml",
                                                {"time.z_final=40"})),
                       doctest::Contains("starting redshift 30"), Error);
  CHECK_THROWS_WITH_AS(Simulation(Params::parse(base + "[ic]\nfile = \"" + dir.file("none.hdf5") + "\"\n", "run.toml")),
                       doctest::Contains("not found"), Error);
}

TEST_CASE("a run starts from GADGET binary ICs in kpc/h, and a wrong length unit is named") {
  test::ScratchDir dir("run_from_binary");
  const std::string base = "[box]\nsize_mpc_h = 32.0\nparticles_per_side = 4\n"
                           "[gravity]\nsolver = \"pm\"\n[analysis]\npk = false\nfof = false\n"
                           "[output]\nsnapshots = false\ndirectory = \"" + dir.path() + "\"\n"
                           "[time]\nz_final = 19.0\noutput_redshifts = []\n";
  std::vector<Vec3d> pos(64), vel(64);
  std::vector<std::uint64_t> ids(64);
  for (std::size_t i = 0; i < 64; ++i) {
    pos[i] = {8000.0 * (i / 16) + 100.0, 8000.0 * ((i / 4) % 4), 8000.0 * (i % 4)};   // kpc/h
    ids[i] = i + 1;
  }
  test::GadgetBinaryHeaderValues h;
  h.mass = 0.3144 * units::rho_crit0 * 32.0 * 32.0 * 32.0 / 64;
  h.box = 32000.0;
  h.time = 1.0 / 31.0;
  h.omega_m = 0.3144;
  const std::string ics = dir.file("ics_gadget");
  test::write_gadget_binary(ics, pos, vel, ids, h, test::GadgetBinaryLayout{});

  Simulation sim(Params::parse(base + "[ic]\nfile = \"" + ics + "\"\n", "run.toml"));
  CHECK(sim.run().a_final == doctest::Approx(1.0 / 20.0).epsilon(1e-12));
  CHECK_THROWS_WITH_AS(Simulation(Params::parse(base + "[ic]\nfile = \"" + ics + "\"\nfile_length_unit = \"Mpc/h\"\n",
                                                "run.toml")),
                       doctest::Contains("[ic] file_length_unit = Mpc/h"), Error);
}
