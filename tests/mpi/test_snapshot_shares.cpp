// Snapshots written in shares over ranks (io/snapshot.hpp): no rank gathers the particles,
// and the files are those one rank writes from the whole set, byte for byte, with fewer files
// than ranks (every rank's share in one file) or more (a share across several files). The
// particles are spread over the ranks in no particular order (sparse IDs, shuffled, the last
// rank of several holding none), like a run's domains; the reference is the same set written
// by rank 0 alone.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <random>
#include <string>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/params.hpp"
#include "io/hdf5_file.hpp"
#include "io/id_order.hpp"
#include "io/snapshot.hpp"
#include "support/mpi_scratch.hpp"

using orbis::Comm;

namespace {

constexpr double kBox = 50.0;

// n particles with unique IDs in shuffled order, sparse or dense (5 .. n + 4: the writer then
// places particles by ID, sorting nothing); positions, momenta and accelerations follow from
// the ID, so every rank can make the whole set.
struct TestSet {
  orbis::Particles p;
  std::vector<orbis::Vec3d> acc;
};

TestSet make_set(std::size_t n, bool dense = false) {
  TestSet s;
  s.p.mass = 0.75;
  s.p.resize(n);
  s.acc.resize(n);
  std::vector<std::uint64_t> ids(n);
  for (std::size_t k = 0; k < n; ++k)
    ids[k] = dense ? 5 + k : 17 + 1000003 * static_cast<std::uint64_t>(k) + (k * k) % 13;
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(4711));
  for (std::size_t k = 0; k < n; ++k) {
    const double u = static_cast<double>(ids[k] % 104729) / 104729.0;
    s.p.id[k] = ids[k];
    s.p.pos[k] = {kBox * u, kBox * std::fmod(3.7 * u + 0.1, 1.0), kBox * std::fmod(11.3 * u + 0.5, 1.0)};
    s.p.mom[k] = {100 * u - 50, 3.0 * u, -7.0 * u};
    s.acc[k] = {u, -u, 2 * u};
  }
  return s;
}

// This rank's part of the set: particle k on rank (k * 7919) mod P', P' = P - 1 on several
// ranks (the last rank holds none), kept in the set's shuffled order.
TestSet my_part(const TestSet& all, const Comm& comm) {
  const int holders = comm.size() > 1 ? comm.size() - 1 : 1;
  TestSet s;
  s.p.mass = all.p.mass;
  for (std::size_t k = 0; k < all.p.size(); ++k) {
    if (static_cast<int>((k * 7919) % static_cast<std::size_t>(holders)) != comm.rank()) continue;
    s.p.pos.push_back(all.p.pos[k]);
    s.p.mom.push_back(all.p.mom[k]);
    s.p.id.push_back(all.p.id[k]);
    s.acc.push_back(all.acc[k]);
  }
  s.p.time_bin.resize(s.p.size());
  return s;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

orbis::Params params_with(int files) {
  return orbis::Params::parse("[box]\nsize_mpc_h = 50.0\nparticles_per_side = 10\n[output]\nfiles_per_snapshot = " +
                                  std::to_string(files) + "\n",
                              "shares.toml");
}

}  // namespace

TEST_CASE("id_order_cuts: each rank's share of every position in the global ID order") {
  const Comm world = Comm::world();
  const TestSet all = make_set(997);
  const TestSet mine = my_part(all, world);
  std::vector<std::uint64_t> sorted = mine.p.id;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::uint64_t> everyone = all.p.id;
  std::sort(everyone.begin(), everyone.end());
  const std::vector<std::uint64_t> positions{0, 0, 1, 2, 331, 500, 996, 997, 997};
  const std::vector<std::size_t> cuts = orbis::id_order_cuts(sorted, positions, world);
  REQUIRE(cuts.size() == positions.size());
  for (std::size_t f = 0; f < positions.size(); ++f) {
    INFO("position " << positions[f] << ", rank " << world.rank() << " of " << world.size());
    // Brute force: this rank's IDs below the ID at that position of the whole sorted set.
    const std::size_t expected =
        positions[f] == everyone.size()
            ? sorted.size()
            : static_cast<std::size_t>(std::lower_bound(sorted.begin(), sorted.end(), everyone[positions[f]]) -
                                       sorted.begin());
    CHECK(cuts[f] == expected);
    CHECK(world.sum(static_cast<std::uint64_t>(cuts[f])) == positions[f]);
  }
  CHECK(orbis::id_sort_order(sorted).empty());
  const std::vector<std::size_t> order = orbis::id_sort_order(mine.p.id);
  CHECK((mine.p.size() < 2 || !order.empty()));   // shuffled: a permutation is needed
  for (std::size_t k = 0; k + 1 < order.size(); ++k) CHECK(mine.p.id[order[k]] < mine.p.id[order[k + 1]]);
}

