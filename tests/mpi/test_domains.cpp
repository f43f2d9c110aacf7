// Rank domains (ORB over the ranks), particle migration and ghost import, on a clustered set
// spread over the ranks with no regard to position: the domains tile the box and are the same
// on every rank; the weight is balanced; after migration every particle lives once, on the
// rank whose domain holds it, with its momentum, id and time bin; the ghosts are exactly the
// other ranks' particles within r_cut of this rank's (brute force over all pairs, periodic).
// Also a particle count the rank count does not divide, ranks with no particle, and weights.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <tuple>

#include "core/comm.hpp"
#include "domain/orb_domains.hpp"
#include "domain/particle_exchange.hpp"
#include "domain/rank_domains.hpp"
#include "support/clustered_particles.hpp"
#include "support/periodic_distance.hpp"

using orbis::Comm;
using orbis::Vec3d;

using orbis::test::periodic_distance2;

namespace {

// Particle i of `all` starts on rank (7 i) mod `ranks` (every rank gets some from everywhere).
orbis::Particles share(const orbis::Particles& all, int ranks, const Comm& comm) {
  orbis::Particles mine;
  mine.mass = all.mass;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (static_cast<int>((7 * i) % static_cast<std::size_t>(ranks)) == comm.rank()) {
      mine.pos.push_back(all.pos[i]);
      mine.mom.push_back(all.mom[i]);
      mine.id.push_back(all.id[i]);
      mine.time_bin.push_back(all.time_bin[i]);
    }
  return mine;
}

orbis::Particles numbered_set(int n_side, double box, std::size_t keep) {
  orbis::Particles p = orbis::test::clustered_particle_set(n_side, box, 77);
  p.resize(std::min(keep, p.size()));
  for (std::size_t i = 0; i < p.size(); ++i) {
    p.mom[i] = Vec3d{1.0 * i, -2.0 * i, 0.5};
    p.time_bin[i] = static_cast<std::uint8_t>(i % 5);
  }
  return p;
}

bool same(const Vec3d& a, const Vec3d& b) { return a.x == b.x && a.y == b.y && a.z == b.z; }

// After a migration: each of this rank's particles carries its own state (position,
// momentum, time bin: ids are 1 .. N, `all` in id order) and lies in this rank's domain.
void check_travelled(const orbis::Particles& mine, const orbis::Particles& all, const orbis::OrbDomains& d,
                     const Comm& world) {
  REQUIRE(mine.time_bin.size() == mine.size());
  bool state_travelled = true, here = true;
  for (std::size_t q = 0; q < mine.size(); ++q) {
    const std::size_t i = mine.id[q] - 1;
    state_travelled = state_travelled && same(mine.pos[q], all.pos[i]) && same(mine.mom[q], all.mom[i]) &&
                      mine.time_bin[q] == all.time_bin[i];
    here = here && d.owner(mine.pos[q]) == world.rank();
  }
  CHECK(state_travelled);
  CHECK(here);
}

// A fixed pseudo-random number in [0, 1) for (id, round).
double hashed(std::uint64_t id, int round) {
  std::uint64_t h = id * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(round) * 0xBF58476D1CE4E5B9ull;
  h ^= h >> 31;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 29;
  return static_cast<double>(h >> 11) / 9007199254740992.0;
}

}  // namespace

