// Isolated systems of individual masses (Particles::masses: a galaxy's halo, bulge and disc
// particles weigh differently): the tree gravity of vacuum boundaries with each source weighed
// by its mass (P2P, the multipoles, the leaf-cell P2L) against the exact direct double sum
// with the masses (tests/support/vacuum_scenes), on a Hernquist halo with a Plummer bulge of
// ten times lighter particles at its centre, 4096 particles:
//  - the FMM's error at theta 0.5 and 0.4, p 4 and 6, in leaves of 8 (so that M2L and the
//    leaf-cell pairs carry the far field), and with the CPU's production P2P; the same
//    positions with every particle at the mean mass miss by ~100x more (the masses matter);
//  - direct summation (theta = 0) equals the brute force to float precision;
//  - weights of 1 give the bits of no weights at all, in the tiled and the generic P2P loops;
//  - momentum: sum_i m_i a_i = 0 to rounding (mutual M2L and P2P with the masses);
//  - the conservation diagnostics (K, P, L, W) against sums written out here;
//  - bad input: weights with periodic boundaries, the wrong count, an evaluator without them.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "core/error.hpp"
#include "core/particles.hpp"
#include "fmm/p2p_cpu.hpp"
#include "fmm/p2p_kernel.hpp"
#include "fmm/short_range.hpp"
#include "integrate/conservation.hpp"
#include "support/force_difference.hpp"
#include "support/reference_p2p.hpp"
#include "support/vacuum_scenes.hpp"

using namespace orbis;

namespace {

constexpr std::size_t kN = 4096;

ShortRangeSettings vacuum_settings(double g_mass, double theta, int order) {
  ShortRangeSettings s;
  s.boundary = Boundary::vacuum;
  s.theta = theta;
  s.multipole_order = order;
  s.max_leaf = 8;
  s.softening = 0;
  s.g_mass = g_mass;
  return s;
}

using test::ErrorStats;
using test::relative_errors;

struct Fixture {
  test::VacuumScene scene;
  std::vector<double> weights;   // masses / mean
  std::vector<Vec3d> exact;
  Fixture() : scene(test::halo_bulge_scene(kN, 21)) {
    for (double m : scene.masses) weights.push_back(m / scene.particle_mass);
    std::vector<std::size_t> all(kN);
    std::iota(all.begin(), all.end(), std::size_t{0});
    exact = test::direct_newtonian(scene, all, 0.0);
  }
};
const Fixture& halo_bulge() {
  static const Fixture f;
  return f;
}

}  // namespace

TEST_CASE("vacuum masses: FMM forces against the weighted direct sum (halo and bulge, masses 10:1)") {
  const Fixture& fx = halo_bulge();
  std::printf("vacuum FMM with individual masses vs exact direct sum, %zu particles (%s), leaves of 8\n", kN,
              fx.scene.name);
  std::printf("  %5s %2s %-13s %10s %10s %10s\n", "theta", "p", "P2P", "median", "99%", "max");
  struct Case {
    double theta;
    int p;
    double p99_bar;
  };
  for (const Case c : {Case{0.5, 4, 1e-2}, Case{0.4, 6, 1e-3}}) {
    for (bool exact_p2p : {false, true}) {
      ShortRangeSolver solver(vacuum_settings(fx.scene.particle_mass, c.theta, c.p));
      CpuP2PEvaluator cpu;
      test::ReferenceP2P reference;
      std::vector<Vec3d> acc;
      const ShortRangeStats st = exact_p2p ? solver.compute(fx.scene.pos, reference, acc, &fx.weights)
                                           : solver.compute(fx.scene.pos, cpu, acc, &fx.weights);
      const ErrorStats e = relative_errors(acc, fx.exact);
      std::printf("  %5.2f %2d %-13s %10.2e %10.2e %10.2e\n", c.theta, c.p, exact_p2p ? "exact double" : "cpu float",
                  e.median, e.p99, e.max);
      CAPTURE(c.theta);
      CAPTURE(exact_p2p);
      REQUIRE(st.m2l_interactions > 0);
      REQUIRE(st.p2l_interactions > 0);   // the leaf-cell pairs are weighed too
      CHECK(e.p99 <= c.p99_bar);
    }
  }
  // Without the masses (every particle at the mean), the same tree misses by far more.
  ShortRangeSolver solver(vacuum_settings(fx.scene.particle_mass, 0.5, 4));
  CpuP2PEvaluator cpu;
  std::vector<Vec3d> acc;
  solver.compute(fx.scene.pos, cpu, acc);
  const ErrorStats wrong = relative_errors(acc, fx.exact);
  std::printf("  every particle at the mean mass: median %.2e, 99%% %.2e\n", wrong.median, wrong.p99);
  CHECK(wrong.median > 0.1);
}

