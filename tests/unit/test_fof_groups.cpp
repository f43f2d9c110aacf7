// Friends-of-friends groups against a brute-force O(N^2) linking (exact membership and
// order) on uniform, clustered and boundary-straddling sets, for several thread counts.
#include <doctest/doctest.h>
#include <omp.h>

#include <random>
#include <string>

#include "analysis/fof.hpp"
#include "core/error.hpp"
#include "support/fof_samples.hpp"

using namespace orbis;

namespace {

std::vector<std::vector<std::uint64_t>> as_id_lists(const fof::FofGroups& g, const Particles& p) {
  std::vector<std::vector<std::uint64_t>> out;
  for (std::size_t k = 0; k < g.size(); ++k) {
    std::vector<std::uint64_t> ids;
    for (std::uint32_t m = 0; m < g.length[k]; ++m) ids.push_back(p.id[g.members[g.offset[k] + m]]);
    out.push_back(ids);
  }
  return out;
}

// Runs the finder with 1..4 threads: each result must equal the brute force exactly
// (members, member order, group order) and therefore each other.
void check_against_brute_force(const Particles& p, double box, double link, std::uint32_t min_members,
                               const std::string& what) {
  const auto expected = testing::brute_force_fof(p, box, link, min_members);
  std::size_t grouped = 0;
  for (const auto& g : expected) grouped += g.size();
  INFO(what << ": " << expected.size() << " reference groups, " << grouped << " grouped particles");
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3, 4}) {
    CAPTURE(threads);
    omp_set_num_threads(threads);
    fof::CellGrid grid(p.pos, box, link);
    const auto groups = fof::find_groups(grid, p, min_members);
    CHECK(groups.link_mpc_h == link);
    const auto got = as_id_lists(groups, p);
    REQUIRE(got.size() == expected.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
      CAPTURE(k);
      REQUIRE(got[k] == expected[k]);
    }
  }
  omp_set_num_threads(saved);
}

}  // namespace

TEST_CASE("fof: uniform random particles match brute force for several linking lengths") {
  std::mt19937_64 rng(11);
  const double box = 10.0;
  std::vector<Vec3d> pos;
  testing::add_uniform(pos, 3000, box, rng);
  const auto p = testing::make_particles(pos, 1.0, rng);
  // b = 0.2 leaves mostly pairs and small groups; b = 0.5 is near percolation (long, wrapping
  // filaments); b = 0.7 percolates across the periodic box.
  for (double b : {0.2, 0.5, 0.7}) {
    const double link = fof::linking_length(p.size(), box, b);
    check_against_brute_force(p, box, link, 2, "uniform b=" + std::to_string(b));
  }
  check_against_brute_force(p, box, fof::linking_length(p.size(), box, 0.5), 8, "uniform min 8");
}

TEST_CASE("fof: clustered Plummer spheres plus background match brute force") {
  // Dense cores put hundreds of particles in one coarse cell, so the fine-cell path runs.
  std::mt19937_64 rng(12);
  const double box = 20.0;
  std::vector<Vec3d> pos;
  testing::add_uniform(pos, 1500, box, rng);
  testing::add_plummer(pos, 1200, {5.0, 6.0, 7.0}, 0.15, 3.0, box, rng);
  testing::add_plummer(pos, 700, {14.0, 4.0, 12.0}, 0.3, 3.0, box, rng);
  testing::add_plummer(pos, 300, {9.0, 15.0, 3.0}, 0.05, 1.0, box, rng);
  testing::add_plummer(pos, 150, {15.0, 15.0, 15.0}, 0.6, 2.0, box, rng);
  const auto p = testing::make_particles(pos, 1.0, rng);
  for (double b : {0.2, 0.35}) {
    const double link = fof::linking_length(p.size(), box, b);
    check_against_brute_force(p, box, link, 32, "clustered b=" + std::to_string(b));
    check_against_brute_force(p, box, link, 2, "clustered min 2 b=" + std::to_string(b));
  }
}

