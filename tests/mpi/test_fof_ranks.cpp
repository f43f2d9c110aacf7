// Friends-of-friends across ranks without gathering the particles: the groups (membership and
// order) equal the one-rank finder's and a brute-force search's over all the particles, and
// the halo catalogue equals the one-rank catalogue bit for bit. The particles are split over
// the ranks in x slabs (a filament wrapping the periodic boundary crosses every slab: a
// group straddling three domains on 3 ranks), with one rank holding none, and round-robin;
// the particle count (4397) is divided by no rank count of the test.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "analysis/fof_ranks.hpp"
#include "analysis/halo_catalogue.hpp"
#include "core/comm.hpp"
#include "core/params.hpp"
#include "support/clustered_particles.hpp"
#include "support/fof_samples.hpp"

using namespace orbis;

namespace {

constexpr double kBox = 64.0;
constexpr int kFilament = 301;

// The clustered set (4096) plus a filament of 301 particles 0.2 Mpc/h apart along x (the
// linking length is ~0.78 Mpc/h), from x = 40 across the boundary to x = 36; momenta vary.
Particles all_particles() {
  std::vector<Vec3d> pos = test::clustered_particles(16, kBox, 7);
  for (int k = 0; k < kFilament; ++k) pos.push_back({std::fmod(40.0 + 0.2 * k, kBox), 23.3, 47.1});
  Particles p;
  p.resize(pos.size());
  p.pos = pos;
  p.mass = 0.7;
  for (std::size_t i = 0; i < p.size(); ++i) {
    p.id[i] = 3 * i + 5;   // not the index
    p.mom[i] = {std::sin(0.1 * i) * 100, std::cos(0.3 * i) * 50, static_cast<double>(i % 7)};
  }
  return p;
}

// "" when the gathered groups are the reference's (lengths, member IDs and order), else
// the first difference. (A description, not REQUIREs: the other ranks go on to collectives.)
std::string first_difference(const fof::GatheredGroups& got, const fof::FofGroups& ref,
                             const std::vector<std::vector<std::uint64_t>>& brute, const Particles& all) {
  if (got.groups.size() != ref.size()) return "groups: " + std::to_string(got.groups.size()) + " vs " + std::to_string(ref.size());
  if (got.members.size() != ref.members.size()) return "members: " + std::to_string(got.members.size());
  for (std::size_t g = 0; g < ref.size(); ++g) {
    if (got.groups.length[g] != ref.length[g] || ref.length[g] != brute[g].size())
      return "length of group " + std::to_string(g);
    for (std::uint32_t k = 0; k < ref.length[g]; ++k) {
      const std::uint64_t id = got.members.id[got.groups.members[got.groups.offset[g] + k]];
      if (id != all.id[ref.members[ref.offset[g] + k]] || id != brute[g][k])
        return "member " + std::to_string(k) + " of group " + std::to_string(g);
    }
  }
  return "";
}

enum class Split { slabs, empty_rank, round_robin };

// This rank's share: x slabs with uneven cuts (the last rank's empty for Split::empty_rank),
// or every ranks-th particle.
Particles share(const Particles& all, Split split, const Comm& comm) {
  const int ranks = split == Split::empty_rank && comm.size() > 1 ? comm.size() - 1 : comm.size();
  Particles mine;
  mine.mass = all.mass;
  for (std::size_t i = 0; i < all.size(); ++i) {
    int owner = static_cast<int>(i % static_cast<std::size_t>(ranks));
    if (split != Split::round_robin) {
      const double f = all.pos[i].x / kBox;   // cuts at (r / ranks)^1.3 of the box
      owner = 0;
      while (owner + 1 < ranks && f >= std::pow(static_cast<double>(owner + 1) / ranks, 1.3)) ++owner;
    }
    if (owner != comm.rank()) continue;
    mine.pos.push_back(all.pos[i]);
    mine.mom.push_back(all.mom[i]);
    mine.id.push_back(all.id[i]);
    mine.time_bin.push_back(0);
  }
  return mine;
}

const char* kToml = R"(
[box]
size_mpc_h = 64.0
particles_per_side = 16
[cosmology]
omega_m = 0.3
omega_lambda = 0.7
h = 0.7
[analysis]
fof_min_members = 20
)";

}  // namespace

