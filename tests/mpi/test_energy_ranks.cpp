// The Layzer-Irvine energy check over several ranks (integrate/energy.hpp) against the same
// check on one rank:
// - the pair sum's rule for pairs between ranks (fmm/pair_energy.hpp): a set split in two
//   "ranks" (own particles and the other's as ghosts, pairs at equal positions included)
//   sums to the whole set's pairs, each once;
// - a W of a clustered set held in rank domains over the ranks, term by term, and the K the
//   run takes from the host engine's reductions: the one-rank values to 1e-10;
// - a short TreePM run (every pair inside r_cut summed directly, double precision, so the
//   runs differ only in the order of their sums): the residuals it logs, at the same PM steps,
//   the one-rank run's to 1e-8; the budget the same bits on every rank, in every rank's file
//   of the checkpoint; a restart from it logs the uninterrupted run's residuals bitwise.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/params.hpp"
#include "domain/rank_domains.hpp"
#include "fmm/pair_energy.hpp"
#include "integrate/checkpoint.hpp"
#include "integrate/energy.hpp"
#include "integrate/simulation.hpp"
#include "integrate/step_engine.hpp"
#include "support/clustered_particles.hpp"
#include "support/mpi_scratch.hpp"

using orbis::Comm;
using orbis::Vec3d;

