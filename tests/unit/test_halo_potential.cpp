// The minimum-potential member of a group (analysis/halo_potential.hpp) against a
// brute-force O(n^2) sum written here: a Plummer sphere with a denser satellite and
// background members across the periodic boundary, the octree path against the direct one
// (bitwise) on cored, cuspy and two-centred groups, and ties.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "analysis/halo_potential.hpp"
#include "analysis/halo_properties.hpp"
#include "cosmology/cosmology.hpp"
#include "support/fof_samples.hpp"

using namespace orbis;

namespace {

// S_i = sum_{j != i} 1 / sqrt(|minimum image of x_j - x_i|^2 + eps^2), each pair from the
// positions themselves, summed in plain order.
std::vector<double> brute_force_sums(const std::vector<Vec3d>& x, double box, double eps) {
  std::vector<double> s(x.size(), 0.0);
  for (std::size_t i = 0; i < x.size(); ++i)
    for (std::size_t j = 0; j < x.size(); ++j) {
      if (i == j) continue;
      double r2 = eps * eps;
      for (int d = 0; d < 3; ++d) {
        double dx = std::fmod(x[j][d] - x[i][d], box);
        if (dx > 0.5 * box) dx -= box;
        if (dx < -0.5 * box) dx += box;
        r2 += dx * dx;
      }
      s[i] += 1.0 / std::sqrt(r2);
    }
  return s;
}

// The brute-force choice for members[0..n) of p: largest S, ties by smallest ID; and the
// relative gap to the runner-up (a near tie within rounding may legitimately go either way).
struct BruteChoice {
  std::uint64_t id = 0;
  double sum = 0, gap = 0;
};
BruteChoice brute_force_choice(const Particles& p, const std::uint32_t* members, std::uint32_t n, double box,
                               double eps) {
  std::vector<Vec3d> x(n);
  for (std::uint32_t k = 0; k < n; ++k) x[k] = p.pos[members[k]];
  const std::vector<double> s = brute_force_sums(x, box, eps);
  std::size_t best = 0;
  for (std::size_t k = 1; k < n; ++k)
    if (s[k] > s[best] || (s[k] == s[best] && p.id[members[k]] < p.id[members[best]])) best = k;
  double second = -1;
  for (std::size_t k = 0; k < n; ++k)
    if (k != best) second = std::max(second, s[k]);
  return {p.id[members[best]], s[best], (s[best] - second) / s[best]};
}

std::vector<std::uint32_t> all_members(std::size_t n) {
  std::vector<std::uint32_t> m(n);
  std::iota(m.begin(), m.end(), 0u);
  return m;
}

// NFW-like cusp (rho ~ 1/r inside rs, 1/r^3 outside) by inverse sampling of M(<r), r < 5 rs.
void add_cusp(std::vector<Vec3d>& pos, std::size_t n, const Vec3d& centre, double rs, double box,
              std::mt19937_64& rng) {
  auto mass = [](double x) { return std::log(1 + x) - x / (1 + x); };
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (std::size_t i = 0; i < n; ++i) {
    const double target = u(rng) * mass(5.0);
    double lo = 0, hi = 5.0;
    for (int it = 0; it < 50; ++it) ((mass(0.5 * (lo + hi)) < target) ? lo : hi) = 0.5 * (lo + hi);
    Vec3d x = centre + testing::random_direction(rng) * (0.5 * (lo + hi) * rs);
    for (int d = 0; d < 3; ++d) x[d] = periodic_wrap_position(x[d], box);
    pos.push_back(x);
  }
}

}  // namespace

TEST_CASE("potential minimum: the deepest member of a halo with a denser satellite, across the boundary") {
  std::mt19937_64 rng(71);
  const double box = 10.0, eps = 0.005, a = 1.0;
  const Vec3d centre{9.96, 0.03, 5.0};   // the main body straddles two faces of the box
  std::vector<Vec3d> pos;
  testing::add_uniform(pos, 2000, box, rng);
  testing::add_plummer(pos, 2000, centre, 0.1, 1.0, box, rng);
  // A satellite 0.3 away: denser at its centre (200 members within a scale of 0.03, central
  // density 3.7x the main body's), but its potential well is shallower (S ~ 200/0.03 + 2000/0.32
  // against ~ 2000/0.1 at the main centre): the minimum is in the main body.
  const Vec3d satellite = centre + Vec3d{0.3, 0.0, 0.0};
  testing::add_plummer(pos, 200, satellite, 0.03, 0.3, box, rng);
  const Particles p = testing::make_particles(pos, 1.0, rng);
  const fof::CellGrid grid(p.pos, box, fof::linking_length(p.size(), box, 0.2));
  const auto groups = fof::find_groups(grid, p, 20);
  REQUIRE(groups.size() >= 1);
  REQUIRE(groups.length[0] > 2000);   // main body and satellite in one group
  const Cosmology cosmo(CosmologyParams{0.3, 0.7, -1.0});
  const auto haloes = halo::compute_properties(grid, p, groups, cosmo, a, eps);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    CAPTURE(g);
    const std::uint32_t* members = groups.members.data() + groups.offset[g];
    const BruteChoice brute = brute_force_choice(p, members, groups.length[g], box, eps);
    INFO("relative gap to the runner-up " << brute.gap);
    if (brute.gap > 1e-12) CHECK(haloes[g].min_pot_id == brute.id);
    std::uint32_t k = 0;
    while (k < groups.length[g] && p.id[members[k]] != haloes[g].min_pot_id) ++k;
    REQUIRE(k < groups.length[g]);
    for (int d = 0; d < 3; ++d) CHECK(haloes[g].pos[d] == p.pos[members[k]][d]);
  }
  Vec3d off = haloes[0].pos - centre;
  for (int d = 0; d < 3; ++d) off[d] = periodic_wrap_delta(off[d], box);
  CHECK(norm(off) < 0.05);   // the main body's core, not the satellite 0.3 away
  // The centre of mass sits between the two (pulled towards the satellite), unlike pos.
  Vec3d cm_off = haloes[0].cm - centre;
  for (int d = 0; d < 3; ++d) cm_off[d] = periodic_wrap_delta(cm_off[d], box);
  CHECK(cm_off.x > 0.0);
}

