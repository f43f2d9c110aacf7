// The ghosts' decision from boxes alone (RankDomains::plan_ghosts, what the GPU engine calls
// with boxes computed on the device) against RankDomains::with_ghosts from the positions,
// over a run of moves: after an update (chosen from the top tree's boxes), small moves (kept,
// refreshed), a large move (chosen again from the gathered boxes), a particle across a face
// of the box, and the next update. Two RankDomains follow the same particles; the second is
// given each own group's box (computed here, by brute force over its members) and moves the
// positions itself along its routes, with the communicator's alltoallv. At every call both
// must give the same answer (kept or chosen again), the same groups, and bit for bit the same
// positions in the same order: with_ghosts() is the tested reference (tests/mpi/test_domains:
// every particle within r_cut is among its ghosts, whole groups in their owners' order).
// A new choice is incremental (only the pairs of the groups that moved too far are tested
// again), so it may hold more groups than a full one; what matters is checked by brute
// force at every call: every group walk_pair keeps with an own group at the current boxes
// (at r_cut) is among the ghosts.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "domain/rank_domains.hpp"
#include "fmm/walk_pair.hpp"
#include "support/clustered_particles.hpp"

using orbis::Comm;
using orbis::Vec3d;

namespace {

bool same_bits(const std::vector<Vec3d>& a, const std::vector<Vec3d>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(Vec3d)) == 0);
}

// The own groups' boxes, member by member (empty group: lo = +inf, hi = -inf).
void own_boxes(const std::vector<Vec3d>& pos, const std::vector<std::uint32_t>& offsets, std::vector<Vec3d>& lo,
               std::vector<Vec3d>& hi) {
  const std::size_t groups = offsets.empty() ? 0 : offsets.size() - 1;
  lo.assign(groups, Vec3d{HUGE_VAL, HUGE_VAL, HUGE_VAL});
  hi.assign(groups, Vec3d{-HUGE_VAL, -HUGE_VAL, -HUGE_VAL});
  for (std::size_t g = 0; g < groups; ++g)
    for (std::uint32_t i = offsets[g]; i < offsets[g + 1]; ++i)
      for (int d = 0; d < 3; ++d) {
        lo[g][d] = std::min(lo[g][d], pos[i][d]);
        hi[g][d] = std::max(hi[g][d], pos[i][d]);
      }
}

// walk_pair's sink that notes whether the pair was kept (any outcome but the drop).
struct KeptSink {
  bool kept = false;
  void m2l(const std::int8_t*) { kept = true; }
  void p2p(const std::int8_t*) { kept = true; }
  void p2l_m2p(bool) { kept = true; }
  void child(std::int32_t, std::int32_t) { kept = true; }
};

// The other ranks' groups that walk_pair keeps at r_cut with one of this rank's groups, at
// the current boxes of all groups (gathered), brute force over all pairs, missing from
// `groups` (what the walk of the forest needs and does not have).
std::size_t missing_groups(const orbis::RankDomains& domains, const std::vector<Vec3d>& lo,
                           const std::vector<Vec3d>& hi, double box, double r_cut, const Comm& world) {
  std::vector<Vec3d> own(2 * lo.size());
  for (std::size_t k = 0; k < lo.size(); ++k) own[2 * k] = lo[k], own[2 * k + 1] = hi[k];
  const std::vector<Vec3d> all = world.allgatherv(own);
  const std::uint32_t n_groups = domains.domains().groups();
  REQUIRE(all.size() == 2 * n_groups);
  std::vector<orbis::WalkNode> nodes(n_groups);
  for (std::uint32_t g = 0; g < n_groups; ++g)
    nodes[g] = orbis::make_walk_node(all[2 * g], all[2 * g + 1], 0.5 * (all[2 * g] + all[2 * g + 1]), 0.0, -1, -1,
                                     -1, false);
  const orbis::WalkPairParams params{box, 0.5 * box, r_cut, r_cut * r_cut, 0.0};
  const std::vector<std::uint32_t>& present = domains.groups();
  std::size_t missing = 0;
  const int me = world.rank();
  for (std::uint32_t b = 0; b < n_groups; ++b) {
    if (domains.domains().owner(b) == me) continue;
    bool wanted = false;
    for (std::uint32_t a = domains.domains().begin(me); a < domains.domains().end(me) && !wanted; ++a) {
      KeptSink sink;
      orbis::walk_pair(std::min(a, b), std::max(a, b), nodes[std::min(a, b)], nodes[std::max(a, b)], params, sink);
      wanted = sink.kept;
    }
    if (wanted && std::find(present.begin(), present.end(), b) == present.end()) ++missing;
  }
  return missing;
}

}  // namespace

