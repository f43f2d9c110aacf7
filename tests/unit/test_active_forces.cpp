// Forces of an active subset (block time steps): the short-range solver restricted to the
// tree nodes that hold targets gives each target bitwise the force of the whole computation
// on the same tree (built, or refitted after a drift), leaves every other entry untouched,
// and does a fraction of the work (fewer P2P pairs). The host step engine: a step of the
// active bins updates only their forces. CPU P2P, the run's default settings, clustered set.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "core/params.hpp"
#include "core/units.hpp"
#include "fmm/p2p_cpu.hpp"
#include "fmm/short_range.hpp"
#include "integrate/host_engine.hpp"
#include "support/clustered_particles.hpp"

using namespace orbis;

namespace {

constexpr double kBox = 100.0;
constexpr int kSide = 32;

ShortRangeSettings run_settings(double particle_mass) {
  ShortRangeSettings s;
  s.box_mpc_h = kBox;
  s.r_s = 1.2 * kBox / kSide;   // the run's defaults: 2.4 cells of the 2N mesh
  s.r_cut = 5.5 * s.r_s;
  s.softening = 0.025 * kBox / kSide;
  s.g_mass = units::G * particle_mass;
  return s;
}

bool same_bits(const Vec3d& a, const Vec3d& b) { return std::memcmp(&a, &b, sizeof(Vec3d)) == 0; }

// Bins: the particles of a slab (x in [40, 60) Mpc/h) in bin 1 and of a cube inside it in
// bin 2, as the deep bins of a run gather in dense regions; everything else in bin 0.
std::vector<std::uint8_t> region_bins(const std::vector<Vec3d>& pos) {
  std::vector<std::uint8_t> bins(pos.size(), 0);
  for (std::size_t i = 0; i < pos.size(); ++i) {
    const Vec3d& x = pos[i];
    if (x.x >= 40 && x.x < 60) bins[i] = (x.y >= 30 && x.y < 50 && x.z >= 60 && x.z < 80) ? 2 : 1;
  }
  return bins;
}

// Targets' forces against the full computation's; the others must keep the sentinel.
void check_subset(ShortRangeSolver& solver, P2PEvaluator& p2p, const std::vector<Vec3d>& pos,
                  const std::vector<std::uint8_t>& bins, int min_bin, bool refit, const std::vector<Vec3d>& full,
                  double full_pairs) {
  const Vec3d sentinel{1e300, -2e300, 3e300};
  std::vector<Vec3d> acc(pos.size(), sentinel);
  solver.begin(pos, p2p, ShortRangeTargets{&bins, min_bin, refit});
  const ShortRangeStats st = solver.end(acc);
  std::size_t targets = 0, wrong = 0, touched = 0;
  for (std::size_t i = 0; i < pos.size(); ++i) {
    if (bins[i] >= min_bin) {
      ++targets;
      wrong += !same_bits(acc[i], full[i]);
    } else {
      touched += !same_bits(acc[i], sentinel);
    }
  }
  MESSAGE("min_bin " << min_bin << std::string(refit ? " (refitted tree)" : " (built tree)") << ": " << targets << " of "
                     << pos.size() << " targets, P2P pairs " << st.p2p_interactions << " of " << full_pairs);
  CHECK(targets > 0);
  CHECK(wrong == 0);
  CHECK(touched == 0);
  // The restriction does a share of the work not much above the targets' share.
  const double share = static_cast<double>(targets) / static_cast<double>(pos.size());
  CHECK(st.p2p_interactions < 2 * share * full_pairs);
}

}  // namespace

