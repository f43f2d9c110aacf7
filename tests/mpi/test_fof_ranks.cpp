// Friends-of-friends across ranks without gathering the particles: the groups (membership and
// order) equal the one-rank finder's and a brute-force search's over all the particles, and
// the halo catalogue equals the one-rank catalogue bit for bit. The particles are split over
// the ranks in x slabs (a filament wrapping the periodic boundary crosses every slab: a
// group straddling three domains on 3 ranks), with one rank holding none, and round-robin;
// the particle count (4397) is divided by no rank count of the test (tests/support/
// fof_rank_sets.hpp). The local linking step is pluggable (fof::LocalLinker: the CUDA engine
// links on the GPU, tests/mpi/test_fof_ranks_cuda): with a brute-force linker, with the links
// of some ranks left to the host, from positions drifted just outside the box (wrapped as
// they are linked), from links made before the merge on another communicator (the output's
// thread's), and through engine_fof_links with an engine that links as the CUDA one does,
// the groups and catalogue are the one-rank host finder's; malformed links stop every rank.
// The groups' member properties, each computed on one rank (moved to balance the work), are
// the one-rank member properties bit for bit.
#include <doctest/doctest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "analysis/fof_ghost_cells.hpp"
#include "analysis/fof_ranks.hpp"
#include "analysis/halo_catalogue.hpp"
#include "analysis/halo_members_ranks.hpp"
#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/params.hpp"
#include "integrate/outputs.hpp"
#include "integrate/step_engine.hpp"
#include "support/fof_labels.hpp"
#include "support/fof_rank_sets.hpp"
#include "support/fof_samples.hpp"
#include "support/periodic_distance.hpp"

using namespace orbis;