TEST_CASE("plan_ghosts from the own groups' boxes: with_ghosts()'s decision, routes and ghosts, bit for bit") {
  const Comm world = Comm::world();
  if (world.size() == 1) return;   // one rank has no ghosts (plan_ghosts is for several)
  const double box = 60.0;
  const orbis::Particles all = orbis::test::clustered_particle_set(11, box, 77);
  for (double r_cut : {2.0, 6.0}) {
    orbis::Particles mine;
    mine.mass = all.mass;
    for (std::size_t i = 0; i < all.size(); ++i)
      if (static_cast<int>((7 * i) % static_cast<std::size_t>(world.size())) == world.rank()) {
        mine.pos.push_back(all.pos[i]);
        mine.mom.push_back(all.mom[i]);
        mine.id.push_back(all.id[i]);
        mine.time_bin.push_back(0);
      }
    orbis::RankDomains reference(box, 8, 5, world), planned(box, 8, 5, world);
    int kept = 0, chosen = 0;
    for (int round = 0; round < 10; ++round) {
      INFO(world.size() << " ranks, r_cut " << r_cut << ", round " << round);
      if (round % 5 == 0) {
        orbis::Particles copy = mine;
        reference.update(mine, 1.0 + world.rank());
        planned.update(copy, 1.0 + world.rank());
        CHECK(same_bits(copy.pos, mine.pos));
      }
      bool same_set = false;
      const std::vector<Vec3d> expected = reference.with_ghosts(mine.pos, r_cut, &same_set);

      std::vector<Vec3d> lo, hi;
      own_boxes(mine.pos, planned.own_offsets(), lo, hi);
      const orbis::RankDomains::GhostPlan plan = planned.plan_ghosts(lo, hi, r_cut);
      REQUIRE(plan.routes != nullptr);
      std::vector<Vec3d> send;
      for (std::uint32_t i : plan.routes->sent) send.push_back(mine.pos[i]);
      std::vector<std::size_t> arrived;
      std::vector<Vec3d> got = mine.pos;
      const std::vector<Vec3d> ghosts = world.alltoallv(send, plan.routes->counts, &arrived);
      got.insert(got.end(), ghosts.begin(), ghosts.end());

      CHECK(plan.kept == same_set);
      CHECK(planned.report().rechosen == reference.report().rechosen);
      if (!plan.kept) CHECK(planned.report().rechosen);   // chosen again may find the same set
      CHECK(world.sum(missing_groups(planned, lo, hi, box, r_cut, world)) == 0);
      CHECK(arrived == plan.routes->recv_counts);
      CHECK(planned.group_offsets() == reference.group_offsets());
      CHECK(planned.groups() == reference.groups());
      CHECK(planned.group_offsets().back() == got.size());
      CHECK(same_bits(got, expected));
      CHECK(planned.report().ghosts == got.size() - mine.size());
      CHECK(planned.report().ghost_bytes_sent == send.size() * sizeof(Vec3d));
      CHECK(planned.report().ghost_bytes_received == ghosts.size() * sizeof(Vec3d));
      (planned.report().rechosen ? chosen : kept) += 1;

      // The moves: small ones (well under r_cut kGhostMargin / (2 sqrt 3)), a large one after
      // the second call of each update, and at round 7 the particles near the upper y face
      // across it (their groups' boxes then span the box).
      const double step = round % 5 == 1 ? 0.15 * r_cut : 0.002 * r_cut;
      for (std::size_t q = 0; q < mine.size(); ++q) {
        Vec3d& x = mine.pos[q];
        x.x = std::fmod(x.x + step * std::sin(0.37 * static_cast<double>(mine.id[q]) + round) + box, box);
        x.z = std::fmod(x.z + step * std::cos(0.11 * static_cast<double>(mine.id[q])) + box, box);
        if (round == 7 && x.y > box - 0.3) x.y = 0.01;
      }
    }
    // Both answers happened (on every rank alike: the decision is collective).
    MESSAGE(world.size() << " ranks, r_cut " << r_cut << ": kept " << kept << ", chosen " << chosen);
    CHECK(kept >= 4);
    CHECK(chosen >= 4);
  }
}

TEST_CASE("plan_ghosts refuses boxes that are not one per own group") {
  const Comm world = Comm::world();
  if (world.size() == 1) return;
  const double box = 60.0;
  orbis::Particles mine = orbis::test::clustered_particle_set(6, box, 3);
  if (!world.is_root()) mine.resize(0);
  orbis::RankDomains domains(box, 8, 3, world);
  domains.update(mine, 0.0);
  const std::size_t own = domains.own_offsets().size() - 1;
  std::vector<Vec3d> lo(own + 1), hi(own + 1);
  bool refused = false;
  try {
    domains.plan_ghosts(lo, hi, 2.0);   // fails on every rank before any collective
  } catch (const orbis::Error&) {
    refused = true;
  }
  CHECK(refused);
}
