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
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "domain/rank_domains.hpp"
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
      CHECK(planned.report().rechosen == !plan.kept);
      CHECK(arrived == plan.routes->recv_counts);
      CHECK(planned.group_offsets() == reference.group_offsets());
      CHECK(planned.groups() == reference.groups());
      CHECK(planned.group_offsets().back() == got.size());
      CHECK(same_bits(got, expected));
      CHECK(planned.report().ghosts == got.size() - mine.size());
      CHECK(planned.report().ghost_bytes_sent == send.size() * sizeof(Vec3d));
      CHECK(planned.report().ghost_bytes_received == ghosts.size() * sizeof(Vec3d));
      (plan.kept ? kept : chosen) += 1;

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
