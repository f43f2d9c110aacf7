// Halo catalogues: HDF5 round trip of every column, the mass-function text against counts
// made here, and `orbis fof SNAPSHOT` against the in-process catalogue of the same particles.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <unistd.h>

#include "analysis/halo_catalogue.hpp"
#include "core/error.hpp"
#include "core/params.hpp"
#include "io/hdf5_file.hpp"
#include "io/snapshot.hpp"
#include "support/fof_samples.hpp"

using namespace orbis;
namespace fs = std::filesystem;

namespace {

const char* kToml = R"(
[box]
size_mpc_h = 20.0
particles_per_side = 18
[cosmology]
omega_m = 0.28
omega_lambda = 0.72
h = 0.7
[analysis]
fof_min_members = 20
)";

constexpr double kBox = 20.0;

Particles clustered(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Vec3d> pos;
  testing::add_uniform(pos, 3000, kBox, rng);
  testing::add_plummer(pos, 1500, {3.0, 4.0, 5.0}, 0.2, 2.0, kBox, rng);
  testing::add_plummer(pos, 600, {19.9, 0.1, 10.0}, 0.15, 1.5, kBox, rng);   // wraps
  testing::add_plummer(pos, 300, {12.0, 15.0, 8.0}, 0.1, 1.0, kBox, rng);
  testing::add_plummer(pos, 100, {8.0, 8.0, 18.0}, 0.05, 0.5, kBox, rng);
  Particles p = testing::make_particles(pos, 0.8, rng);
  std::normal_distribution<double> gauss(0.0, 200.0);
  for (auto& m : p.mom) m = Vec3d{gauss(rng), gauss(rng), gauss(rng)};
  return p;
}