TEST_CASE("short-range forces of an active subset are bitwise the full computation's") {
  const Particles set = test::clustered_particle_set(kSide, kBox, 2024);
  const std::vector<std::uint8_t> bins = region_bins(set.pos);
  // The tiled kernel (which skips the other particles of a target leaf) and the generic loop.
  for (const bool tiled : {true, false}) {
    CAPTURE(tiled);
    ShortRangeSolver solver(run_settings(set.mass));
    CpuP2PEvaluator p2p(CpuP2POptions{-1, tiled});
    std::vector<Vec3d> pos = set.pos;
    std::vector<Vec3d> full;
    // On a newly built tree.
    double pairs = solver.compute(pos, p2p, full).p2p_interactions;
    check_subset(solver, p2p, pos, bins, 1, false, full, pairs);
    check_subset(solver, p2p, pos, bins, 2, false, full, pairs);
    // On a refitted tree, after a drift.
    std::mt19937_64 rng(5);
    std::normal_distribution<double> normal;
    for (Vec3d& x : pos)
      for (int d = 0; d < 3; ++d) x[d] = periodic_wrap_position(x[d] + 0.05 * normal(rng), kBox);
    solver.begin(pos, p2p, ShortRangeTargets{nullptr, 0, true});
    pairs = solver.end(full).p2p_interactions;
    check_subset(solver, p2p, pos, bins, 1, true, full, pairs);
    check_subset(solver, p2p, pos, bins, 2, true, full, pairs);
  }
}

TEST_CASE("a refit to unchanged positions gives back the built tree, bit for bit") {
  const std::vector<Vec3d> pos = test::clustered_particles(kSide, kBox, 77);
  OrbTree built, refitted;
  built.build(pos, 32);
  refitted.build(test::clustered_particles(kSide, kBox, 77), 32);
  std::vector<Vec3d> moved = pos;
  for (Vec3d& x : moved) x.x = periodic_wrap_position(x.x + 0.3, kBox);
  refitted.refit(moved);
  refitted.refit(pos);
  REQUIRE(built.nodes().size() == refitted.nodes().size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < built.nodes().size(); ++i) {
    const TreeNode &a = built.nodes()[i], &b = refitted.nodes()[i];
    differ += !(same_bits(a.lo, b.lo) && same_bits(a.hi, b.hi) && same_bits(a.centre, b.centre) && a.radius == b.radius);
  }
  CHECK(differ == 0);
  for (std::size_t l = 0; l < built.leaves().size(); ++l) CHECK(same_bits(built.leaves()[l].centre, refitted.leaves()[l].centre));
}

// The refit finds each internal node's radius by a branch and bound over its children's
// balls (OrbTree::farthest2): it must be the maximum over all the members all the same.
TEST_CASE("a refit's radii are the exact maxima over each node's members, after a shear and random moves") {
  std::vector<Vec3d> pos = test::clustered_particles(kSide, kBox, 77);
  OrbTree tree;
  tree.build(pos, 32);
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> kick(-0.5, 0.5);
  for (Vec3d& x : pos) {
    x.x = periodic_wrap_position(x.x + 0.05 * x.y + kick(rng), kBox);
    x.y = periodic_wrap_position(x.y + kick(rng), kBox);
  }
  tree.refit(pos);
  std::size_t differ = 0;
  for (const TreeNode& node : tree.nodes()) {
    double r2 = 0;
    for (std::uint32_t t = node.first; t < node.first + node.count; ++t)
      r2 = std::max(r2, norm2(tree.positions()[t] - node.centre));
    differ += node.radius != std::sqrt(r2);
  }
  CHECK(differ == 0);
}

TEST_CASE("host step engine: a step of the active bins updates only their forces") {
  const Params params = Params::parse("[box]\nsize_mpc_h = 100.0\nparticles_per_side = 32\n[gpu]\nbackend = \"cpu\"\n",
                                      "active.toml");
  HostStepEngine engine(params);
  Particles p = test::clustered_particle_set(kSide, kBox, 2024);
  p.mom.resize(p.size());   // a shear, so that the particles move relative to each other
  for (std::size_t i = 0; i < p.size(); ++i) p.mom[i] = Vec3d{40 * std::sin(0.3 * p.pos[i].y), -25, 10};
  p.time_bin = region_bins(p.pos);
  engine.load(p);
  ForceStats stats;
  engine.compute_forces(true, 0, stats);
  const std::vector<Vec3d> before = engine.accelerations();
  engine.drift(1e-3);
  engine.compute_forces(false, 1, stats);
  const std::vector<Vec3d>& after = engine.accelerations();
  std::size_t kept = 0, changed = 0, inactive = 0, active = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p.time_bin[i] >= 1) ++active, changed += !same_bits(after[i], before[i]);
    else ++inactive, kept += same_bits(after[i], before[i]);
  }
  CHECK(kept == inactive);
  CHECK(changed == active);
}