TEST_CASE("a snapshot written over ranks is the one-rank snapshot, file by file, in ID order") {
  const Comm world = Comm::world();
  const orbis::test::SharedScratchDir dir("snapshot_shares", world);
  // Fewer files than ranks (several shares in a file) and at least as many; 10
  // particles in 16 files: six files are empty; 2 particles: a rank's share of the ID order
  // is empty at np 3. Sparse IDs (sorted and merged by the writers) and dense ones (placed).
  for (bool dense : {false, true})
  for (auto [n, files] : {std::pair{997, 1}, {997, 2}, {997, 3}, {997, 4}, {997, 7}, {10, 16}, {2, 1}, {5, 2}}) {
    INFO(n << " particles in " << files << " files, " << world.size() << " ranks, " << (dense ? "dense" : "sparse")
           << " IDs");
    const TestSet all = make_set(static_cast<std::size_t>(n), dense);
    const TestSet mine = my_part(all, world);
    const orbis::Params params = params_with(files);
    const std::string tag = std::to_string(n) + "_" + std::to_string(files) + (dense ? "_dense" : "_sparse");
    const std::string ref = dir.file("one_" + tag + ".hdf5"), many = dir.file("many_" + tag + ".hdf5");
    if (world.is_root()) orbis::write_snapshot(ref, all.p, 0.5, params, {&all.acc}, Comm::self());
    const std::vector<std::string> names = orbis::write_snapshot(many, mine.p, 0.5, params, {&mine.acc}, world);
    CHECK(names == orbis::snapshot_file_names(many, files));
    if (!world.is_root()) continue;

    std::vector<std::uint64_t> ids_sorted = all.p.id;
    std::sort(ids_sorted.begin(), ids_sorted.end());
    const std::vector<std::string> ref_names = orbis::snapshot_file_names(ref, files);
    std::vector<std::uint64_t> concatenated;
    for (int f = 0; f < files; ++f) {
      INFO("file " << f);
      const orbis::H5Reader a(ref_names[f]), b(names[f]);
      const std::uint64_t share = static_cast<std::uint64_t>(n) * (f + 1) / files - static_cast<std::uint64_t>(n) * f / files;
      CHECK(b.attribute_array<std::uint64_t>("/Header", "NumPart_ThisFile") ==
            std::vector<std::uint64_t>{0, share, 0, 0, 0, 0});
      CHECK(b.attribute_array<std::uint64_t>("/Header", "NumPart_Total") ==
            std::vector<std::uint64_t>{0, static_cast<std::uint64_t>(n), 0, 0, 0, 0});
      CHECK(b.attribute<std::int32_t>("/Header", "NumFilesPerSnapshot") == files);
      CHECK(b.attribute_array<double>("/Header", "MassTable") == std::vector<double>{0, 0.75, 0, 0, 0, 0});
      // Bitwise the one-rank file's datasets.
      for (const char* set : {"/PartType1/Coordinates", "/PartType1/Velocities", "/PartType1/Acceleration"})
        CHECK(a.read<double>(set) == b.read<double>(set));
      const auto ids = b.read<std::uint64_t>("/PartType1/ParticleIDs");
      CHECK(ids == a.read<std::uint64_t>("/PartType1/ParticleIDs"));
      CHECK(ids.size() == share);
      concatenated.insert(concatenated.end(), ids.begin(), ids.end());
      CHECK(file_bytes(ref_names[f]) == file_bytes(names[f]));   // the same bytes for every rank count
    }
    // The files in order hold the whole set in ID order.
    CHECK(concatenated == ids_sorted);
    // Read back: each particle's values are the ones it was written with.
    const orbis::Snapshot back = orbis::read_snapshot(names.front());
    REQUIRE(back.particles.size() == static_cast<std::size_t>(n));
    CHECK(back.header.num_total == static_cast<std::uint64_t>(n));
    std::vector<std::size_t> where(all.p.size());
    std::iota(where.begin(), where.end(), std::size_t{0});
    std::sort(where.begin(), where.end(), [&](std::size_t x, std::size_t y) { return all.p.id[x] < all.p.id[y]; });
    bool same_pos = true, same_mom = true;
    for (std::size_t i = 0; i < where.size(); ++i)
      for (int d = 0; d < 3; ++d) {
        same_pos = same_pos && back.particles.pos[i][d] == all.p.pos[where[i]][d];
        same_mom = same_mom && std::abs(back.particles.mom[i][d] - all.p.mom[where[i]][d]) <= 1e-12 * 100;
      }
    CHECK(same_pos);
    CHECK(same_mom);
  }
}

