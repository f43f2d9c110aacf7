// [ic] file: a run starts from an IC file at the file's redshift, and a file that does not
// match the parameters (box, particle count, cosmology) stops the run before any work.
#include <doctest/doctest.h>

#include <cmath>

#include "core/error.hpp"
#include "core/params.hpp"
#include "core/units.hpp"
#include "integrate/simulation.hpp"
#include "io/snapshot.hpp"
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