fs::path scratch_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("orbis_test_catalogue_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

void check_same(const GroupCatalogue& a, const GroupCatalogue& b, double velocity_tolerance) {
  REQUIRE(a.size() == b.size());
  CHECK(a.box_mpc_h == b.box_mpc_h);
  CHECK(a.a == b.a);
  CHECK(a.omega_m == b.omega_m);
  CHECK(a.omega_lambda == b.omega_lambda);
  CHECK(a.h == b.h);
  CHECK(a.particle_mass == b.particle_mass);
  CHECK(a.num_particles == b.num_particles);
  CHECK(a.linking_length_mpc_h == b.linking_length_mpc_h);
  CHECK(a.linking_length_over_spacing == b.linking_length_over_spacing);
  CHECK(a.min_members == b.min_members);
  CHECK(a.softening_mpc_h == b.softening_mpc_h);
  CHECK(a.len == b.len);
  CHECK(a.offset == b.offset);
  CHECK(a.ids == b.ids);
  CHECK(a.mass == b.mass);
  CHECK(a.min_pot_id == b.min_pot_id);
  CHECK(a.m_crit200 == b.m_crit200);
  CHECK(a.r_crit200 == b.r_crit200);
  CHECK(a.m_mean200 == b.m_mean200);
  CHECK(a.r_mean200 == b.r_mean200);
  for (std::size_t g = 0; g < a.size(); ++g) {
    CAPTURE(g);
    for (int d = 0; d < 3; ++d) {
      CHECK(a.pos[g][d] == b.pos[g][d]);
      CHECK(a.cm[g][d] == b.cm[g][d]);
      CHECK(a.vel_pec[g][d] == doctest::Approx(b.vel_pec[g][d]).epsilon(velocity_tolerance));
    }
    CHECK(a.vel_disp[g] == doctest::Approx(b.vel_disp[g]).epsilon(velocity_tolerance));
  }
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("catalogue: HDF5 round trip, GADGET-4 names and the mass-function text") {
  const Params params = Params::parse(kToml, "test.toml");
  const Particles p = clustered(41);
  const double a = 0.5;
  const GroupCatalogue cat = halo::find_haloes(p, kBox, a, params);
  REQUIRE(cat.size() >= 4);
  CHECK(cat.linking_length_over_spacing == 0.2);
  CHECK(cat.min_members == 20);

  const fs::path dir = scratch_dir("roundtrip");
  const std::string path = (dir / halo::catalogue_file_name(7)).string();
  CHECK(fs::path(path).filename() == "fof_tab_007.hdf5");
  halo::write_halo_outputs(path, cat, params);
  check_same(read_catalogue(path), cat, 1e-14);

  // What GADGET-4 readers look for, and GADGET-4's GroupVel = a v_pec.
  H5Reader r(path);
  CHECK(r.attribute<std::int64_t>("/Header", "Ngroups_Total") == static_cast<std::int64_t>(cat.size()));
  CHECK(r.attribute<std::int64_t>("/Header", "Nids_Total") == static_cast<std::int64_t>(cat.ids.size()));
  CHECK(r.attribute<double>("/Header", "Redshift") == doctest::Approx(1.0));
  CHECK(r.shape("/Group/GroupPos") == std::vector<std::size_t>{cat.size(), 3});
  CHECK(r.shape("/Group/GroupLenType") == std::vector<std::size_t>{cat.size(), 6});
  const auto vel = r.read<double>("/Group/GroupVel");
  for (std::size_t g = 0; g < cat.size(); ++g)
    for (int d = 0; d < 3; ++d) CHECK(vel[3 * g + d] == doctest::Approx(a * cat.vel_pec[g][d]).epsilon(1e-14));
  CHECK(r.attribute<double>("/Group/GroupVel", "a_scaling") == -1.0);   // v_pec = GroupVel / a
  // yt's gadget_fof reader needs the GADGET-3 subhalo counts and a /Subhalo group.
  CHECK(r.attribute<std::int64_t>("/Header", "Nsubgroups_ThisFile") == 0);
  CHECK(r.attribute<std::int64_t>("/Header", "Nsubgroups_Total") == 0);
  CHECK(r.has("/Subhalo"));
  CHECK(r.attribute<double>("/Parameters", "UnitLength_in_cm") == doctest::Approx(3.0857e24).epsilon(1e-4));
  CHECK(r.attribute<double>("/Parameters", "HubbleParam") == 0.7);
  CHECK(r.attribute<double>("/Parameters", "Omega0") == 0.28);
  CHECK(r.attribute<double>("/Parameters", "OmegaLambda") == 0.72);
  CHECK(r.attribute<double>("/Parameters", "BoxSize") == kBox);
  CHECK(r.has("/Parameters"));
  CHECK(r.has("/Config"));

  // Older orbis catalogues stored GroupVel as u = v_pec / sqrt(a) (a_scaling 0.5): the reader
  // follows the file's a_scaling. The old file is made from the new one by h5py.
  const std::string old_path = (dir / "old_convention.hdf5").string();
  fs::copy_file(path, old_path);
  const std::string rewrite = std::string(ORBIS_PYTHON) +
      " -c \"import h5py, sys; f = h5py.File(sys.argv[1], 'a'); v = f['Group/GroupVel']; "
      "a = f['Header'].attrs['Time']; v[...] = v[...] / a**1.5; v.attrs['a_scaling'] = 0.5\" " + old_path;
  REQUIRE_MESSAGE(std::system(rewrite.c_str()) == 0, "needs python3 with h5py: " << rewrite);
  check_same(read_catalogue(old_path), cat, 1e-14);
  // Every member ID appears once, and the IDs of a group are those of its members.
  std::vector<std::uint64_t> all = cat.ids;
  std::sort(all.begin(), all.end());
  CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());

  // Mass function: parse the text and compare with counts made here from the catalogue.
  const std::string text = slurp(halo::mass_function_path(path));
  CHECK(fs::path(halo::mass_function_path(path)).filename() == "fof_tab_007_massfn.txt");
  std::istringstream in(text);
  std::string line;
  std::size_t rows = 0, total_fof = 0;
  const double volume = kBox * kBox * kBox;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream row(line);
    double lo, hi, mid, dn, err, dn2, err2;
    long n_fof, n_200m;
    row >> lo >> hi >> mid >> n_fof >> dn >> err >> n_200m >> dn2 >> err2;
    REQUIRE(row);
    long expect_fof = 0, expect_200m = 0;
    for (std::size_t g = 0; g < cat.size(); ++g) {
      const double lf = std::log10(cat.mass[g] * 1e10), lm = std::log10(cat.m_mean200[g] * 1e10);
      expect_fof += lf >= lo - 1e-9 && lf < hi - 1e-9;
      expect_200m += cat.m_mean200[g] > 0 && lm >= lo - 1e-9 && lm < hi - 1e-9;
    }
    CAPTURE(lo);
    CHECK(n_fof == expect_fof);
    CHECK(n_200m == expect_200m);
    CHECK(dn == doctest::Approx(n_fof / (volume * (hi - lo))).epsilon(1e-5));
    CHECK(err == doctest::Approx(std::sqrt(static_cast<double>(n_fof)) / (volume * (hi - lo))).epsilon(1e-5));
    total_fof += n_fof;
    ++rows;
  }
  CHECK(rows >= 2);
  CHECK(total_fof == cat.size());
  fs::remove_all(dir);
}

