// A whole run across ranks against the same run on one rank: built-in ICs (made in shares),
// TreePM steps with ORB domains, ghosts and migration, the snapshot written in shares (three
// files, each from its writer rank's share: io/snapshot.hpp), P(k) and FoF across ranks.
// Rank 0 first runs the reference alone (Comm::self(), one snapshot file), then every rank
// runs the distributed one.
//
// With every pair inside r_cut summed directly and double precision throughout, the runs
// differ only in the order of the sums: particle positions at the end agree to 1e-9 Mpc/h,
// every P(k) bin to 1e-9, and the halo catalogues (GroupLen and member IDs) are identical.
// The run starts late (z_init = 1) so that haloes form in a few steps.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "core/comm.hpp"
#include "core/params.hpp"
#include "integrate/simulation.hpp"
#include "io/catalogue.hpp"
#include "io/hdf5_file.hpp"
#include "io/snapshot.hpp"
#include "support/mpi_scratch.hpp"
#include "support/text_table.hpp"

using orbis::Comm;

namespace {

orbis::Params run_params(const std::string& directory, int files) {
  return orbis::Params::parse(
      "[box]\nsize_mpc_h = 64.0\nparticles_per_side = 16\n[ic]\nz_init = 1.0\nseed = 4242\n"
      "[gpu]\nbackend = \"cpu\"\np2p_precision = \"double\"\n"
      "[gravity]\nsolver = \"treepm\"\nrs_over_cell = 1.25\nr_cut_over_rs = 4.5\ntheta = 0.02\n"
      "taylor_order = -1\npm_mesh_precision = \"double\"\n"
      "[time]\nz_final = 0.0\noutput_redshifts = [0.0]\nmax_dln_a = 0.1\neta = 0.0\n"
      "[analysis]\nfof_min_members = 8\n[output]\ndirectory = \"" + directory + "\"\nfiles_per_snapshot = " +
          std::to_string(files) + "\n",
      "run_ranks.toml");
}

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The two runs' z = 0 outputs: every P(k) bin to `pk_tolerance` (relative; 0: the text files
// equal and the HDF5 file's P(k) bit for bit), the halo catalogues identical (lengths, member
// IDs and centres, bit for bit).
void check_same_outputs(const std::string& one, const std::string& many, double pk_tolerance) {
  const std::vector<double> pa = orbis::test::power_column(one + "/powerspec_000.txt");
  const std::vector<double> pb = orbis::test::power_column(many + "/powerspec_000.txt");
  REQUIRE(pa.size() == pb.size());
  CHECK(!pa.empty());
  if (pk_tolerance > 0) {
    for (std::size_t i = 0; i < pa.size(); ++i) CHECK(pb[i] == doctest::Approx(pa[i]).epsilon(pk_tolerance));
  } else {
    CHECK(file_text(one + "/powerspec_000.txt") == file_text(many + "/powerspec_000.txt"));
    const orbis::H5Reader a(one + "/powerspec_000.hdf5"), b(many + "/powerspec_000.hdf5");
    const auto ha = a.read<double>("/PowerSpectrum/Power"), hb = b.read<double>("/PowerSpectrum/Power");
    REQUIRE(ha.size() == hb.size());
    CHECK(std::memcmp(ha.data(), hb.data(), ha.size() * sizeof(double)) == 0);
  }
  const orbis::GroupCatalogue ca = orbis::read_catalogue(one + "/fof_tab_000.hdf5");
  const orbis::GroupCatalogue cb = orbis::read_catalogue(many + "/fof_tab_000.hdf5");
  MESSAGE(ca.size() << " haloes");
  CHECK(ca.size() > 0);
  CHECK(ca.len == cb.len);
  CHECK(ca.ids == cb.ids);
  bool same_centres = ca.pos.size() == cb.pos.size();
  for (std::size_t g = 0; same_centres && g < ca.pos.size(); ++g)
    for (int k = 0; k < 3; ++k) same_centres = same_centres && ca.pos[g][k] == cb.pos[g][k];
  CHECK(same_centres);
}

}  // namespace

