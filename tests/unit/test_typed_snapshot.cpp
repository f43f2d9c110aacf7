// An isolated system's particles of several types and individual masses leave in files and
// come back: the snapshot writer puts each type in its own /PartTypeN (by type, then ID),
// MassTable[t] the type's one mass or 0 with /PartTypeN/Masses (described as the other
// datasets are, for pynbody and yt), in one file or a set; the isolated systems' reader gives
// back the same particles bit for bit. A checkpoint keeps masses and types bit for bit, and a
// particle set of one mass and type 1 is written as it always was. A cosmological run's
// writer refuses such particles.
#include <doctest/doctest.h>

#include <filesystem>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "core/error.hpp"
#include "core/params.hpp"
#include "core/physical_units.hpp"
#include "integrate/checkpoint.hpp"
#include "io/hdf5_file.hpp"
#include "io/snapshot.hpp"
#include "io/system_file.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;

namespace {

const std::string kVacuum =
    "[ic]\nkind = \"plummer\"\nparticles = 16\n"
    "[gravity]\nboundary = \"vacuum\"\nsoftening = 0.05\nsolver = \"direct\"\n"
    "[time]\nt_end = 1.0\nmax_dt = 0.1\n";

// 23 particles in shuffled order: types 4 (5 of mass 0.5), 0 (6, masses 0.1 + 0.01 k), 1 (11
// of mass 2) and 2 (one); IDs sparse and shuffled.
Particles typed_set() {
  Particles p;
  const int types[] = {4, 0, 1, 1, 2, 0, 4, 1, 1, 0, 1, 4, 1, 0, 1, 1, 4, 0, 1, 1, 0, 4, 1};
  for (int k = 0; k < 23; ++k) {
    const double u = k;
    p.pos.push_back({std::sin(u) * 3, std::cos(1.3 * u) * 2, 0.1 * u - 1});
    p.mom.push_back({100 * std::sin(2 * u), -50 * u, 7.0});
    p.id.push_back(1000 + static_cast<std::uint64_t>((k * 7919) % 23) * 37);
    p.type.push_back(static_cast<std::uint8_t>(types[k]));
    p.masses.push_back(types[k] == 4 ? 0.5 : types[k] == 1 ? 2.0 : types[k] == 2 ? 7.25 : 0.1 + 0.01 * u);
  }
  p.time_bin.assign(23, 0);
  double sum = 0;
  for (double m : p.masses) sum += m;
  p.mass = sum / 23;
  return p;
}

// The set as the reader gives it: by type, then ID.
std::vector<std::size_t> type_id_order(const Particles& p) {
  std::vector<std::size_t> order(p.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return p.type_of(a) != p.type_of(b) ? p.type_of(a) < p.type_of(b) : p.id[a] < p.id[b];
  });
  return order;
}

void check_same(const Particles& read, const Particles& written) {
  const std::vector<std::size_t> order = type_id_order(written);
  REQUIRE(read.size() == written.size());
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::size_t i = order[k];
    CAPTURE(k);
    CHECK(read.id[k] == written.id[i]);
    CHECK(read.type_of(k) == written.type_of(i));
    CHECK(read.mass_of(k) == written.mass_of(i));
    for (int d = 0; d < 3; ++d) {
      CHECK(read.pos[k][d] == written.pos[i][d]);
      CHECK(read.mom[k][d] == written.mom[i][d]);
    }
  }
}

}  // namespace