TEST_CASE("vacuum masses: direct summation equals the brute force; weights of 1 change no bit") {
  const Fixture& fx = halo_bulge();
  ShortRangeSettings s = vacuum_settings(fx.scene.particle_mass, 0.0, 4);
  s.max_leaf = 32;
  for (bool exact_p2p : {false, true}) {
    ShortRangeSolver solver(s);
    CpuP2PEvaluator cpu;
    test::ReferenceP2P reference;
    std::vector<Vec3d> acc;
    if (exact_p2p) solver.compute(fx.scene.pos, reference, acc, &fx.weights);
    else solver.compute(fx.scene.pos, cpu, acc, &fx.weights);
    const ErrorStats e = relative_errors(acc, fx.exact);
    CAPTURE(exact_p2p);
    CHECK(e.median < (exact_p2p ? 1e-13 : 1e-6));
    CHECK(e.max < (exact_p2p ? 1e-11 : 1e-4));
  }
  // Weights of 1 against none, through the far field (theta 0.5) and either CPU P2P loop.
  const test::VacuumScene plummer = test::plummer_scene(kN, 3);
  const std::vector<double> ones(kN, 1.0);
  for (bool tiled : {true, false}) {
    std::vector<Vec3d> with, without;
    ShortRangeSolver a(vacuum_settings(plummer.particle_mass, 0.5, 4)), b(vacuum_settings(plummer.particle_mass, 0.5, 4));
    CpuP2POptions options;
    options.tiled_kernel = tiled;
    CpuP2PEvaluator cpu(options);
    a.compute(plummer.pos, cpu, with, &ones);
    b.compute(plummer.pos, cpu, without);
    REQUIRE(with.size() == without.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < kN; ++i)
      differ += !(with[i].x == without[i].x && with[i].y == without[i].y && with[i].z == without[i].z);
    CAPTURE(tiled);
    CHECK(differ == 0);
  }
  // The tiled kernels (each SIMD level this CPU runs) and the generic loop agree on weighted
  // sources (float sums in two orders).
  std::vector<Vec3d> generic_acc;
  CpuP2POptions generic;
  generic.tiled_kernel = false;
  CpuP2PEvaluator generic_cpu(generic);
  ShortRangeSolver(vacuum_settings(fx.scene.particle_mass, 0.0, 4)).compute(fx.scene.pos, generic_cpu, generic_acc, &fx.weights);
  for (int level : {4, 3}) {
    if (level > CpuP2PEvaluator::cpu_simd_level()) continue;
    CpuP2POptions tiled;
    tiled.simd_level = level;
    CpuP2PEvaluator tiled_cpu(tiled);
    std::vector<Vec3d> tiled_acc;
    ShortRangeSolver(vacuum_settings(fx.scene.particle_mass, 0.0, 4)).compute(fx.scene.pos, tiled_cpu, tiled_acc, &fx.weights);
    const ErrorStats between = relative_errors(tiled_acc, generic_acc);
    std::printf("vacuum masses, direct summation: %s against the generic loop: median %.2e, max %.2e\n",
                tiled_cpu.variant(kNoTruncation, false).c_str(), between.median, between.max);
    CAPTURE(level);
    CHECK(between.max < 1e-5);
  }
}

TEST_CASE("vacuum masses: momentum, sum of m_i a_i = 0") {
  const Fixture& fx = halo_bulge();
  ShortRangeSolver solver(vacuum_settings(fx.scene.particle_mass, 0.5, 4));
  CpuP2PEvaluator cpu;
  std::vector<Vec3d> acc;
  solver.compute(fx.scene.pos, cpu, acc, &fx.weights);
  Vec3d total{0, 0, 0};
  double scale = 0;
  for (std::size_t i = 0; i < kN; ++i) {
    total += acc[i] * fx.scene.masses[i];
    scale += fx.scene.masses[i] * norm(acc[i]);
  }
  std::printf("vacuum masses: |sum m a| / sum m |a| = %.2e\n", norm(total) / scale);
  CHECK(norm(total) / scale < 1e-5);
}