TEST_CASE("fof: groups straddling faces, edges and corners of the box match brute force") {
  std::mt19937_64 rng(13);
  const double box = 10.0;
  std::vector<Vec3d> pos;
  testing::add_uniform(pos, 800, box, rng);
  testing::add_plummer(pos, 800, {0.0, 0.0, 0.0}, 0.2, 2.0, box, rng);      // corner
  testing::add_plummer(pos, 600, {10.0, 5.0, 0.0}, 0.2, 2.0, box, rng);     // edge
  testing::add_plummer(pos, 500, {5.0, 9.95, 3.0}, 0.2, 2.0, box, rng);     // face
  testing::add_plummer(pos, 400, {0.05, 9.9, 6.0}, 0.1, 1.5, box, rng);     // edge
  const auto p = testing::make_particles(pos, 1.0, rng);
  check_against_brute_force(p, box, fof::linking_length(p.size(), box, 0.2), 20, "boundary");
  check_against_brute_force(p, box, fof::linking_length(p.size(), box, 0.4), 2, "boundary b=0.4");
}

TEST_CASE("fof: tiny grids (one and two coarse cells per side) still use minimum images") {
  // Few particles and a long linking length: the coarse grid has 1 or 2 cells per side, so
  // neighbour offsets alias the same cell through different periodic images.
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    std::mt19937_64 rng(100 + seed);
    const double box = 1.0;
    std::vector<Vec3d> pos;
    testing::add_uniform(pos, seed % 2 ? 20 : 45, box, rng);
    const auto p = testing::make_particles(pos, 1.0, rng);
    for (double link : {0.22, 0.3, 0.45}) {
      fof::CellGrid grid(p.pos, box, link);
      CHECK(grid.coarse_side() <= 2);
      check_against_brute_force(p, box, link, 2, "tiny seed " + std::to_string(seed));
    }
  }
}

TEST_CASE("fof: a larger clustered set gives identical groups for 1 to 4 threads") {
  // 60k particles: 5 slabs of x planes, so several slab boundaries are merged serially.
  std::mt19937_64 rng(14);
  const double box = 50.0;
  std::vector<Vec3d> pos;
  testing::add_uniform(pos, 30000, box, rng);
  std::uniform_real_distribution<double> u(0.0, box);
  for (int h = 0; h < 60; ++h)
    testing::add_plummer(pos, 100 + 20 * h, {u(rng), u(rng), u(rng)}, 0.05 + 0.003 * h, 1.5, box, rng);
  const auto p = testing::make_particles(pos, 1.0, rng);
  const double link = fof::linking_length(p.size(), box, 0.2);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  fof::CellGrid grid1(p.pos, box, link);
  const auto one = fof::find_groups(grid1, p, 32);
  CHECK(one.size() >= 55);
  for (int threads : {2, 3, 4}) {
    CAPTURE(threads);
    omp_set_num_threads(threads);
    fof::CellGrid grid(p.pos, box, link);
    CHECK(grid.order() == grid1.order());
    const auto many = fof::find_groups(grid, p, 32);
    CHECK(many.length == one.length);
    CHECK(many.offset == one.offset);
    CHECK(many.members == one.members);
  }
  omp_set_num_threads(saved);
}

TEST_CASE("fof: the grid rejects impossible inputs with a message") {
  std::vector<Vec3d> pos{{0.1, 0.2, 0.3}, {0.5, 0.5, 0.5}};
  CHECK_THROWS_AS(fof::CellGrid(pos, 1.0, 0.6), Error);    // link >= box/2
  CHECK_THROWS_AS(fof::CellGrid(pos, 1.0, 0.0), Error);
  pos.push_back({1.2, 0.0, 0.0});                          // outside the box
  CHECK_THROWS_AS(fof::CellGrid(pos, 1.0, 0.1), Error);
}