TEST_CASE("typed snapshots: each type its own group, MassTable or Masses, read back bit for bit") {
  const test::ScratchDir dir("typed_snapshot");
  const Params params = Params::parse(kVacuum, "iso.toml");
  const Particles p = typed_set();
  std::vector<Vec3d> acc(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) acc[i] = {static_cast<double>(p.id[i]), 0, 1};
  const std::string path = dir.file("snapshot.hdf5");
  write_snapshot(path, p, 0.625, params, {&acc});

  H5Reader r(path);
  CHECK(r.attribute_array<std::uint64_t>("/Header", "NumPart_ThisFile") == std::vector<std::uint64_t>{6, 11, 1, 0, 5, 0});
  CHECK(r.attribute_array<std::uint64_t>("/Header", "NumPart_Total") == std::vector<std::uint64_t>{6, 11, 1, 0, 5, 0});
  CHECK(r.attribute_array<double>("/Header", "MassTable") == std::vector<double>{0, 2.0, 7.25, 0, 0.5, 0});
  CHECK(r.attribute<double>("/Header", "Time") == 0.625);
  CHECK_FALSE(r.has("/PartType3"));
  CHECK_FALSE(r.has("/PartType1/Masses"));
  REQUIRE(r.has("/PartType0/Masses"));
  CHECK(r.read<double>("/PartType0/Masses").size() == 6);
  // The Masses dataset described as the others are (GADGET-4's attributes: pynbody, yt).
  CHECK(r.attribute<double>("/PartType0/Masses", "to_cgs") == physical_units("galaxy").mass_in_g);
  CHECK(r.attribute<double>("/PartType0/Masses", "mass_scaling") == 1.0);
  CHECK(r.attribute<double>("/PartType0/Masses", "length_scaling") == 0.0);
  CHECK(r.attribute_string("/PartType0/Masses", "Description").find("1e10 Msun") != std::string::npos);
  CHECK(r.attribute<double>("/PartType4/Coordinates", "to_cgs") == kKpcInCm);
  // IDs ascending within a type; the accelerations beside their particles.
  const std::vector<std::uint64_t> ids = r.read<std::uint64_t>("/PartType1/ParticleIDs");
  CHECK(std::is_sorted(ids.begin(), ids.end()));
  const std::vector<double> a1 = r.read<double>("/PartType1/Acceleration");
  for (std::size_t k = 0; k < ids.size(); ++k) CHECK(a1[3 * k] == static_cast<double>(ids[k]));

  const SystemFile back = read_system_file(path, physical_units("galaxy"));
  check_same(back.particles, p);
  CHECK(back.time == 0.625);
  CHECK(back.particles.mass == doctest::Approx(p.mass).epsilon(1e-15));

  // Two files: each type cut in two, file f holding share f of every type; read back the same.
  const Params two = Params::parse(kVacuum, "iso.toml", {"output.files_per_snapshot=2"});
  const std::vector<std::string> names = write_snapshot(dir.file("set.hdf5"), p, 0.625, two);
  REQUIRE(names.size() == 2);
  CHECK(H5Reader(names[0]).attribute_array<std::uint64_t>("/Header", "NumPart_ThisFile") ==
        std::vector<std::uint64_t>{3, 5, 0, 0, 2, 0});
  CHECK(H5Reader(names[1]).attribute_array<std::uint64_t>("/Header", "NumPart_ThisFile") ==
        std::vector<std::uint64_t>{3, 6, 1, 0, 3, 0});
  check_same(read_system_file(dir.file("set.hdf5"), physical_units("galaxy")).particles, p);

  // Individual masses of type 1 alone (an unequal merger): PartType1 with Masses.
  Particles merger = p;
  merger.type.clear();
  write_snapshot(dir.file("merger.hdf5"), merger, 0.0, params);
  H5Reader m(dir.file("merger.hdf5"));
  CHECK(m.attribute_array<double>("/Header", "MassTable")[1] == 0.0);
  CHECK(m.read<double>("/PartType1/Masses").size() == 23);
  check_same(read_system_file(dir.file("merger.hdf5"), physical_units("galaxy")).particles, merger);

  // One mass, type 1: the layout of every snapshot before types (MassTable, no Masses), and so
  // read back as one mass again.
  Particles plain = p;
  plain.type.clear();
  plain.masses.clear();
  plain.mass = 0.75;
  write_snapshot(dir.file("plain.hdf5"), plain, 0.0, params);
  H5Reader q(dir.file("plain.hdf5"));
  CHECK(q.attribute_array<double>("/Header", "MassTable") == std::vector<double>{0, 0.75, 0, 0, 0, 0});
  CHECK_FALSE(q.has("/PartType1/Masses"));
  const SystemFile plain_back = read_system_file(dir.file("plain.hdf5"), physical_units("galaxy"));
  CHECK_FALSE(plain_back.particles.has_individual_masses());
  CHECK(plain_back.particles.type.empty());
  CHECK(plain_back.particles.mass == 0.75);
}

TEST_CASE("typed snapshots: a cosmological run's writer refuses types and individual masses") {
  const test::ScratchDir dir("typed_refused");
  const Params box = Params::parse("[box]\nsize_mpc_h = 50.0\nparticles_per_side = 4\n", "box.toml");
  CHECK_THROWS_WITH_AS(write_snapshot(dir.file("x.hdf5"), typed_set(), 0.5, box),
                       doctest::Contains("which only an isolated system's snapshot holds"), Error);
  // Nor does it take potentials (an isolated system's direct sum), and it writes nothing.
  Particles plain = typed_set();
  plain.type.clear();
  plain.masses.clear();
  const std::vector<double> phi(plain.size(), -1.0);
  CHECK_THROWS_WITH_AS(write_snapshot(dir.file("y.hdf5"), plain, 0.5, box, {nullptr, &phi}),
                       doctest::Contains("particle potentials are an isolated system's"), Error);
  CHECK_FALSE(std::filesystem::exists(dir.file("y.hdf5")));
}

TEST_CASE("checkpoints keep individual masses and types bit for bit") {
  const test::ScratchDir dir("typed_checkpoint");
  const Params params = Params::parse(kVacuum, "iso.toml");
  const Particles p = typed_set();
  RunState state;
  state.a = 0.25;
  state.steps = 3;
  const std::string path = write_checkpoint(dir.path(), p, state, MeasuredCosts{}, params);
  const Checkpoint c = read_checkpoint(path);
  CHECK(c.particles.masses == p.masses);   // bit for bit
  CHECK(c.particles.type == p.type);
  CHECK(c.particles.mass == p.mass);
  CHECK(c.particles.id == p.id);
  // One mass and one type: nothing per particle, as before.
  Particles plain = p;
  plain.masses.clear();
  plain.type.clear();
  state.steps = 4;
  const Checkpoint d = read_checkpoint(write_checkpoint(dir.path(), plain, state, MeasuredCosts{}, params));
  CHECK_FALSE(d.particles.has_individual_masses());
  CHECK(d.particles.type.empty());
  CHECK(d.particles.mass == p.mass);
}