TEST_CASE("vacuum masses: conserved quantities weigh each particle by its mass") {
  Particles p;
  p.pos = {{1, 0, 0}, {0, 2, 0}, {0, 0, -1}};
  p.mom = {{0, 1, 0}, {3, 0, 0}, {0, 0, 2}};
  p.id = {1, 2, 3};
  p.masses = {1.0, 2.0, 6.0};
  p.mass = 3.0;   // their mean
  const double g = 2.0, eps = 0.5;
  const std::vector<double> w = mass_weights(p);
  REQUIRE(w.size() == 3);
  CHECK(w[2] == doctest::Approx(2.0));
  const double s = softened_pair_sum(p.pos, eps, &w);
  const ConservedQuantities c = conserved_quantities(p, g, s);
  // Written out: K = sum m v^2 / 2, P = sum m v, L = sum m x × v, W = -G sum_{i<j} m_i m_j / s_ij.
  CHECK(c.mass == doctest::Approx(9.0));
  CHECK(c.kinetic == doctest::Approx(0.5 * (1 * 1 + 2 * 9 + 6 * 4)));
  CHECK(c.momentum.x == doctest::Approx(6.0));
  CHECK(c.momentum.y == doctest::Approx(1.0));
  CHECK(c.momentum.z == doctest::Approx(12.0));
  // x × v: (1,0,0)×(0,1,0) = (0,0,1); (0,2,0)×(3,0,0) = (0,0,-6); (0,0,-1)×(0,0,2) = 0.
  CHECK(c.angular_momentum.z == doctest::Approx(1 * 1 - 2 * 6));
  const auto pair = [&](int i, int j) {
    return p.masses[static_cast<std::size_t>(i)] * p.masses[static_cast<std::size_t>(j)] /
           std::sqrt(norm2(p.pos[static_cast<std::size_t>(i)] - p.pos[static_cast<std::size_t>(j)]) + eps * eps);
  };
  CHECK(c.potential == doctest::Approx(-g * (pair(0, 1) + pair(0, 2) + pair(1, 2))));
}

TEST_CASE("vacuum masses: bad input") {
  const test::VacuumScene plummer = test::plummer_scene(512, 5);
  std::vector<Vec3d> acc;
  CpuP2PEvaluator cpu;
  const std::vector<double> short_weights(100, 1.0);
  ShortRangeSolver vacuum(vacuum_settings(plummer.particle_mass, 0.5, 4));
  CHECK_THROWS_WITH_AS(vacuum.compute(plummer.pos, cpu, acc, &short_weights),
                       doctest::Contains("100 weights for 512 particles"), Error);
  // An evaluator that takes one mass only.
  struct OneMass final : P2PEvaluator {
    P2PStats evaluate(const P2PSettings&, const P2PInput&, std::vector<Vec3d>&) override { return {}; }
    std::string name() const override { return "one-mass"; }
  } one_mass;
  const std::vector<double> ones(plummer.pos.size(), 1.0);
  ShortRangeSolver vacuum2(vacuum_settings(plummer.particle_mass, 0.5, 4));
  CHECK_THROWS_WITH_AS(vacuum2.compute(plummer.pos, one_mass, acc, &ones),
                       doctest::Contains("does not take individual masses"), Error);
  // Periodic boundaries take one mass.
  ShortRangeSettings periodic;
  periodic.box_mpc_h = 100;
  periodic.r_s = 1;
  periodic.r_cut = 4.5;
  periodic.g_mass = 1;
  std::vector<Vec3d> in_box(plummer.pos.size());
  for (std::size_t i = 0; i < in_box.size(); ++i)
    in_box[i] = Vec3d{50 + plummer.pos[i].x, 50 + plummer.pos[i].y, 50 + plummer.pos[i].z};
  ShortRangeSolver box(periodic);
  CHECK_THROWS_WITH_AS(box.compute(in_box, cpu, acc, &ones), doctest::Contains("vacuum boundaries only"), Error);
}