TEST_CASE("FoF across ranks: the one-rank groups, members and order") {
  const Comm world = Comm::world();
  const Particles all = all_particles();
  const std::uint32_t min_members = 20;
  const double link = fof::linking_length(all.size(), kBox, 0.2);
  const fof::CellGrid grid(all.pos, kBox, link);
  const fof::FofGroups ref = fof::find_groups(grid, all, min_members);
  const auto brute = testing::brute_force_fof(all, kBox, link, min_members);
  REQUIRE(ref.size() == brute.size());
  REQUIRE(ref.size() >= 3);
  bool filament_found = false;
  for (const auto& g : brute) filament_found |= g.size() >= kFilament && g.front() <= all.id[4096];
  REQUIRE(filament_found);

  for (Split split : {Split::slabs, Split::empty_rank, Split::round_robin}) {
    INFO(world.size() << " ranks, split " << static_cast<int>(split));
    const Particles mine = share(all, split, world);
    if (split == Split::empty_rank && world.size() > 1 && world.rank() == world.size() - 1) CHECK(mine.size() == 0);
    // The filament lies in every slab.
    if (split == Split::slabs) {
      int filament_here = 0;
      for (std::uint64_t id : mine.id) filament_here += id >= all.id[4096];
      CHECK(world.all(filament_here > 0));
    }
    const fof::GatheredGroups got = fof::find_groups_across_ranks(mine, kBox, link, min_members, world);
    CHECK(got.total_particles == all.size());
    if (world.is_root()) CHECK(first_difference(got, ref, brute, all) == "");
    if (split == Split::slabs && world.size() == 3) CHECK(got.merge_rounds >= 2);
  }
}

TEST_CASE("halo catalogue across ranks: bitwise the one-rank catalogue") {
  const Comm world = Comm::world();
  const Params params = Params::parse(kToml, "test.toml");
  const Particles all = all_particles();
  const double a = 0.6;
  const GroupCatalogue ref = halo::find_haloes(all, kBox, a, params);
  for (Split split : {Split::slabs, Split::empty_rank}) {
    INFO(world.size() << " ranks, split " << static_cast<int>(split));
    const GroupCatalogue got = halo::find_haloes_across_ranks(share(all, split, world), kBox, a, params, world);
    if (!world.is_root()) {
      CHECK(got.size() == 0);
      continue;
    }
    CHECK(got.num_particles == ref.num_particles);
    CHECK(got.particle_mass == ref.particle_mass);
    CHECK(got.linking_length_mpc_h == ref.linking_length_mpc_h);
    CHECK(got.size() == ref.size());
    if (got.size() != ref.size()) continue;   // not REQUIRE: the other ranks go on to collectives
    CHECK(got.len == ref.len);
    CHECK(got.offset == ref.offset);
    CHECK(got.ids == ref.ids);
    CHECK(got.mass == ref.mass);
    CHECK(got.min_pot_id == ref.min_pot_id);
    CHECK(got.vel_disp == ref.vel_disp);
    CHECK(got.m_crit200 == ref.m_crit200);
    CHECK(got.r_crit200 == ref.r_crit200);
    CHECK(got.m_mean200 == ref.m_mean200);
    CHECK(got.r_mean200 == ref.r_mean200);
    int positions_differ = 0;
    for (std::size_t g = 0; g < ref.size(); ++g)
      for (int d = 0; d < 3; ++d)
        positions_differ += got.pos[g][d] != ref.pos[g][d] || got.vel_pec[g][d] != ref.vel_pec[g][d] ||
                            got.cm[g][d] != ref.cm[g][d];
    CHECK(positions_differ == 0);
    // Not vacuous: haloes with an overdensity mass.
    int with_m200 = 0;
    for (double m : ref.m_mean200) with_m200 += m > 0;
    CHECK(with_m200 >= 2);
  }
}