TEST_CASE("catalogue: an empty catalogue round-trips and has an empty mass function") {
  const Params params = Params::parse(kToml, "test.toml", {"analysis.fof_min_members=100000"});
  const Particles p = clustered(44);
  const GroupCatalogue cat = halo::find_haloes(p, kBox, 1.0, params);
  CHECK(cat.size() == 0);
  const fs::path dir = scratch_dir("empty");
  const std::string path = (dir / "empty.hdf5").string();
  halo::write_halo_outputs(path, cat, params);
  const GroupCatalogue back = read_catalogue(path);
  CHECK(back.size() == 0);
  CHECK(back.ids.empty());
  CHECK(back.num_particles == p.size());
  const std::string text = slurp(halo::mass_function_path(path));
  CHECK(text.find("0 groups") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("catalogue: `orbis fof SNAPSHOT` equals the in-process catalogue of the same particles") {
  const Params params = Params::parse(kToml, "test.toml");
  const Particles p = clustered(42);
  const double a = 0.8;
  const fs::path dir = scratch_dir("cli");
  const std::string snapshot = (dir / "snapshot_004.hdf5").string();
  write_snapshot(snapshot, p, a, params);
  const std::string command = std::string(ORBIS_BINARY) + " fof " + snapshot + " > " + (dir / "log.txt").string() + " 2>&1";
  REQUIRE(std::system(command.c_str()) == 0);
  const std::string out = (dir / "fof_tab_004.hdf5").string();   // the default name
  REQUIRE(fs::exists(out));
  REQUIRE(fs::exists(dir / "fof_tab_004_massfn.txt"));
  // Velocities pass through the snapshot's u = p / a^(3/2): equal to rounding.
  check_same(read_catalogue(out), halo::find_haloes(p, kBox, a, params), 1e-12);

  // Options reach the finder: a longer linking length and another minimum.
  const std::string out2 = (dir / "b03.hdf5").string();
  const std::string command2 = std::string(ORBIS_BINARY) + " fof " + snapshot +
                               " --linking-length 0.3 --min-members 40 --out " + out2 + " > /dev/null 2>&1";
  REQUIRE(std::system(command2.c_str()) == 0);
  Params params2 = Params::parse(kToml, "test.toml", {"analysis.fof_linking_length=0.3", "analysis.fof_min_members=40"});
  check_same(read_catalogue(out2), halo::find_haloes(p, kBox, a, params2), 1e-12);
  fs::remove_all(dir);
}

TEST_CASE("catalogue: a snapshot without cosmology is refused with the options to pass it") {
  // A minimal foreign snapshot: GADGET layout, no Omega0 / OmegaLambda / HubbleParam.
  const Particles p = clustered(43);
  const fs::path dir = scratch_dir("foreign");
  const std::string snapshot = (dir / "ics.hdf5").string();
  {
    H5Writer f(snapshot);
    f.create_group("/Header");
    f.attribute("/Header", "BoxSize", kBox);
    f.attribute("/Header", "Time", 1.0);
    const std::vector<std::uint64_t> counts{0, p.size(), 0, 0, 0, 0};
    f.attribute("/Header", "NumPart_ThisFile", counts);
    f.attribute("/Header", "NumPart_Total", counts);
    f.attribute("/Header", "MassTable", std::vector<double>{0, p.mass, 0, 0, 0, 0});
    f.create_group("/PartType1");
    std::vector<float> x(3 * p.size()), v(3 * p.size(), 0.0f);
    for (std::size_t i = 0; i < p.size(); ++i)
      for (int d = 0; d < 3; ++d) x[3 * i + d] = static_cast<float>(p.pos[i][d]);
    f.write("/PartType1/Coordinates", x.data(), p.size(), 3);
    f.write("/PartType1/Velocities", v.data(), p.size(), 3);
    std::vector<std::uint32_t> ids(p.id.begin(), p.id.end());
    f.write("/PartType1/ParticleIDs", ids);
    // GADGET-4's softening, in the unit of its BoxSize (here kpc/h): 50 kpc/h.
    f.create_group("/Parameters");
    f.attribute("/Parameters", "BoxSize", 1000.0 * kBox);
    f.attribute("/Parameters", "SofteningComovingClass0", 50.0);
    f.commit();
  }
  const std::string log = (dir / "log.txt").string();
  const std::string base = std::string(ORBIS_BINARY) + " fof " + snapshot;
  CHECK(std::system((base + " > " + log + " 2>&1").c_str()) != 0);
  const std::string message = slurp(log);
  CHECK(message.find("--set cosmology.omega_m=") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "fof_tab_ics.hdf5"));
  const std::string set = " --set cosmology.omega_m=0.3 --set cosmology.omega_lambda=0.7 --set cosmology.h=0.7";
  REQUIRE(std::system((base + set + " > " + log + " 2>&1").c_str()) == 0);
  const GroupCatalogue cat = read_catalogue((dir / "fof_tab_ics.hdf5").string());
  CHECK(cat.omega_m == 0.3);
  CHECK(cat.size() >= 4);
  CHECK(cat.softening_mpc_h == doctest::Approx(0.05).epsilon(1e-12));   // GADGET-4's, in Mpc/h
  fs::remove_all(dir);
}

TEST_CASE("catalogue: plot_mass_function.py reads a catalogue and its mass function") {
  const Params params = Params::parse(kToml, "test.toml");
  const GroupCatalogue cat = halo::find_haloes(clustered(45), kBox, 0.5, params);
  const fs::path dir = scratch_dir("plot");
  const std::string path = (dir / "fof_tab_001.hdf5").string();
  halo::write_halo_outputs(path, cat, params);
  const std::string command = std::string(ORBIS_PYTHON) + " " + ORBIS_SOURCE_DIR +
                              "/analysis/python/plot_mass_function.py " + path + " > " +
                              (dir / "log.txt").string() + " 2>&1";
  INFO(slurp(dir / "log.txt"));   // evaluated when a check fails, after the script ran
  CHECK(std::system(command.c_str()) == 0);
  CHECK(fs::exists(dir / "fof_tab_001_massfn.png"));
  fs::remove_all(dir);
}