TEST_CASE("id_sort_order: a few ascending runs merged, anything else radix-sorted, both stable") {
  std::mt19937_64 rng(99);
  // Runs: 1 (sorted: no order), 2, 16 (merged), 17 and many (radix-sorted); IDs up to 2^40
  // and 2^63 (the index no longer fits beside the ID in one word); repeated IDs keep their order.
  for (std::uint64_t range : {std::uint64_t{1} << 40, std::uint64_t{1} << 63})
    for (std::size_t runs : {1, 2, 16, 17, 1000}) {
      INFO(runs << " runs, IDs below " << range);
      std::vector<std::uint64_t> ids;
      for (std::size_t r = 0; r < runs; ++r) {
        std::vector<std::uint64_t> run(1 + rng() % 300);
        for (auto& id : run) id = rng() % range;
        std::sort(run.begin(), run.end());
        ids.insert(ids.end(), run.begin(), run.end());
      }
      ids.push_back(ids.front());   // a repeated ID
      std::vector<std::size_t> expected(ids.size());
      std::iota(expected.begin(), expected.end(), std::size_t{0});
      std::stable_sort(expected.begin(), expected.end(), [&](std::size_t a, std::size_t b) { return ids[a] < ids[b]; });
      const std::vector<std::size_t> order = orbis::id_sort_order(ids);
      CHECK(order == expected);
    }
  const std::vector<std::uint64_t> sorted{3, 3, 7, 9};
  CHECK(orbis::id_sort_order(sorted).empty());
}

TEST_CASE("particle IDs that are not unique are an error on every rank, and no file is written") {
  const Comm world = Comm::world();
  if (world.size() == 1) return;   // one rank writes the particles as they are
  const orbis::test::SharedScratchDir dir("snapshot_shares_twice", world);
  for (bool dense : {false, true})
    for (int files : {1, 4}) {
      INFO(files << " files, " << world.size() << " ranks, " << (dense ? "dense" : "sparse") << " IDs");
      TestSet all = make_set(100, dense);
      // One ID twice; with dense IDs the range still looks dense (5 .. 104, 7 missing).
      if (dense) *std::find(all.p.id.begin(), all.p.id.end(), 7) = 8;
      else all.p.id[1] = all.p.id[0];
      const TestSet mine = my_part(all, world);
      const std::string path = dir.file(std::string("twice_") + (dense ? "dense" : "sparse") + ".hdf5");
      CHECK_THROWS_AS(orbis::write_snapshot(path, mine.p, 0.5, params_with(files), {}, world), orbis::Error);
      for (const std::string& name : orbis::snapshot_file_names(path, files)) CHECK(!std::filesystem::exists(name));
    }
}

TEST_CASE("a snapshot that cannot be written is an error on every rank, none left waiting") {
  const Comm world = Comm::world();
  const orbis::test::SharedScratchDir dir("snapshot_shares_fail", world);
  const TestSet all = make_set(100);
  const TestSet mine = my_part(all, world);
  for (int files : {1, 4}) {   // at np 2 and 3: fewer files than ranks, then more
    INFO(files << " files, " << world.size() << " ranks");
    const std::string path = dir.file("no_such_folder/snapshot.hdf5");
    CHECK_THROWS_AS(orbis::write_snapshot(path, mine.p, 0.5, params_with(files), {}, world), orbis::Error);
    CHECK(!std::filesystem::exists(dir.file("no_such_folder")));
  }
}

TEST_CASE("particles of several types or individual masses over several ranks: an error on every rank, no file") {
  // An isolated system's (one rank): its writer does not take shares of ranks. Only one rank
  // holds such particles here, the others plain ones: every rank must still refuse.
  const Comm world = Comm::world();
  const orbis::test::SharedScratchDir dir("snapshot_shares_types", world);
  const orbis::Params vacuum = orbis::Params::parse(
      "[ic]\nkind = \"plummer\"\nparticles = 8\n[gravity]\nboundary = \"vacuum\"\nsoftening = 0.1\n"
      "solver = \"direct\"\n[time]\nt_end = 1.0\nmax_dt = 0.1\n", "iso.toml");
  TestSet mine = my_part(make_set(40), world);
  if (world.rank() == 0) mine.p.type.assign(mine.p.size(), 4);
  const std::string path = dir.file("typed.hdf5");
  if (world.size() == 1) {
    orbis::write_snapshot(path, mine.p, 0.5, vacuum, {}, world);
    CHECK(std::filesystem::exists(path));
    return;
  }
  CHECK_THROWS_WITH_AS(orbis::write_snapshot(path, mine.p, 0.5, vacuum, {}, world),
                       doctest::Contains("written from one rank only"), orbis::Error);
  CHECK(!std::filesystem::exists(path));
}