TEST_CASE("ORB domains tile the box, agree on every rank and balance the weight") {
  const Comm world = Comm::world();
  const double box = 60.0;
  for (std::size_t keep : {std::size_t{1000}, std::size_t{1331}, std::size_t{2}}) {
    const orbis::Particles all = numbered_set(11, box, keep);
    const orbis::Particles mine = share(all, world.size(), world);
    INFO(keep << " particles, " << world.size() << " ranks");
    const orbis::OrbDomains d = orbis::OrbDomains::build(mine.pos, {}, box, world);
    REQUIRE(d.ranks() == world.size());
    double volume = 0;
    for (int r = 0; r < d.ranks(); ++r) {
      const Vec3d side = d.domain(r).hi - d.domain(r).lo;
      CHECK(side.x >= 0);
      CHECK(side.y >= 0);
      CHECK(side.z >= 0);
      volume += side.x * side.y * side.z;
    }
    CHECK(volume == doctest::Approx(box * box * box).epsilon(1e-12));
    // Every particle's owner's box holds it, and every rank names the same owners.
    std::vector<int> owners;
    for (const Vec3d& x : all.pos) {
      const int o = d.owner(x);
      owners.push_back(o);
      const orbis::DomainBox& b = d.domain(o);
      for (int k = 0; k < 3; ++k) CHECK((b.lo[k] <= x[k] && x[k] < b.hi[k]));
    }
    const std::vector<int> rank0 = [&] {
      std::vector<int> o = owners;
      world.broadcast(o);
      return o;
    }();
    CHECK(rank0 == owners);
    // Counts within a few particles of N / P (the cut is placed to 6e-8 of the box).
    std::vector<std::size_t> count(static_cast<std::size_t>(world.size()), 0);
    for (int o : owners) ++count[static_cast<std::size_t>(o)];
    for (int r = 0; r < world.size(); ++r) {
      // A piece of q ranks out of p gets q/p of its weight; each cut may miss by one particle.
      CHECK(std::abs(static_cast<double>(count[static_cast<std::size_t>(r)]) -
                     static_cast<double>(all.size()) / world.size()) <= 2.0);
    }
  }
}

TEST_CASE("ORB domains balance a weight, not the count") {
  const Comm world = Comm::world();
  const double box = 60.0;
  const orbis::Particles all = numbered_set(10, box, 1000);
  // Particles with x < box/3 weigh 9, the rest 1.
  std::vector<double> w_all(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) w_all[i] = all.pos[i].x < box / 3 ? 9.0 : 1.0;
  std::vector<Vec3d> pos;
  std::vector<double> weight;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (static_cast<int>(i % static_cast<std::size_t>(world.size())) == world.rank())
      pos.push_back(all.pos[i]), weight.push_back(w_all[i]);
  const orbis::OrbDomains d = orbis::OrbDomains::build(pos, weight, box, world);
  std::vector<double> load(static_cast<std::size_t>(world.size()), 0.0);
  double total = 0;
  for (std::size_t i = 0; i < all.size(); ++i) load[static_cast<std::size_t>(d.owner(all.pos[i]))] += w_all[i], total += w_all[i];
  for (double l : load) CHECK(std::abs(l - total / world.size()) <= 2 * 9.0);
}

TEST_CASE("migration: every particle once, on its domain's rank, sorted by id, with its state") {
  const Comm world = Comm::world();
  const double box = 60.0;
  for (std::size_t keep : {std::size_t{1331}, std::size_t{2}}) {
    const orbis::Particles all = numbered_set(11, box, keep);
    // Half of the particles start on the last rank only, so some ranks start empty.
    orbis::Particles mine = share(all, world.size() > 1 ? world.size() - 1 : 1, world);
    const orbis::OrbDomains d = orbis::OrbDomains::build(mine.pos, {}, box, world);
    orbis::migrate_particles(mine, d, world);
    CHECK(world.sum<std::uint64_t>(mine.size()) == all.size());
    CHECK(std::is_sorted(mine.id.begin(), mine.id.end()));
    check_travelled(mine, all, d, world);
    std::vector<std::uint64_t> ids = world.allgatherv(mine.id);
    std::sort(ids.begin(), ids.end());
    CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
    CHECK(ids.size() == all.size());
  }
}

