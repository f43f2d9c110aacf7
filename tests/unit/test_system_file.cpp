// Isolated systems' IC files (io/system_file.hpp), written here in the layouts DICE, GalIC,
// MakeNewDisk, pynbody and GADGET use: HDF5 files of several types with a mix of MassTable
// entries and Masses datasets (one file, and a set of two split by type as GADGET splits
// them), GADGET binary format 1 and 2 with a MASS block and several types (both byte orders,
// float and double), the units of the file converted to the run's; every type in type order
// and then file order, `masses` only for unequal masses, `type` only beside type 1. Every bad
// input is refused with the file and the problem named, and the cosmological reader refuses
// these files saying what they hold and what it needs.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "core/physical_units.hpp"
#include "io/snapshot.hpp"
#include "io/system_file.hpp"
#include "support/scratch_dir.hpp"
#include "support/system_files.hpp"

using namespace orbis;
using test::TypeSet;

namespace {

const PhysicalUnits kGalaxy = physical_units("galaxy");
const PhysicalUnits kNbody = physical_units("nbody");

std::string error_of(const std::string& path, const PhysicalUnits& units = kGalaxy) {
  try {
    read_system_file(path, units);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Types 0 (3 particles, own masses), 1 (5, MassTable 2), 3 (2, own masses) and 4 (4, MassTable 0.25).
TypeSet mixed() { return test::make_type_set({3, 5, 0, 2, 4, 0}, {0, 2.0, 0, 0, 0.25, 0}); }

// The particles of `set` in the order the reader gives them (type, then the set's order), with
// masses scaled by `mass_scale`: every column compared exactly.
void check_as_set(const SystemFile& f, const TypeSet& set, double mass_scale, bool float_values = false) {
  const Particles& p = f.particles;
  std::size_t i = 0;
  for (int t = 0; t < 6; ++t)
    for (std::size_t k = 0; k < set[t].pos.size(); ++k, ++i) {
      CAPTURE(t);
      CAPTURE(k);
      REQUIRE(i < p.size());
      CHECK(p.type_of(i) == t);
      CHECK(p.id[i] == set[t].ids[k]);
      const double m = set[t].table_mass != 0 ? set[t].table_mass : set[t].masses[k];
      const auto stored = [&](double v) { return float_values ? static_cast<double>(static_cast<float>(v)) : v; };
      CHECK(p.mass_of(i) == stored(m) * mass_scale);
      for (int d = 0; d < 3; ++d) {
        CHECK(p.pos[i][d] == stored(set[t].pos[k][d]));
        CHECK(p.mom[i][d] == stored(set[t].vel[k][d]));   // dx/dt as the file has it: no sqrt(a)
      }
    }
  CHECK(i == p.size());
}

}  // namespace

TEST_CASE("system files: HDF5 with several types, MassTable and Masses mixed, in the file's units") {
  const test::ScratchDir dir("system_hdf5");
  const TypeSet set = mixed();
  test::Hdf5SystemOptions o;
  o.time = 2.5;
  o.box = 40.0;   // a GADGET run's box: not used, not wrapped into
  o.units = test::galaxy_units();
  const std::string one = dir.file("galaxy.hdf5");
  test::write_hdf5_system(one, set, o);
  SystemFile f = read_system_file(one, kGalaxy);
  REQUIRE(f.particles.size() == 14);
  check_as_set(f, set, 1.0);
  CHECK(f.time == 2.5);
  CHECK(f.box == 40.0);
  CHECK(f.per_type == TypeCounts{3, 5, 0, 2, 4, 0});
  CHECK(f.particles.type.size() == 14);
  REQUIRE(f.particles.masses.size() == 14);
  double sum = 0;
  for (double m : f.particles.masses) sum += m;
  CHECK(f.particles.mass == doctest::Approx(sum / 14).epsilon(1e-15));   // the mean

  // In Msun and Mpc (time unit Mpc/(km/s)): converted to 1e10 Msun, kpc and kpc/(km/s).
  o.units.cgs = {3.085678e24, 1.989e33, 1e5};
  const std::string mpc = dir.file("mpc.hdf5");
  test::write_hdf5_system(mpc, set, o);
  f = read_system_file(mpc, kGalaxy);
  CHECK(f.time == doctest::Approx(2500.0).epsilon(1e-14));
  CHECK(f.box == doctest::Approx(40000.0).epsilon(1e-14));
  CHECK(f.particles.pos[4].y == doctest::Approx(1000 * set[1].pos[1].y).epsilon(1e-14));
  CHECK(f.particles.mom[4].y == set[1].vel[1].y);
  CHECK(f.particles.mass_of(3) == doctest::Approx(2e-10).epsilon(1e-14));
  CHECK(contains(f.units, "converted from the file's units"));

  // No unit attributes: taken in the run's units, whatever they are.
  o.units.cgs.clear();
  const std::string bare = dir.file("bare.hdf5");
  test::write_hdf5_system(bare, set, o);
  f = read_system_file(bare, kNbody);
  check_as_set(f, set, 1.0);
  CHECK(contains(f.units, "no units"));
}

TEST_CASE("system files: equal masses need no per-particle array; type 1 alone needs no types") {
  const test::ScratchDir dir("system_equal");
  test::Hdf5SystemOptions o;
  o.units = test::galaxy_units();
  // Two types of one mass, one from MassTable and one from Masses: one mass, types kept.
  TypeSet set = test::make_type_set({0, 4, 3, 0, 0, 0}, {0, 0.75, 0, 0, 0, 0});
  set[2].masses.assign(3, 0.75);
  test::write_hdf5_system(dir.file("two.hdf5"), set, o);
  SystemFile f = read_system_file(dir.file("two.hdf5"), kGalaxy);
  CHECK_FALSE(f.particles.has_individual_masses());
  CHECK(f.particles.mass == 0.75);
  CHECK(f.particles.type == std::vector<std::uint8_t>{1, 1, 1, 1, 2, 2, 2});
  // Type 1 alone with equal Masses: as the built-in ICs are, one mass and no types.
  set = test::make_type_set({0, 6, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0});
  set[1].masses.assign(6, 1.5);
  test::write_hdf5_system(dir.file("one.hdf5"), set, o);
  f = read_system_file(dir.file("one.hdf5"), kGalaxy);
  CHECK_FALSE(f.particles.has_individual_masses());
  CHECK(f.particles.type.empty());
  CHECK(f.particles.mass == 1.5);
}

TEST_CASE("system files: an HDF5 set of two files is read type by type, each type's files in order") {
  const test::ScratchDir dir("system_set");
  const TypeSet set = mixed();
  // File 0 holds the first part of each type, file 1 the rest (type 3 only there).
  TypeSet a, b;
  const std::array<std::size_t, 6> cut{2, 3, 0, 0, 1, 0};
  for (int t = 0; t < 6; ++t) {
    for (std::size_t k = 0; k < set[t].pos.size(); ++k) {
      test::GadgetBinaryType& to = k < cut[t] ? a[t] : b[t];
      to.pos.push_back(set[t].pos[k]);
      to.vel.push_back(set[t].vel[k]);
      to.ids.push_back(set[t].ids[k]);
      if (!set[t].masses.empty()) to.masses.push_back(set[t].masses[k]);
    }
    a[t].table_mass = b[t].table_mass = set[t].table_mass;
  }
  REQUIRE(a[3].pos.empty());
  const std::array<std::uint32_t, 6> totals{3, 5, 0, 2, 4, 0};
  test::Hdf5SystemOptions o;
  o.units = test::galaxy_units();
  o.num_files = 2;
  o.totals = &totals;
  o.time = 1.0;
  test::write_hdf5_system(dir.file("set.0.hdf5"), a, o);
  test::write_hdf5_system(dir.file("set.1.hdf5"), b, o);
  const SystemFile f = read_system_file(dir.file("set.hdf5"), kGalaxy);
  check_as_set(f, set, 1.0);
  CHECK(f.per_type == TypeCounts{3, 5, 0, 2, 4, 0});
}

TEST_CASE("system files: GADGET binary format 1 and 2, both byte orders, several types and a MASS block") {
  const test::ScratchDir dir("system_binary");
  // Types 0 and 4 in the MASS block (massarr 0), 1 and 5 from massarr.
  const TypeSet set = test::make_type_set({3, 4, 0, 0, 2, 3}, {0, 2.0, 0, 0, 0, 0.375});
  test::GadgetBinaryHeaderValues h;
  h.time = 0.75;
  h.box = 0;
  for (int format : {1, 2})
    for (bool swap : {false, true})
      for (bool wide : {false, true}) {
        CAPTURE(format);
        CAPTURE(swap);
        CAPTURE(wide);
        test::GadgetBinaryLayout o;
        o.format = format;
        o.swap = swap;
        o.double_pos = wide;
        o.long_ids = wide;
        const std::string path = dir.file("ics_" + std::to_string(format) + (swap ? "s" : "n") + (wide ? "w" : "f"));
        test::write_gadget_binary_types(path, set, h, o);
        const SystemFile f = read_system_file(path, kGalaxy);   // binary: in the run's units
        check_as_set(f, set, 1.0, !wide);
        CHECK(f.time == 0.75);
        CHECK(f.particles.masses.size() == 12);
        CHECK(contains(f.units, "carries no units"));
        // A set of two: the first file types 0 and 1, the second 4 and 5.
        TypeSet first = set, second = set;
        for (int t : {4, 5}) first[t] = test::GadgetBinaryType{{}, {}, {}, set[t].table_mass, {}};
        for (int t : {0, 1}) second[t] = test::GadgetBinaryType{{}, {}, {}, set[t].table_mass, {}};
        const std::array<std::uint32_t, 6> totals{3, 4, 0, 0, 2, 3};
        o.num_files = 2;
        test::write_gadget_binary_types(path + "_set.0", first, h, o, &totals);
        test::write_gadget_binary_types(path + "_set.1", second, h, o, &totals);
        check_as_set(read_system_file(path + "_set", kGalaxy), set, 1.0, !wide);
      }
}

TEST_CASE("system files: bad input is refused with the file and the problem named") {
  const test::ScratchDir dir("system_bad");
  test::Hdf5SystemOptions o;
  o.units = test::galaxy_units();
  const auto hdf5 = [&](const std::string& name, const TypeSet& set) {
    test::write_hdf5_system(dir.file(name), set, o);
    return dir.file(name);
  };
  const auto check = [&](const std::string& path, const std::string& problem, const PhysicalUnits& units = kGalaxy) {
    const std::string e = error_of(path, units);
    CAPTURE(e);
    CHECK(contains(e, path));
    CHECK(contains(e, problem));
  };
  // No masses: MassTable 0 and no Masses dataset; massarr 0 and no MASS block.
  TypeSet set = mixed();
  set[0].masses.clear();
  check(hdf5("no_masses.hdf5", set), "no masses for its 3 particles of type 0: MassTable[0] is 0 and there is no "
                                     "/PartType0/Masses dataset");
  test::GadgetBinaryLayout layout;
  layout.drop_mass_block = true;
  test::write_gadget_binary_types(dir.file("no_mass_block"), mixed(), test::GadgetBinaryHeaderValues{}, layout);
  check(dir.file("no_mass_block"), "no masses: the header's mass table (massarr) is 0 for 5 particles (3 of type 0, "
                                   "2 of type 3)");
  // Masses zero, negative, not finite.
  for (double bad : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    set = mixed();
    set[3].masses[1] = bad;
    check(hdf5("bad_mass.hdf5", set), "particle 1 of type 3 (ID 302)");
    check(dir.file("bad_mass.hdf5"), "masses must be positive and finite");
  }
  set = mixed();
  set[1].table_mass = -2;
  check(hdf5("bad_table.hdf5", set), "in MassTable[1]: masses must be positive and finite");
  // A position or a velocity not finite.
  set = mixed();
  set[4].pos[2].y = std::numeric_limits<double>::quiet_NaN();
  check(hdf5("nan_position.hdf5", set), "particle 2 of type 4 (ID 403) of");
  check(dir.file("nan_position.hdf5"), "has position nan in /PartType4/Coordinates");
  set = mixed();
  set[1].vel[0].z = std::numeric_limits<double>::infinity();
  check(hdf5("inf_velocity.hdf5", set), "has velocity inf in /PartType1/Velocities");
  // Two particles with one ID, and two at one position.
  set = mixed();
  set[4].ids[3] = set[0].ids[1];
  check(hdf5("duplicate_id.hdf5", set), "duplicate particle ID 2: particle 1 of type 0 (ID 2)");
  check(dir.file("duplicate_id.hdf5"), "particle 3 of type 4 (ID 2)");
  set = mixed();
  set[3].pos[0] = set[1].pos[4];
  check(hdf5("overlap.hdf5", set), "overlapping particles: particle 4 of type 1 (ID 105)");
  check(dir.file("overlap.hdf5"), "particle 0 of type 3 (ID 301)");
  // A comoving run's file; counts that do not add up; units of the other system.
  o.comoving = true;
  check(hdf5("comoving.hdf5", mixed()), "ComovingIntegrationOn = 1");
  o.comoving = false;
  const std::array<std::uint32_t, 6> wrong{3, 6, 0, 2, 4, 0};
  o.totals = &wrong;
  check(hdf5("totals.hdf5", mixed()), "hold 5 particles of type 1, but the header's total (NumPart_Total) says 6");
  o.totals = nullptr;
  check(hdf5("physical.hdf5", mixed()), "physical units", kNbody);
  check(dir.file("physical.hdf5"), "set [units] system = \"galaxy\"", kNbody);
  o.units.cgs = {1, 1, 1};
  check(hdf5("nbody.hdf5", mixed()), "N-body units");
  check(dir.file("nbody.hdf5"), "set [units] system = \"nbody\"");
  CHECK(read_system_file(dir.file("nbody.hdf5"), kNbody).particles.size() == 14);
  o.units = test::galaxy_units();
  check(hdf5("empty.hdf5", TypeSet{}), "holds no particles");
}

TEST_CASE("system files: the cosmological reader refuses several types and unequal masses, saying what it needs") {
  const test::ScratchDir dir("system_cosmological");
  test::Hdf5SystemOptions o;
  o.box = 100;
  o.time = 0.5;
  test::write_hdf5_system(dir.file("types.hdf5"), mixed(), o);
  CHECK_THROWS_WITH_AS(read_snapshot(dir.file("types.hdf5")),
                       doctest::Contains("holds 3 particles of type 0: a cosmological run takes dark matter of one "
                                         "mass only (PartType1); files of several particle types are read by "
                                         "isolated-system runs"), Error);
  test::write_hdf5_system(dir.file("masses.hdf5"), test::make_type_set({0, 4, 0, 0, 0, 0}, {}), o);
  CHECK_THROWS_WITH_AS(read_snapshot(dir.file("masses.hdf5")),
                       doctest::Contains("have different masses (0.5 to 1.25); a cosmological run needs one particle "
                                         "mass"), Error);
  test::write_gadget_binary_types(dir.file("types_binary"), mixed(), test::GadgetBinaryHeaderValues{},
                                  test::GadgetBinaryLayout{});
  CHECK_THROWS_WITH_AS(read_snapshot(dir.file("types_binary")), doctest::Contains("particles of type 0"), Error);
}
