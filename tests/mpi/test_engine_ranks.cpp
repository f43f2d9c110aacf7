// The TreePM host step engine across ranks (domains of the global ORB tree's top nodes,
// whole nodes as ghosts, FFTW-MPI PM) against the same engine on one rank (Comm::self(),
// every particle), matched by particle id: the forces of the first step, then after a kick
// and a drift the forces of the next PM step (particles migrate, the domains are rebuilt by
// measured work), and the global reductions of the step criteria (largest acceleration, rms
// momentum, bin counts); then block time steps (sub-steps on the refitted forest, a ghost
// re-choice after a large drift, the next PM step).
//
// Each rank's tree is a forest of the serial tree's depth-d subtrees and the walk splits
// every node above depth d, so with the default FMM (theta, multipole and Taylor orders) the
// two runs compute the same sums in another order. With double P2P and the double PM mesh
// they agree to 1e-9 (issue #17 asks 1e-6; measured 2e-14 first, 7e-13 after a step, on 2
// and 3 ranks), through sub-steps and ghost re-choices too; with the float P2P and mesh to
// ~1e-5 (the float mesh alone: 5e-6, its FFT's rounding differs between the slab and the
// serial transform). Also with every pair summed directly.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/comm.hpp"
#include "core/params.hpp"
#include "integrate/host_engine.hpp"
#include "support/clustered_particles.hpp"
#include "support/rank_shares.hpp"

using orbis::Comm;
using orbis::Vec3d;

namespace {

orbis::Params engine_params(const std::string& gravity, const std::string& gpu) {
  return orbis::Params::parse(
      "[box]\nsize_mpc_h = 100.0\nparticles_per_side = 16\n[gpu]\nbackend = \"cpu\"\n" + gpu +
          "[gravity]\nsolver = \"treepm\"\nrs_over_cell = 1.25\nr_cut_over_rs = 4.5\n" + gravity,
      "engine_ranks.toml");
}

// Relative force differences |g - g_ref| / |g_ref| of this rank's particles (by id), over all
// ranks: the largest and the 99th percentile.
struct Differences {
  double max = 0, p99 = 0;
};
Differences differences(orbis::HostStepEngine& engine, orbis::HostStepEngine& reference, const Comm& comm) {
  const orbis::Particles& p = engine.particles();
  const std::vector<Vec3d>& g = engine.accelerations();
  const std::vector<Vec3d>& ref = reference.accelerations();
  const orbis::Particles& rp = reference.particles();
  std::vector<double> rel;
  for (std::size_t q = 0; q < p.size(); ++q) {
    const auto it = std::lower_bound(rp.id.begin(), rp.id.end(), p.id[q]);
    const std::size_t i = static_cast<std::size_t>(it - rp.id.begin());
    rel.push_back(orbis::norm(g[q] - ref[i]) / orbis::norm(ref[i]));
  }
  std::vector<double> all = comm.allgatherv(rel);
  std::sort(all.begin(), all.end());
  Differences d;
  if (!all.empty()) {
    d.max = all.back();
    d.p99 = all[static_cast<std::size_t>(0.99 * static_cast<double>(all.size() - 1))];
  }
  return d;
}

}  // namespace