namespace {

using testing::kFofBox;
using testing::Split;
constexpr double kBox = kFofBox;
constexpr int kFilament = testing::kFofFilament;

Particles all_particles() { return testing::fof_rank_set(); }
Particles share(const Particles& all, Split split, const Comm& comm) { return testing::fof_share(all, split, comm); }

using testing::first_difference;

const char* kToml = R"(
[box]
size_mpc_h = 64.0
particles_per_side = 16
[cosmology]
omega_m = 0.3
omega_lambda = 0.7
h = 0.7
[analysis]
fof = true
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

TEST_CASE("member properties across ranks: each group's once, where the work balances, as one rank's") {
  const Comm world = Comm::world();
  const Particles all = all_particles();
  const std::uint32_t min_members = 20;
  const double link = fof::linking_length(all.size(), kBox, 0.2), a = 0.6, softening = 0.1;
  const fof::CellGrid grid(all.pos, kBox, link);
  const fof::FofGroups ref_groups = fof::find_groups(grid, all, min_members);
  const std::vector<halo::HaloProperties> ref = halo::member_properties(all, ref_groups, kBox, a, softening);
  // With the last rank empty, it computes groups that lie elsewhere (their members travel).
  for (Split split : {Split::slabs, Split::empty_rank, Split::round_robin}) {
    INFO(world.size() << " ranks, split " << static_cast<int>(split));
    const Particles mine = share(all, split, world);
    const fof::RankGroups groups =
        fof::merge_groups(mine, fof::link_locally(mine, kBox, link, world), min_members, world);
    const halo::MemberHaloes got = halo::member_haloes_across_ranks(mine, groups, kBox, a, softening, link, world);
    if (split == Split::empty_rank && world.size() > 1) CHECK(got.moved > 0);
    if (!world.is_root()) continue;
    CHECK(got.groups.length == ref_groups.length);
    CHECK(got.groups.offset == ref_groups.offset);
    CHECK(got.ids.size() == ref_groups.members.size());
    CHECK(got.haloes.size() == ref.size());
    if (got.ids.size() != ref_groups.members.size() || got.haloes.size() != ref.size()) continue;   // not REQUIRE
    int ids_differ = 0, haloes_differ = 0;
    for (std::size_t k = 0; k < got.ids.size(); ++k) ids_differ += got.ids[k] != all.id[ref_groups.members[k]];
    for (std::size_t g = 0; g < ref.size(); ++g) {
      const halo::HaloProperties &x = got.haloes[g], &y = ref[g];
      haloes_differ += x.len != y.len || x.mass != y.mass || x.min_pot_id != y.min_pot_id || x.vel_disp != y.vel_disp;
      for (int d = 0; d < 3; ++d)
        haloes_differ += x.pos[d] != y.pos[d] || x.cm[d] != y.cm[d] || x.vel_pec[d] != y.vel_pec[d];
    }
    CHECK(ids_differ == 0);
    CHECK(haloes_differ == 0);
  }
}

TEST_CASE("FoF across ranks: the local links by a given linker, from positions outside the box") {
  const Comm world = Comm::world();
  const std::uint32_t min_members = 20;
  // Drifted out of the box near the faces, as a rank's particles between wraps; the reference
  // links them where they wrap to.
  const Particles drifted = testing::drifted_out_of_box(all_particles());
  const Particles inside = testing::wrapped_into_box(drifted);
  int outside = 0;
  for (const Vec3d& x : drifted.pos)
    outside += !(x.x >= 0 && x.x < kBox && x.y >= 0 && x.y < kBox && x.z >= 0 && x.z < kBox);
  REQUIRE(outside > 100);
  const double link = fof::linking_length(inside.size(), kBox, 0.2);
  const fof::FofGroups ref = fof::find_groups(fof::CellGrid(inside.pos, kBox, link), inside, min_members);
  const auto brute = testing::brute_force_fof(inside, kBox, link, min_members);
  REQUIRE(ref.size() == brute.size());
  REQUIRE(ref.size() >= 3);

  for (Split split : {Split::slabs, Split::empty_rank, Split::round_robin}) {
    INFO(world.size() << " ranks, split " << static_cast<int>(split));
    const Particles mine = share(drifted, split, world);
    // The host linker, then one independent of the grid.
    const fof::LocalLinker linkers[] = {fof::link_on_host, testing::brute_force_linker};
    for (const fof::LocalLinker& linker : linkers) {
      const fof::GatheredGroups got = fof::find_groups_across_ranks(mine, kBox, link, min_members, world, 0, linker);
      if (!world.is_root()) continue;
      CHECK(first_difference(got, ref, brute, inside) == "");
      CHECK(testing::member_position_difference(got, inside) == "");
    }
    // Linked on the odd ranks only: the others' links are left empty (an engine without the
    // memory) and gather_groups links them on the host.
    const auto odd_ranks = [&](const auto& own, const auto& ghosts, double b, double l) {
      return world.rank() % 2 ? testing::brute_force_linker(own, ghosts, b, l) : std::vector<std::uint32_t>{};
    };
    const fof::LocalLinks links = fof::link_locally(mine, kBox, link, world, odd_ranks);
    CHECK(links.label.size() == (world.rank() % 2 ? mine.size() + links.ghosts.size() : 0));
    CHECK(links.ghosts.size() == links.ghosts.id.size());
    if (world.size() > 1 && split != Split::empty_rank) CHECK(world.sum<std::uint64_t>(links.ghosts.size()) > 0);
    const fof::GatheredGroups got = fof::gather_groups(mine, links, min_members, world);
    if (world.is_root()) CHECK(first_difference(got, ref, brute, inside) == "");
  }
}

TEST_CASE("FoF ghosts: every other rank's particle within l of this rank's, few beyond, in their owners' order") {
  const Comm world = Comm::world();
  // Drifted out of the box near the faces (the import wraps them), so that pairs across the
  // periodic boundary count too; the reference distances between the wrapped positions.
  const Particles drifted = testing::drifted_out_of_box(all_particles());
  const Particles inside = testing::wrapped_into_box(drifted);
  const double link = fof::linking_length(inside.size(), kBox, 0.2);
  for (Split split : {Split::slabs, Split::empty_rank, Split::round_robin}) {
    INFO(world.size() << " ranks, split " << static_cast<int>(split));
    const Particles mine = share(drifted, split, world);
    const fof::Ghosts ghosts = fof::import_ghosts(mine, kBox, link, world);
    REQUIRE(ghosts.id.size() == ghosts.size());
    REQUIRE(ghosts.from.size() == static_cast<std::size_t>(world.size()));
    // Brute force: the other ranks' particles within l of one of this rank's (by ID).
    const std::vector<std::uint64_t> everyone = world.allgatherv(mine.id);
    std::vector<char> here(inside.size(), 0);
    for (std::uint64_t id : mine.id) here[testing::fof_rank_index(id)] = 1;
    std::vector<char> needed(inside.size(), 0);
    for (std::uint64_t id : everyone) {
      const std::size_t j = testing::fof_rank_index(id);
      if (here[j]) continue;
      for (std::uint64_t own : mine.id)
        if (test::periodic_distance2(inside.pos[j], inside.pos[testing::fof_rank_index(own)], kBox) <= link * link) {
          needed[j] = 1;
          break;
        }
    }
    std::vector<char> got(inside.size(), 0);
    int duplicates = 0, own_ones = 0, moved = 0, far = 0;
    // Each ghost arrives wrapped into the box, at the position its owner links it at.
    for (std::size_t k = 0; k < ghosts.size(); ++k) {
      const std::size_t j = testing::fof_rank_index(ghosts.id[k]);
      duplicates += got[j];
      got[j] = 1;
      own_ones += here[j];
      const Vec3d expected = fof::linked_position(drifted.pos[j], kBox);
      moved += ghosts.pos[k].x != expected.x || ghosts.pos[k].y != expected.y || ghosts.pos[k].z != expected.z;
    }
    int missing = 0, needed_count = 0;
    for (std::size_t j = 0; j < inside.size(); ++j) {
      needed_count += needed[j];
      missing += needed[j] && !got[j];
    }
    // Few beyond: every ghost within l plus a cell diagonal (fof_ghost_cells.hpp) of this rank's particles.
    const fof::GhostCells cells(kBox, link);
    const double reach = link + std::sqrt(3.0) * kBox / static_cast<double>(cells.side());
    for (std::size_t k = 0; k < ghosts.size(); ++k) {
      bool close = false;
      for (std::uint64_t own : mine.id)
        close = close || test::periodic_distance2(ghosts.pos[k], inside.pos[testing::fof_rank_index(own)], kBox) <=
                             reach * reach * (1 + 1e-12);
      far += !close;
    }
    CHECK(missing == 0);
    CHECK(duplicates == 0);
    CHECK(own_ones == 0);
    CHECK(moved == 0);
    CHECK(far == 0);
    if (world.size() > 1 && split != Split::empty_rank) CHECK(world.sum(needed_count) > 0);
    // Each source rank's ghosts in its particles' order, as `exported` lists them there.
    const std::vector<std::size_t> exported_to = world.alltoall_counts(ghosts.from, ghosts.size());
    CHECK(Comm::total(exported_to) == ghosts.exported.size());
    int unordered = 0;
    for (std::size_t r = 0, at = 0; r < exported_to.size() && at + exported_to[r] <= ghosts.exported.size();
         at += exported_to[r], ++r)
      for (std::size_t k = at + 1; k < at + exported_to[r]; ++k) unordered += ghosts.exported[k] <= ghosts.exported[k - 1];
    CHECK(unordered == 0);
  }
}

TEST_CASE("FoF across ranks: malformed local links stop every rank with an error") {
  const Comm world = Comm::world();
  const Particles mine = share(all_particles(), Split::slabs, world);
  const double link = fof::linking_length(4397, kBox, 0.2);
  // The last rank's linker answers a label above its particle's index; every rank throws.
  const auto bad = [&](const auto& own, const auto& ghosts, double b, double l) {
    std::vector<std::uint32_t> label = fof::link_on_host(own, ghosts, b, l);
    if (world.rank() == world.size() - 1 && label.size() > 1) label[0] = 1;
    return label;
  };
  CHECK_THROWS_AS(fof::find_groups_across_ranks(mine, kBox, link, 20, world, 0, bad), Error);
}

TEST_CASE("halo catalogue across ranks: from links made beforehand, merged on the outputs' communicator") {
  const Comm world = Comm::world();
  const Comm outputs = world.split(0, world.rank());   // as the run's writer threads have
  const Params params = Params::parse(kToml, "test.toml");
  const Particles all = all_particles();
  const double a = 0.6;
  const GroupCatalogue ref = halo::find_haloes(all, kBox, a, params);
  const double link = fof::linking_length(all.size(), kBox, 0.2);
  for (Split split : {Split::slabs, Split::round_robin}) {
    INFO(world.size() << " ranks, split " << static_cast<int>(split));
    const Particles mine = share(all, split, world);
    const fof::LocalLinks links = fof::link_locally(mine, kBox, link, world, testing::brute_force_linker);
    const GroupCatalogue got = halo::find_haloes_across_ranks(mine, kBox, a, params, outputs, &links);
    if (world.is_root()) CHECK(testing::catalogue_difference(got, ref) == "");
    else CHECK(got.size() == 0);
  }
}

namespace {

// A step engine that links its particles and the output's ghosts "where they are" as the CUDA
// engine does over ranks (here with the brute-force linker), or says it cannot.
class LinkingEngine : public StepEngine {
 public:
  LinkingEngine(Particles particles, bool links, bool has_memory)
      : particles_(std::move(particles)), links_(links), has_memory_(has_memory) {}
  std::string describe() const override { return "linking test engine"; }
  double softening() const override { return 0; }
  bool has_short_range() const override { return false; }
  void load(Particles particles) override { particles_ = std::move(particles); }
  const Particles& particles() override { return particles_; }
  const std::vector<Vec3d>& accelerations() override { return acc_; }
  void compute_forces(bool, int, ForceStats&) override {}
  void kick(const KickPlan&) override {}
  void drift(double) override {}
  double max_acceleration() override { return 0; }
  double rms_momentum() override { return 0; }
  BinCounts assign_bins(const BinRule&) override { return {}; }
  bool links_fof_with_ghosts() const override { return links_; }
  std::optional<std::vector<std::uint32_t>> fof_labels_with_ghosts(const std::vector<Vec3d>& ghosts,
                                                                   double link) override {
    ++calls;
    if (!has_memory_) return std::nullopt;
    return testing::brute_force_linker(particles_.pos, ghosts, kBox, link);
  }
  int calls = 0;