TEST_CASE("migration rounds: the particles that cross a cut move, the others keep their order") {
  // Migration sends only the particles that leave and merges the arrivals in by id; the
  // first migration here starts from particles in reverse id order (sorted first). Each
  // round moves a pseudo-random tenth of the particles (and the lowest and highest ids)
  // anywhere in the box, and after it every rank must hold exactly its domain's particles,
  // sorted by id, each with its own state, whatever left or arrived where.
  const Comm world = Comm::world();
  const double box = 60.0;
  orbis::Particles all = numbered_set(11, box, 1331);
  orbis::Particles mine = share(all, world.size(), world);
  std::reverse(mine.pos.begin(), mine.pos.end());
  std::reverse(mine.mom.begin(), mine.mom.end());
  std::reverse(mine.id.begin(), mine.id.end());
  std::reverse(mine.time_bin.begin(), mine.time_bin.end());
  const orbis::OrbDomains d = orbis::OrbDomains::build(mine.pos, {}, box, world);
  for (int round = 0; round < 4; ++round) {
    INFO("round " << round << ", " << world.size() << " ranks");
    if (round > 0) {
      const auto jump = [&](std::uint64_t id, Vec3d& x) {
        if (id != 1 && id != all.size() && hashed(id, round) >= 0.1) return;
        for (int a = 0; a < 3; ++a) x[a] = std::min(box * hashed(id, 10 * round + a + 1), std::nextafter(box, 0.0));
      };
      for (std::size_t q = 0; q < mine.size(); ++q) jump(mine.id[q], mine.pos[q]);
      for (std::size_t i = 0; i < all.size(); ++i) jump(all.id[i], all.pos[i]);
    }
    const std::size_t before = mine.size();
    std::size_t leaving = 0;
    for (const Vec3d& x : mine.pos) leaving += d.owner(x) != world.rank();
    CHECK(orbis::migrate_particles(mine, d, world) == leaving);
    if (world.size() == 1) CHECK(mine.size() == before);
    CHECK(world.sum<std::uint64_t>(mine.size()) == all.size());
    CHECK(std::adjacent_find(mine.id.begin(), mine.id.end(), std::greater_equal<>()) == mine.id.end());
    check_travelled(mine, all, d, world);
  }
}

TEST_CASE("ghosts kept between PM steps: the same particles, at their new positions") {
  // RankDomains::with_ghosts chooses the ghosts, then, while the particles have moved little,
  // only refreshes their positions: the result must be what the choice held, each ghost at
  // its owner's current position, in the same order, after this rank's own particles.
  const Comm world = Comm::world();
  const double box = 60.0, r_cut = 6.0;
  const orbis::Particles all = numbered_set(11, box, 1331);
  orbis::Particles mine = share(all, world.size(), world);
  orbis::RankDomains domains(box, world);
  domains.update(mine, 0.0);
  bool same_set = true;
  const std::vector<Vec3d> first = domains.with_ghosts(mine.pos, r_cut, &same_set);
  CHECK_FALSE(same_set);
  REQUIRE(first.size() == mine.size() + domains.report().ghosts);
  const std::vector<Vec3d> before = world.allgatherv(mine.pos);
  const std::vector<std::uint64_t> ids = world.allgatherv(mine.id);
  // A small move (well under r_cut kGhostMargin / 2) of every particle.
  for (std::size_t q = 0; q < mine.size(); ++q)
    mine.pos[q].z = std::fmod(mine.pos[q].z + 0.02 * r_cut * orbis::RankDomains::kGhostMargin * hashed(mine.id[q], 7),
                              box);
  const std::vector<Vec3d> after = world.allgatherv(mine.pos);
  const std::vector<Vec3d>& second = domains.with_ghosts(mine.pos, r_cut, &same_set);
  CHECK(same_set == (world.size() > 1));
  REQUIRE(second.size() == first.size());
  bool own = true, moved_with_owner = true;
  for (std::size_t q = 0; q < mine.size(); ++q) own = own && same(second[q], mine.pos[q]);
  for (std::size_t k = mine.size(); k < first.size(); ++k) {
    // The ghost's particle: the one (of another rank) that was at first[k].
    std::size_t j = 0;
    while (j < before.size() && !same(before[j], first[k])) ++j;
    REQUIRE(j < before.size());
    moved_with_owner = moved_with_owner && same(second[k], after[j]) &&
                       std::find(mine.id.begin(), mine.id.end(), ids[j]) == mine.id.end();
  }
  CHECK(own);
  CHECK(moved_with_owner);
  // A large move: chosen again (several ranks), the same as a fresh choice.
  for (Vec3d& x : mine.pos) x.x = std::fmod(x.x + r_cut, box);
  const std::vector<Vec3d> third = domains.with_ghosts(mine.pos, r_cut, &same_set);
  CHECK_FALSE(same_set);
  orbis::RankDomains fresh(box, world);
  fresh.restore(domains.state(), "test");
  const std::vector<Vec3d>& reference = fresh.with_ghosts(mine.pos, r_cut);
  REQUIRE(third.size() == reference.size());
  bool equal = true;
  for (std::size_t k = 0; k < third.size(); ++k) equal = equal && same(third[k], reference[k]);
  CHECK(equal);
}

