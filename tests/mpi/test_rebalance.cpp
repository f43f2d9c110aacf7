// Rank domains kept and rebuilt by measured work (domain/rank_domains.hpp): built by count
// at the first update; kept while the ranks report equal work; rebuilt when one rank reports
// three times the others' work, and then that rank's run holds fewer particles (its
// particles weigh more), every particle still on the rank that owns its group.
#include <doctest/doctest.h>

#include <cmath>

#include "core/comm.hpp"
#include "domain/rank_domains.hpp"
#include "support/clustered_particles.hpp"

using orbis::Comm;

TEST_CASE("domains are rebuilt when the measured work is out of balance, and move work off the busy rank") {
  const Comm world = Comm::world();
  const double box = 80.0;
  const std::vector<orbis::Vec3d> all = orbis::test::uniform_particles(3000, box, 11);
  orbis::Particles mine;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (static_cast<int>(i % static_cast<std::size_t>(world.size())) == world.rank()) {
      mine.pos.push_back(all[i]);
      mine.mom.push_back({});
      mine.id.push_back(i + 1);
    }
  // 64 groups of about 47 particles.
  orbis::RankDomains domains(box, 16, 6, world);
  domains.update(mine, 0.0);   // nothing measured yet
  const bool several = world.size() > 1;
  CHECK(domains.report().rebuilt == several);
  const double fair = static_cast<double>(all.size()) / world.size();
  CHECK(std::abs(static_cast<double>(mine.size()) - fair) <= all.size() / 64.0 + 1);

  domains.update(mine, 1.0);   // equal work: kept
  CHECK_FALSE(domains.report().rebuilt);
  CHECK(domains.report().imbalance == doctest::Approx(1.0));

  domains.update(mine, world.rank() == 0 ? 3.0 : 1.0);
  CHECK(domains.report().rebuilt == several);
  if (several) {
    CHECK(domains.report().imbalance == doctest::Approx(3.0 * world.size() / (world.size() + 2.0)));
    // Rank 0's particles weighed 3 per particle against 1: its new run holds fewer.
    if (world.rank() == 0) CHECK(static_cast<double>(mine.size()) < 0.8 * fair);
  }
  CHECK(world.sum<std::uint64_t>(mine.size()) == all.size());
}