TEST_CASE("TreePM forces, steps and reductions across ranks equal the one-rank engine's") {
  const Comm world = Comm::world();
  orbis::Particles all = orbis::test::clustered_particle_set(16, 100.0, 99);
  for (std::size_t i = 0; i < all.size(); ++i) all.mom[i] = Vec3d{std::sin(0.1 * i), std::cos(0.3 * i), 0.2} * 300.0;
  struct Case {
    const char* name;
    std::string gravity, gpu;
    double max_bar, p99_bar;
  };
  const Case cases[] = {
      {"direct sums", "theta = 0.02\ntaylor_order = -1\npm_mesh_precision = \"double\"\ntop_node_particles = 64\n",
       "p2p_precision = \"double\"\n", 1e-9, 1e-9},
      // The default FMM, d = 5 (32 top nodes of 128 particles).
      {"default FMM, double P2P", "top_node_particles = 64\npm_mesh_precision = \"double\"\n",
       "p2p_precision = \"double\"\n", 1e-9, 1e-9},
      {"default FMM", "top_node_particles = 64\n", "", 1e-4, 1e-5},
  };
  for (const Case& c : cases) {
    INFO(std::string(c.name) << ", " << world.size() << " ranks");
    const orbis::Params params = engine_params(c.gravity, c.gpu);
    orbis::HostStepEngine reference(params, Comm::self());
    orbis::HostStepEngine engine(params, world);
    // Particle i starts on rank (5 i) mod P, the last rank with none when there are several.
    const int holders = world.size() > 1 ? world.size() - 1 : 1;
    orbis::Particles mine;
    mine.mass = all.mass;
    for (std::size_t i = 0; i < all.size(); ++i)
      if (static_cast<int>((5 * i) % static_cast<std::size_t>(holders)) == world.rank()) {
        mine.pos.push_back(all.pos[i]);
        mine.mom.push_back(all.mom[i]);
        mine.id.push_back(all.id[i]);
      }
    reference.load(all);
    engine.load(mine);
    orbis::ForceStats stats, ref_stats;
    reference.compute_forces(true, 0, ref_stats);
    engine.compute_forces(true, 0, stats);
    CHECK(world.sum<std::uint64_t>(engine.particles().size()) == all.size());
    const Differences first = differences(engine, reference, world);
    MESSAGE(std::string(c.name) << ", " << world.size() << " ranks: first forces max " << first.max << ", p99 " << first.p99);
    CHECK(first.max < c.max_bar);
    CHECK(first.p99 < c.p99_bar);
    CHECK(engine.max_acceleration() == doctest::Approx(reference.max_acceleration()).epsilon(c.p99_bar));
    CHECK(engine.rms_momentum() == doctest::Approx(reference.rms_momentum()).epsilon(1e-13));

    // A kick and a drift far enough to move particles across domains, and the next PM step.
    orbis::KickPlan kick;
    kick.long_range = 2e-3;
    kick.min_active_bin = 0;
    kick.short_range.fill(2e-3);
    for (orbis::HostStepEngine* e : {&reference, &engine}) {
      e->kick(kick);
      e->drift(4e-3);
      orbis::ForceStats s;
      e->compute_forces(true, 0, s);
    }
    const Differences second = differences(engine, reference, world);
    MESSAGE(std::string(c.name) << ", " << world.size() << " ranks: second forces max " << second.max << ", p99 " << second.p99);
    CHECK(second.max < c.max_bar);
    CHECK(second.p99 < c.p99_bar);
    CHECK(world.sum<std::uint64_t>(engine.particles().size()) == all.size());
    CHECK(engine.rms_momentum() == doctest::Approx(reference.rms_momentum()).epsilon(std::max(1e-12, c.p99_bar)));
    if (c.max_bar <= 1e-6) {
      // The same forces, so the same bins: each bin's count summed over the ranks.
      orbis::BinRule rule;
      rule.max_bin = 6;
      rule.acc_bin0 = 0.3 * reference.max_acceleration();
      CHECK(engine.assign_bins(rule) == reference.assign_bins(rule));
    }
  }
}

TEST_CASE("block time steps across ranks: sub-steps on the refitted forest and a ghost re-choice keep the one-rank forces") {
  const Comm world = Comm::world();
  orbis::Particles all = orbis::test::clustered_particle_set(16, 100.0, 99);
  all.time_bin.resize(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    all.mom[i] = Vec3d{std::sin(0.1 * i), std::cos(0.3 * i), 0.2} * 300.0;
    all.time_bin[i] = static_cast<std::uint8_t>(all.id[i] % 3);
  }
  const orbis::Params params =
      engine_params("top_node_particles = 64\npm_mesh_precision = \"double\"\n", "p2p_precision = \"double\"\n");
  orbis::HostStepEngine reference(params, Comm::self());
  orbis::HostStepEngine engine(params, world);
  const orbis::Particles mine = orbis::test::strided_share(all, world);
  reference.load(all);
  engine.load(mine);
  // (drift factor, long range, lowest active bin): a PM step; sub-steps after small drifts
  // (the ghosts refreshed, the forest refitted, unless a particle crossed a face of the box:
  // its group's box then spans the box, and the ghosts are chosen again); one after a drift
  // of ~4.8 Mpc/h, beyond r_cut kGhostMargin / (2 sqrt 3) = 2.6 Mpc/h (the ghosts chosen
  // again from the nodes' current boxes); the next PM step.
  struct Step {
    double drift;
    bool long_range;
    int min_bin;
  };
  const Step steps[] = {{0, true, 0}, {1e-4, false, 2}, {1e-4, false, 1}, {1.6e-2, false, 2}, {1e-4, false, 1},
                        {1e-4, true, 0}};
  int k = 0;
  bool crossed_face = false;
  for (const Step& step : steps) {
    const std::vector<Vec3d> before = engine.particles().pos;
    for (orbis::HostStepEngine* e : {&reference, &engine}) {
      if (step.drift > 0) e->drift(step.drift);
      if (e == &engine) {   // did a particle cross a face (a coordinate jump of over half the box)?
        int crossed = 0;
        for (std::size_t i = 0; i < before.size(); ++i)
          for (int a = 0; a < 3; ++a) crossed |= std::abs(e->particles().pos[i][a] - before[i][a]) > 50.0 ? 1 : 0;
        crossed_face = world.max(crossed) != 0;
      }
      orbis::ForceStats s;
      e->compute_forces(step.long_range, step.min_bin, s);
    }
    const Differences d = differences(engine, reference, world);
    MESSAGE("step " << k << " (min bin " << step.min_bin << "), " << world.size() << " ranks: forces max " << d.max
                    << ", ghosts chosen again " << engine.domains().report().rechosen << ", a face crossed "
                    << crossed_face);
    CHECK(d.max < 1e-9);
    if (world.size() > 1 && k == 3) CHECK(engine.domains().report().rechosen);
    if (world.size() > 1 && (k == 1 || k == 2 || k == 4) && !crossed_face)
      CHECK_FALSE(engine.domains().report().rechosen);
    ++k;
  }
}