TEST_CASE("potential minimum: the octree path gives the direct path's member and sum, bitwise") {
  const double box = 10.0, eps = 0.004;
  struct Shape {
    const char* name;
    Vec3d centre;
  };
  for (const Shape shape : {Shape{"cored Plummer", {5.0, 5.0, 5.0}}, Shape{"cusp at a corner", {0.01, 9.98, 0.02}},
                            Shape{"two equal clumps", {3.0, 7.0, 2.0}}, Shape{"duplicates", {6.0, 4.0, 8.0}}}) {
    CAPTURE(shape.name);
    std::mt19937_64 rng(72);
    std::vector<Vec3d> pos;
    const std::string name = shape.name;
    if (name == "cored Plummer") {
      testing::add_plummer(pos, 6000, shape.centre, 0.3, 2.0, box, rng);
    } else if (name == "cusp at a corner") {
      add_cusp(pos, 6000, shape.centre, 0.2, box, rng);
    } else if (name == "duplicates") {   // coincident members: exact ties, leaves at the depth limit
      testing::add_plummer(pos, 3000, shape.centre, 0.1, 1.0, box, rng);
      for (std::size_t k = 0; k < 1500; ++k) pos.push_back(pos[k]);
    } else {   // two minima of nearly equal depth: both cores survive the first bounds
      testing::add_plummer(pos, 3000, shape.centre, 0.1, 1.0, box, rng);
      testing::add_plummer(pos, 3000, shape.centre + Vec3d{0.5, 0.0, 0.0}, 0.1, 1.0, box, rng);
    }
    const Particles p = testing::make_particles(pos, 1.0, rng);
    const auto members = all_members(p.size());
    const auto n = static_cast<std::uint32_t>(p.size());
    const halo::PotentialMinimum direct =
        halo::potential_minimum(p.pos, p.id, members.data(), n, box, eps, std::numeric_limits<std::uint32_t>::max());
    const halo::PotentialMinimum tree = halo::potential_minimum(p.pos, p.id, members.data(), n, box, eps, 0);
    CHECK(tree.member == direct.member);
    CHECK(tree.sum == direct.sum);
    const BruteChoice brute = brute_force_choice(p, members.data(), n, box, eps);
    INFO("relative gap to the runner-up " << brute.gap);
    if (brute.gap > 1e-12) CHECK(p.id[direct.member] == brute.id);
    CHECK(direct.sum == doctest::Approx(brute.sum).epsilon(1e-12));
  }
}

TEST_CASE("potential minimum: ties go to the smallest ID") {
  // A regular tetrahedron: every member has the same three neighbours at sqrt(8) d, and the
  // coordinates are exact in binary, so the four sums are equal bitwise.
  const double box = 10.0, d = 0.25;
  const Vec3d c{5.0, 5.0, 5.0};
  Particles p;
  p.resize(4);
  p.pos = {c + Vec3d{d, d, d}, c + Vec3d{d, -d, -d}, c + Vec3d{-d, d, -d}, c + Vec3d{-d, -d, d}};
  p.id = {42, 17, 99, 23};
  p.mass = 1.0;
  for (const std::uint32_t direct_max : {0u, 100u}) {
    CAPTURE(direct_max);
    const auto members = all_members(4);
    const halo::PotentialMinimum best = halo::potential_minimum(p.pos, p.id, members.data(), 4, box, 0.01, direct_max);
    CHECK(p.id[best.member] == 17);
    // Members in another order: the same particle.
    const std::vector<std::uint32_t> shuffled = {3, 0, 2, 1};
    const halo::PotentialMinimum again = halo::potential_minimum(p.pos, p.id, shuffled.data(), 4, box, 0.01, direct_max);
    CHECK(p.id[shuffled[again.member]] == 17);
  }
  // Two members: always a tie.
  const std::vector<std::uint32_t> pair = {2, 0};
  const halo::PotentialMinimum two = halo::potential_minimum(p.pos, p.id, pair.data(), 2, box, 0.01);
  CHECK(p.id[pair[two.member]] == 42);
  CHECK(two.sum == doctest::Approx(1.0 / std::sqrt(8 * d * d + 1e-4)).epsilon(1e-14));
}