 private:
  Particles particles_;
  std::vector<Vec3d> acc_;
  bool links_, has_memory_;
};

}  // namespace

TEST_CASE("engine_fof_links over ranks: the engine's links make the one-rank catalogue; a rank without memory "
          "links on the host; an engine that cannot link anywhere leaves it all to the output") {
  const Comm world = Comm::world();
  const Comm outputs = world.split(0, world.rank());
  const Params params = Params::parse(kToml, "test.toml");
  const Particles all = all_particles();
  const double a = 0.6;
  const GroupCatalogue ref = halo::find_haloes(all, kBox, a, params);
  const Particles mine = share(all, Split::slabs, world);
  for (int short_rank : {-1, 0}) {   // the rank whose engine lacks the memory (-1: none)
    LinkingEngine engine(mine, true, world.rank() != short_rank);
    const std::optional<fof::LocalLinks> links = engine_fof_links(params, engine, world);
    if (world.size() == 1) {   // one rank asks StepEngine::fof_labels, which this engine does not give
      CHECK(!links);
      continue;
    }
    REQUIRE(links.has_value());   // the same on every rank
    CHECK(engine.calls == 1);
    CHECK(links->label.empty() == (world.rank() == short_rank));
    if (!links->label.empty()) CHECK(links->label.size() == mine.size() + links->ghosts.size());
    CHECK(links->link_mpc_h == fof::linking_length(all.size(), kBox, 0.2));
    const GroupCatalogue got = halo::find_haloes_across_ranks(mine, kBox, a, params, outputs, &*links);
    if (world.is_root()) CHECK(testing::catalogue_difference(got, ref) == "");
  }
  // An engine that cannot link on one rank: no rank imports ghosts or links.
  LinkingEngine partial(mine, world.rank() != world.size() - 1, true);
  CHECK(!engine_fof_links(params, partial, world));
  CHECK(partial.calls == 0);
}
