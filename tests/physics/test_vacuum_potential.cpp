// Each particle's gravitational potential in an isolated system's snapshots ([output]
// potential = true, issue #31): /PartTypeN/Potential must be phi_i = -G sum_{j != i} m_j /
// sqrt(r_ij^2 + eps^2), the Plummer-softened potential whose gradient is the force, with no
// self term. Checked against a sum written out here in long double from the snapshot's own
// positions and masses (and G of the run's units): for a two-type galaxy with individual
// masses in galaxy units (the typed writer) and for a Plummer sphere of one mass in N-body
// units (the one-mass writer); W = sum m_i phi_i / 2 must be the conservation check's W (its
// i < j pair sum, another code path). Bad input: the key in a box, and more particles than the
// direct sum's limits, are refused before any work.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/params.hpp"
#include "core/physical_units.hpp"
#include "integrate/simulation.hpp"
#include "io/hdf5_file.hpp"
#include "support/error_of.hpp"
#include "support/potential_reference.hpp"
#include "support/scratch_dir.hpp"
#include "support/system_files.hpp"

using namespace orbis;

namespace {

// The error of parsing `toml` and setting up its run ("" if none).
std::string setup_error(const std::string& toml, const std::string& name, const std::vector<std::string>& overrides = {}) {
  return test::error_of([&] { Simulation sim(Params::parse(toml, name, overrides)); });
}

}  // namespace

TEST_CASE("vacuum potential: a two-type galaxy of individual masses, the direct sum in its snapshot") {
  const test::ScratchDir dir("vacuum_potential_galaxy");
  // 30 disc particles (type 2, masses 0.01 .. 0.0129) in a thin layer, 50 halo particles
  // (type 1, MassTable 0.02) in a sphere of 5 kpc, galaxy units.
  const test::TypeSet set = test::two_type_galaxy(80, 30, 7);
  test::Hdf5SystemOptions o;
  o.time = 0.5;
  o.units = test::galaxy_units();
  test::write_hdf5_system(dir.file("galaxy.hdf5"), set, o);
  const double eps = 0.1;
  Simulation sim(Params::parse("[ic]\nfile = \"" + dir.file("galaxy.hdf5") + "\"\n"
                               "[gravity]\nboundary = \"vacuum\"\nsoftening = 0.1\nsolver = \"direct\"\n"
                               "[time]\nt_end = 0.504\nmax_dt = 0.001\n"
                               "[output]\npotential = true\ndirectory = \"" + dir.file("out") + "\"\n"
                               "[gpu]\nbackend = \"cpu\"\n",
                               "galaxy.toml"));
  sim.run();
  H5Reader r(dir.file("out/snapshot_000.hdf5"));
  REQUIRE(r.has("/PartType1/Potential"));
  REQUIRE(r.has("/PartType2/Potential"));
  CHECK(r.has_attribute("/PartType1/Potential", "to_cgs"));
  double w = 0;
  const double worst = test::worst_against_direct_sum({test::read_potentials(r, 1), test::read_potentials(r, 2)}, physical_units("galaxy").g, eps, w);
  MESSAGE("galaxy: the largest relative difference from the direct sum ", worst);
  CHECK(worst < 1e-12);
  REQUIRE(sim.conservation_checks().size() == 2);
  CHECK(w == doctest::Approx(sim.conservation_checks().back().now.potential).epsilon(1e-12));
}

TEST_CASE("vacuum potential: a Plummer sphere of one mass in N-body units, at every output") {
  const test::ScratchDir dir("vacuum_potential_plummer");
  const double eps = 0.05;
  Simulation sim(Params::parse("[ic]\nkind = \"plummer\"\nparticles = 300\nscale_radius = 0.6\nseed = 5\n"
                               "[units]\nsystem = \"nbody\"\n"
                               "[gravity]\nboundary = \"vacuum\"\nsolver = \"fmm\"\nsoftening = 0.05\n"
                               "[time]\nt_end = 0.1\nmax_dt = 0.01\noutput_interval = 0.05\n"
                               "[output]\npotential = true\ndirectory = \"" + dir.path() + "\"\n"
                               "[gpu]\nbackend = \"cpu\"\n",
                               "plummer.toml"));
  sim.run();
  REQUIRE(sim.conservation_checks().size() == 3);   // t = 0, 0.05, 0.1
  for (int k = 0; k < 3; ++k) {
    CAPTURE(k);
    H5Reader r(dir.file("snapshot_00" + std::to_string(k) + ".hdf5"));
    REQUIRE(r.has("/PartType1/Potential"));
    CHECK_FALSE(r.has("/PartType1/Masses"));
    double w = 0;
    CHECK(test::worst_against_direct_sum({test::read_potentials(r, 1)}, 1.0, eps, w) < 1e-12);
    CHECK(w == doctest::Approx(sim.conservation_checks()[static_cast<std::size_t>(k)].now.potential).epsilon(1e-12));
  }
}

TEST_CASE("vacuum potential: refused in a box, and beyond the direct sum's particle limits, before any work") {
  const test::ScratchDir dir("vacuum_potential_bad");
  const std::string box = "[box]\nsize_mpc_h = 100.0\nparticles_per_side = 8\n"
                          "[output]\npotential = true\ndirectory = \"" + dir.path() + "\"\n";
  const std::string in_box = setup_error(box, "box.toml");
  CHECK(in_box.find("box.toml") != std::string::npos);
  CHECK(in_box.find("potential") != std::string::npos);

  const std::string vacuum = "[ic]\nkind = \"plummer\"\nparticles = 300\n"
                             "[units]\nsystem = \"nbody\"\n"
                             "[gravity]\nboundary = \"vacuum\"\nsolver = \"fmm\"\nsoftening = 0.05\n"
                             "[time]\nt_end = 0.1\nmax_dt = 0.01\n"
                             "[output]\npotential = true\ndirectory = \"" + dir.file("v") + "\"\n"
                             "[gpu]\nbackend = \"cpu\"\n";
  const std::string over = setup_error(vacuum, "v.toml", {"analysis.energy_pairs_max_particles=299"});
  CHECK(over.find("output.potential") != std::string::npos);
  CHECK(over.find("energy_pairs_max_particles") != std::string::npos);
  CHECK(over.find("300") != std::string::npos);
  // Without snapshots there is nothing to write it into: no limit applies.
  CHECK(setup_error(vacuum, "v.toml", {"analysis.energy_pairs_max_particles=299", "output.snapshots=false"}).empty());
}
