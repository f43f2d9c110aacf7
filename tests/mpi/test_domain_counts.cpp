// RankDomains::assign_groups from each group's local particle count (the CUDA engine's path,
// which counts on the device) against assign_groups from the particles' top nodes (the host
// engine's): the groups' nodes are the top tree's leaves ascending, each particle's group is
// the leaf holding it (found here by a linear search), and given the counts of those groups
// both paths make the same runs and the same report, at the first update (by count), with the
// work out of balance (rebuilt, each group weighted by its ranks' work per particle) and in
// balance (kept). Clustered particles shared among the ranks several ways: in x slabs (where
// the work per particle differs by rank, each group's weight depends on which ranks hold its
// particles, so the counts of every group matter), round robin, the last rank empty.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "domain/global_top_tree.hpp"
#include "domain/rank_domains.hpp"
#include "support/clustered_particles.hpp"
#include "support/rank_shares.hpp"

using orbis::Comm;
using orbis::GlobalTopNode;
using orbis::GlobalTopTree;
using orbis::RankDomains;
using orbis::Vec3d;

TEST_CASE("assign_groups from local counts: the particles' groups, the same runs and report") {
  const Comm world = Comm::world();
  const double box = 60.0;
  const orbis::Particles all = orbis::test::clustered_particle_set(12, box, 41);
  for (const std::string how : {"x slabs", "round robin", "last rank empty"}) {
    for (int depth : {0, 3, 5}) {
      INFO(how << ", depth " << depth << ", " << world.size() << " ranks");
      std::vector<Vec3d> pos;
      if (how == "x slabs") {
        for (const Vec3d& x : all.pos)
          if (std::min(static_cast<int>(x.x / box * world.size()), world.size() - 1) == world.rank()) pos.push_back(x);
      } else {
        for (std::size_t i : orbis::test::share_of(how, all.size(), world.size(), world.rank()))
          pos.push_back(all.pos[i]);
      }
      const GlobalTopTree top = GlobalTopTree::build(pos, 8, depth, world);

      // The groups' nodes: every leaf of the top tree once, ascending.
      const std::vector<std::int32_t> nodes = RankDomains::group_nodes(top);
      std::vector<std::int32_t> leaves;
      for (const GlobalTopNode& node : top.nodes())
        if (node.leaf()) leaves.push_back(node.index);
      CHECK(std::is_sorted(nodes.begin(), nodes.end()));
      std::sort(leaves.begin(), leaves.end());
      CHECK(nodes == leaves);
      // Each particle's group by a linear search, and the groups' counts here.
      std::vector<std::uint32_t> expected(pos.size());
      std::vector<std::uint64_t> count(nodes.size(), 0);
      for (std::size_t i = 0; i < pos.size(); ++i) {
        const auto at = std::find(nodes.begin(), nodes.end(), top.particle_node()[i]);
        REQUIRE(at != nodes.end());
        expected[i] = static_cast<std::uint32_t>(at - nodes.begin());
        ++count[expected[i]];
      }

      RankDomains from_particles(box, 8, depth, world), from_counts(box, 8, depth, world);
      // Nothing measured (by count), uneven work (rebuilt by weight), even work (kept).
      const double uneven = 1000.0 * (1 + world.rank() * world.rank());
      for (double work : {0.0, uneven, 5.0}) {
        INFO("work " << work);
        const std::vector<std::uint32_t> group = from_particles.assign_groups(top, work, 0, 0);
        from_counts.assign_groups(top, count, work, 0, 0, 0);
        CHECK(group == expected);
        CHECK(from_counts.domains() == from_particles.domains());
        CHECK(from_counts.report().rebuilt == from_particles.report().rebuilt);
        CHECK(from_counts.report().imbalance == from_particles.report().imbalance);
        CHECK(from_counts.domains().groups() == nodes.size());
      }
      if (world.size() > 1) CHECK(from_counts.report().rebuilt == false);   // even work: kept
    }
  }
}