TEST_CASE("a TreePM run on several ranks ends where the one-rank run ends") {
  const Comm world = Comm::world();
  const orbis::test::SharedScratchDir dir("run_ranks", world);
  const std::string one = dir.file("one"), many = dir.file("many");
  if (world.is_root()) orbis::Simulation(run_params(one, 1), {}, Comm::self()).run();
  world.barrier();
  const int files = 3;   // more files than ranks at np 1 and 2, as many at np 3
  const orbis::RunSummary summary = orbis::Simulation(run_params(many, files), {}, world).run();
  CHECK(summary.steps > 2);
  if (!world.is_root()) return;

  const orbis::Snapshot a = orbis::read_snapshot(one + "/snapshot_000.hdf5");
  const orbis::Snapshot b = orbis::read_snapshot(many + "/snapshot_000");   // finds snapshot_000.0.hdf5
  REQUIRE(a.particles.size() == 16u * 16u * 16u);
  CHECK(b.header.num_files == files);
  // Each file: its third of the particles in ID order, the headers' counts right.
  std::uint64_t next_first = 0;
  const auto names = orbis::snapshot_file_names(many + "/snapshot_000.hdf5", files);
  for (std::uint64_t f = 0; f < names.size(); ++f) {
    const orbis::H5Reader r(names[f]);
    const auto ids = r.read<std::uint64_t>("/PartType1/ParticleIDs");
    const std::uint64_t n = 16 * 16 * 16;
    CHECK(r.attribute_array<std::uint64_t>("/Header", "NumPart_ThisFile") ==
          std::vector<std::uint64_t>{0, ids.size(), 0, 0, 0, 0});
    CHECK(r.attribute_array<std::uint64_t>("/Header", "NumPart_Total") == std::vector<std::uint64_t>{0, n, 0, 0, 0, 0});
    CHECK(r.attribute<std::int32_t>("/Header", "NumFilesPerSnapshot") == files);
    const std::uint64_t parts = files;
    CHECK(ids.size() == n * (f + 1) / parts - n * f / parts);
    // Grid IDs 1..n: the file holding positions [first, first + count) holds IDs first + 1, ...
    bool consecutive = !ids.empty();
    for (std::size_t i = 0; i < ids.size(); ++i) consecutive = consecutive && ids[i] == next_first + 1 + i;
    CHECK(consecutive);
    next_first += ids.size();
  }
  CHECK(next_first == 16u * 16u * 16u);
  REQUIRE(b.particles.size() == a.particles.size());
  CHECK(a.particles.id == b.particles.id);   // both in id order
  double worst = 0;
  for (std::size_t i = 0; i < a.particles.size(); ++i)
    for (int k = 0; k < 3; ++k) {
      const double d = std::abs(a.particles.pos[i][k] - b.particles.pos[i][k]);
      worst = std::max(worst, std::min(d, 64.0 - d));
    }
  MESSAGE(world.size() << " ranks: largest position difference " << worst << " Mpc/h");
  CHECK(worst < 1e-9);

  check_same_outputs(one, many, 1e-9);
}

// The same run with the default TreePM settings (FMM at theta 0.5, tabulated P2P and meshes in
// float, block time steps) is the one-rank run bit for bit: each rank's tree is a forest of
// the one global tree's subtrees, every target's short-range contributions are summed in one
// canonical order, the PM assigns in fixed point and transforms line by line, and the PM
// step's size comes from an exact sum. So positions, velocities and the catalogue are equal,
// not close (any difference would grow chaotically in the haloes), and so are the P(k) files.
// Small top nodes (64 particles: 64 of them) so that 3 ranks hold several each.
TEST_CASE("with the default TreePM settings a run on several ranks is the one-rank run bit for bit") {
  const Comm world = Comm::world();
  const orbis::test::SharedScratchDir dir("run_ranks_bitwise", world);
  const std::string one = dir.file("one"), many = dir.file("many");
  const auto params = [](const std::string& directory) {
    return orbis::Params::parse(
        "[box]\nsize_mpc_h = 64.0\nparticles_per_side = 16\n[ic]\nz_init = 1.0\nseed = 4242\n"
        "[gpu]\nbackend = \"cpu\"\n[gravity]\ntop_node_particles = 64\n"
        "[time]\nz_final = 0.0\noutput_redshifts = [0.0]\n"
        "[analysis]\nfof_min_members = 8\n[output]\ndirectory = \"" + directory + "\"\n",
        "run_ranks_bitwise.toml");
  };
  std::int64_t steps_one = 0;
  if (world.is_root()) steps_one = orbis::Simulation(params(one), {}, Comm::self()).run().steps;
  world.barrier();
  const orbis::RunSummary summary = orbis::Simulation(params(many), {}, world).run();
  if (!world.is_root()) return;
  CHECK(summary.steps == steps_one);
  CHECK(summary.steps > 2);

  const orbis::Snapshot a = orbis::read_snapshot(one + "/snapshot_000.hdf5");
  const orbis::Snapshot b = orbis::read_snapshot(many + "/snapshot_000.hdf5");
  REQUIRE(a.particles.size() == 16u * 16u * 16u);
  REQUIRE(b.particles.size() == a.particles.size());
  CHECK(a.particles.id == b.particles.id);   // both in id order
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.particles.size(); ++i)
    for (int k = 0; k < 3; ++k)
      if (a.particles.pos[i][k] != b.particles.pos[i][k] || a.particles.mom[i][k] != b.particles.mom[i][k]) {
        ++differ;
        break;
      }
  MESSAGE(world.size() << " ranks, " << summary.steps << " steps: " << differ << " particles not bitwise equal");
  CHECK(differ == 0);

  // The P(k) estimator assigns in fixed point, transforms line by line and sums its bins in
  // plane order, so the same particles give the same P(k) files.
  check_same_outputs(one, many, 0.0);
}