namespace {

constexpr double kBox = 32.0;

double relative(double x, double reference) { return std::abs(x - reference) / std::abs(reference); }

template <typename T>
bool same_bytes(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

}  // namespace

TEST_CASE("pairs between two ranks count once: own with own, own with ghosts, ties half each") {
  std::vector<Vec3d> all = orbis::test::clustered_particles(10, kBox, 31);
  // Equal positions on both "ranks": such a pair (softened) is taken half by each.
  const std::size_t half = all.size() / 2;
  for (std::size_t k = 0; k < 20; ++k) all[half + k] = all[k];
  orbis::PairPotentialInput in;
  in.box = kBox;
  in.r_s = 1.0;
  in.cut = 4.5;
  in.softening = 0.05;
  in.positions = &all;
  const double whole = orbis::pair_potential_sum_cpu(in);

  // Rank A holds the first half and sees the second as ghosts, rank B the other way round.
  const std::vector<Vec3d> first(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(half)),
      second(all.begin() + static_cast<std::ptrdiff_t>(half), all.end());
  auto share = [&](const std::vector<Vec3d>& own, const std::vector<Vec3d>& ghosts) {
    std::vector<Vec3d> with_ghosts = own;
    with_ghosts.insert(with_ghosts.end(), ghosts.begin(), ghosts.end());
    orbis::PairPotentialInput s = in;
    s.positions = &with_ghosts;
    s.ghosts = ghosts.size();
    return orbis::pair_potential_sum_cpu(s);
  };
  const double a = share(first, second), b = share(second, first);
  CHECK(a + b == doctest::Approx(whole).epsilon(1e-12));
  // What the rule prevents: both ranks taking every pair between them, or neither.
  orbis::PairPotentialInput alone = in;
  alone.positions = &first;
  const double own_a = orbis::pair_potential_sum_cpu(alone);
  alone.positions = &second;
  const double own_b = orbis::pair_potential_sum_cpu(alone);
  const double between = whole - own_a - own_b;
  CHECK(between > 1e-2 * whole);
  CHECK(relative(own_a + own_b + 2 * between, whole) > 1e-2);
  CHECK(orbis::ghost_pair_weight(all[0], all[half]) == 0.5);
}

TEST_CASE("W and K of a clustered set over the ranks: the one-rank values to 1e-10") {
  const Comm world = Comm::world();
  // r_s = 1.2 Mpc/h on the 64^3 mesh, the cut 6.6 Mpc/h: a chaining mesh of 9 cells per side,
  // and ghosts a shell around each domain.
  const orbis::Params params = orbis::Params::parse(
      "[box]\nsize_mpc_h = 32.0\nparticles_per_side = 16\n[gravity]\npm_grid_side = 64\n"
      "pm_mesh_precision = \"double\"\n[gpu]\nbackend = \"cpu\"\n",
      "energy_ranks.toml");
  orbis::Particles all = orbis::test::clustered_particle_set(16, kBox, 99);
  for (std::size_t i = 0; i < all.size(); ++i) {   // momenta of a few hundred km/s, varied
    const double t = static_cast<double>(i);
    all.mom[i] = Vec3d{300 * std::sin(0.7 * t), 200 * std::cos(1.3 * t), 100 * std::sin(2.9 * t + 1)};
  }
  orbis::EnergyCheck one(params, Comm::self());
  REQUIRE(one.enabled());
  const orbis::PotentialEnergy reference = one.potential(all);
  double sum_p2 = 0;
  for (const Vec3d& p : all.mom) sum_p2 += orbis::norm2(p);

  // Every rank a strided share, then into rank domains as the run's engine holds them.
  orbis::Particles mine;
  mine.mass = all.mass;
  for (std::size_t i = static_cast<std::size_t>(world.rank()); i < all.size(); i += world.size()) {
    mine.pos.push_back(all.pos[i]);
    mine.mom.push_back(all.mom[i]);
    mine.id.push_back(all.id[i]);
  }
  orbis::RankDomains domains(kBox, 16, 4, world);
  domains.update(mine, 0.0);
  CHECK(world.sum<std::uint64_t>(mine.size()) == all.size());

  orbis::EnergyCheck many(params, world);
  REQUIRE(many.enabled());
  const orbis::PotentialEnergy w = many.potential(mine);
  MESSAGE(world.size() << " ranks: aW = " << w.total() << " (one rank " << reference.total() << "), mesh "
                       << relative(w.mesh, reference.mesh) << ", pairs " << relative(w.pairs, reference.pairs)
                       << " relative");
  CHECK(reference.total() < 0);
  CHECK(relative(w.mesh, reference.mesh) < 1e-10);
  CHECK(w.mesh == reference.mesh);   // the PM's mesh sum is bitwise the one rank's
  CHECK(relative(w.pairs, reference.pairs) < 1e-10);
  CHECK(relative(w.self, reference.self) < 1e-10);
  CHECK(relative(w.background, reference.background) < 1e-10);
  CHECK(relative(w.total(), reference.total()) < 1e-10);
  CHECK(world.all(same_bytes(w, world.allgather(w)[0])));   // every rank the same bits
  // A second evaluation (the meshes and buffers reused) gives the same bits.
  const orbis::PotentialEnergy again = many.potential(mine);
  CHECK(world.all(same_bytes(w, again)));

  // K as the run takes it: sum |p|^2 = N <p^2> from the host engine's reduction.
  std::unique_ptr<orbis::StepEngine> engine = orbis::make_step_engine(params, world);
  engine->load(mine);
  const double rms = engine->rms_momentum();
  const double ak = orbis::scaled_kinetic_energy(rms * rms * static_cast<double>(all.size()), all.mass, 0.5);
  const double ak_one = orbis::scaled_kinetic_energy(sum_p2, all.mass, 0.5);
  CHECK(relative(ak, ak_one) < 1e-10);
}

namespace {

orbis::Params run_params(const std::string& directory) {
  return orbis::Params::parse(
      "[box]\nsize_mpc_h = 32.0\nparticles_per_side = 16\n[ic]\nz_init = 19.0\nseed = 5\n"
      "[gpu]\nbackend = \"cpu\"\np2p_precision = \"double\"\n"
      "[gravity]\nsolver = \"treepm\"\nrs_over_cell = 1.25\nr_cut_over_rs = 4.5\ntheta = 0.02\n"
      "taylor_order = -1\npm_mesh_precision = \"double\"\n"
      "[time]\nz_final = 3.0\noutput_redshifts = [3.0]\nmax_dln_a = 0.1\neta = 0.0\n"
      "[analysis]\npk = false\nfof = false\nenergy_check_every = 2\n"
      "[checkpoint]\nevery_steps = 5\nevery_minutes = 0\n"
      "[output]\nsnapshots = false\ndirectory = \"" + directory + "\"\n",
      "energy_ranks_run.toml");
}

struct Logged {
  std::vector<orbis::EnergyCheckRecord> checks;
  orbis::EnergyBudget budget;
};

Logged run(const std::string& directory, bool restart, const Comm& comm) {
  orbis::RunOptions options;
  options.restart = restart;
  orbis::Simulation simulation(run_params(directory), options, comm);
  simulation.run();
  return Logged{simulation.energy_checks(), simulation.state().energy};
}

}  // namespace

TEST_CASE("a run's Layzer-Irvine residuals over the ranks: the one-rank run's, kept in every rank's checkpoint") {
  const Comm world = Comm::world();
  const orbis::test::SharedScratchDir dir("energy_ranks", world);
  const std::string one_dir = dir.file("one"), many_dir = dir.file("many");
  Logged one;
  if (world.is_root()) one = run(one_dir, false, Comm::self());
  world.barrier();
  const Logged many = run(many_dir, false, world);

  // The same records on every rank, bit for bit.
  const std::size_t count = many.checks.size();
  CHECK(world.all(world.allgather(count)[0] == count));
  bool same = true;
  for (const auto& r : many.checks) {
    const auto first = world.allgather(r)[0];
    same = same && same_bytes(first, r);
  }
  CHECK(world.all(same));
  CHECK(world.all(same_bytes(world.allgather(many.budget)[0], many.budget)));

  if (world.is_root()) {
    REQUIRE(count == one.checks.size());
    CHECK(count >= 4);
    double worst = 0;
    for (std::size_t k = 0; k < count; ++k) {
      const auto &a = one.checks[k], &b = many.checks[k];
      CHECK(a.pm_steps == b.pm_steps);
      CHECK(a.a == doctest::Approx(b.a).epsilon(1e-12));
      CHECK(relative(b.aw, a.aw) < 1e-8);
      CHECK(relative(b.ak, a.ak) < 1e-8);
      worst = std::max(worst, std::abs(b.residual - a.residual));
    }
    MESSAGE(world.size() << " ranks: " << count << " checks to z = 3, final residual " << many.checks.back().residual
                         << " (one rank " << one.checks.back().residual << "), largest difference " << worst);
    CHECK(std::abs(one.checks.back().residual) > 1e-7);   // a residual, not a zero that equals any other
    CHECK(worst < 1e-8);
  }

  // The newest checkpoint: each rank's file holds the budget, the same bits on every rank.
  const orbis::Checkpoint newest = orbis::read_newest_checkpoint(many_dir, world);
  CHECK(newest.ranks == world.size());
  CHECK(newest.state.energy.started == 1u);
  CHECK(world.all(same_bytes(world.allgather(newest.state.energy)[0], newest.state.energy)));
  // A restart from it logs what the uninterrupted run logged after that step, bitwise.
  const Logged resumed = run(many_dir, true, world);
  REQUIRE(!resumed.checks.empty());
  CHECK(resumed.checks.front().pm_steps > newest.state.pm_steps);
  std::size_t matched = 0;
  for (const auto& r : resumed.checks)
    for (const auto& u : many.checks)
      if (u.pm_steps == r.pm_steps) {
        CHECK(same_bytes(u, r));
        ++matched;
      }
  CHECK(matched == resumed.checks.size());
  CHECK(same_bytes(resumed.budget, many.budget));
}