TEST_CASE("ghosts: exactly the other ranks' particles within r_cut of this rank's, periodic images included") {
  const Comm world = Comm::world();
  const double box = 60.0;
  const orbis::Particles all = numbered_set(11, box, 1331);
  orbis::Particles mine = share(all, world.size(), world);
  const orbis::OrbDomains d = orbis::OrbDomains::build(mine.pos, {}, box, world);
  orbis::migrate_particles(mine, d, world);
  // Particles drifted out of their domain since: still found.
  for (Vec3d& x : mine.pos) x.y = std::fmod(x.y + 1.7, box);
  const std::vector<std::uint64_t> ids = world.allgatherv(mine.id);
  const std::vector<Vec3d> pos = world.allgatherv(mine.pos);
  std::set<std::uint64_t> local(mine.id.begin(), mine.id.end());
  for (double r_cut : {4.0, 13.0}) {
    INFO("r_cut " << r_cut << ", " << world.size() << " ranks");
    const orbis::DomainBox& b = d.domain(world.rank());
    const std::vector<Vec3d> ghosts = orbis::import_ghosts(mine.pos, (b.lo + b.hi) * 0.5, r_cut, box, world);
    // Brute force: the other ranks' particles within r_cut of one of ours.
    std::vector<Vec3d> needed;
    for (std::size_t j = 0; j < pos.size(); ++j) {
      if (local.count(ids[j])) continue;
      bool near = false;
      for (const Vec3d& x : mine.pos)
        if (periodic_distance2(x, pos[j], box) <= r_cut * r_cut) {
          near = true;
          break;
        }
      if (near) needed.push_back(pos[j]);
    }
    const auto less = [](const Vec3d& a, const Vec3d& b) { return std::tie(a.x, a.y, a.z) < std::tie(b.x, b.y, b.z); };
    std::vector<Vec3d> got = ghosts;
    std::sort(got.begin(), got.end(), less);
    std::sort(needed.begin(), needed.end(), less);
    // Every needed one came (the set may hold more: those near the extent, not a particle).
    CHECK(std::includes(got.begin(), got.end(), needed.begin(), needed.end(), less));
    CHECK(std::adjacent_find(got.begin(), got.end(), same) == got.end());
    // None of them is ours, and none is farther than r_cut from our extent's box: at most the
    // particles within r_cut of the box, a few times the needed ones, never everything.
    std::size_t ours = 0;
    for (const Vec3d& g : got)
      for (const Vec3d& x : mine.pos) ours += same(g, x);
    CHECK(ours == 0);
    if (world.size() > 1 && r_cut < 5) CHECK(got.size() < pos.size() - mine.size());
    if (world.size() == 1) CHECK(got.empty());
  }
}
