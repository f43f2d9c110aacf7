// PM forces against exact periodic references (tests/support/ewald.hpp).
//  * PM-only: the force between two particles against the Ewald force, for separations of
//    0.5 to L/4 mesh cells, over 64 random positions and orientations of the pair relative to
//    the mesh per separation. Printed: the mean radial ratio, rms and max relative error;
//    asserted: every pair within 1% from 4 cells on (TSC), and the overshoot above Newton.
//  * Long-range (r_s > 0): against Ewald minus the short-range erfc force of the nearby
//    images, i.e. exactly what the tree must not supply. Errors are relative to the exact
//    periodic (Ewald) force at that separation, the force the sum of both parts must give.
//  * Momentum: the PM forces on a random set sum to ~0 (the scheme is antisymmetric).
#include <doctest/doctest.h>

#include <omp.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "core/units.hpp"
#include "pm/pm_solver.hpp"
#include "support/ewald.hpp"

using orbis::PmSettings;
using orbis::PmSolver;
using orbis::Vec3d;
using orbis::Window;

namespace {

constexpr double kBox = 100.0;   // Mpc/h
constexpr double kMass = 2.5;    // 1e10 Msun/h

// Short-range force on a particle at the origin from a unit mass at d (G = 1), all images
// that matter: -(-d/r^3) T(r / 2 r_s) pulls toward d.
Vec3d short_range(const Vec3d& d, double box, double rs) {
  Vec3d acc;
  for (int i = -1; i <= 1; ++i)
    for (int j = -1; j <= 1; ++j)
      for (int k = -1; k <= 1; ++k) {
        const Vec3d r{d.x + i * box, d.y + j * box, d.z + k * box};
        const double rr = orbis::norm(r), x = rr / (2 * rs);
        const double t = std::erfc(x) + 2 * x / std::sqrt(orbis::units::pi) * std::exp(-x * x);
        acc += r * (t / (rr * rr * rr));
      }
  return acc;
}

Vec3d random_direction(std::mt19937_64& rng) {
  std::normal_distribution<double> g;
  Vec3d v{g(rng), g(rng), g(rng)};
  return v * (1.0 / orbis::norm(v));
}

struct PairErrors {
  double mean_radial_ratio = 0, rms = 0, max = 0;
};

// Pairs at separation r_cells; relative errors of the force on particle 1 (and, antisymmetric,
// on particle 0) against `reference(d, ewald)` = acceleration on 1 from a unit mass at
// d = x0 - x1 (G = 1), given the Ewald acceleration of that pair.
template <typename Reference>
PairErrors pair_errors(PmSolver& pm, double r_cells, int configs, std::mt19937_64& rng,
                       Reference reference) {
  const double cell = kBox / pm.settings().grid_side;
  std::uniform_real_distribution<double> u(0, kBox);
  PairErrors e;
  std::vector<Vec3d> acc;
  for (int c = 0; c < configs; ++c) {
    const Vec3d x0{u(rng), u(rng), u(rng)};
    const Vec3d d = random_direction(rng) * (r_cells * cell);   // x0 - x1
    std::vector<Vec3d> pos{x0, x0 - d};
    pm.accelerations(pos, kMass, acc);
    const Vec3d ewald = orbis::test::ewald_acceleration(d, kBox);
    const Vec3d expected = reference(d, ewald) * (orbis::units::G * kMass);
    const Vec3d exact = ewald * (orbis::units::G * kMass);
    const double scale = orbis::norm(exact);
    const double err = orbis::norm(acc[1] - expected) / scale;
    const double err0 = orbis::norm(acc[0] + expected) / scale;
    e.mean_radial_ratio += dot(acc[1], expected) / orbis::norm2(expected) / configs;
    e.rms += (err * err + err0 * err0) / (2 * configs);
    e.max = std::max(e.max, std::max(err, err0));
  }
  e.rms = std::sqrt(e.rms);
  return e;
}

// The PM settings of these tests: a 32^3 mesh over the kBox box; r_s = 0 is PM-only.
PmSettings mesh_settings(Window window, bool double_mesh, double r_s = 0) {
  PmSettings s;
  s.box_mpc_h = kBox;
  s.grid_side = 32;
  s.window = window;
  s.r_s_mpc_h = r_s;
  s.double_mesh = double_mesh;
  return s;
}

}  // namespace

TEST_CASE("PM-only pair force matches Ewald beyond 4 mesh cells, for every orientation") {
  for (Window window : {Window::cic, Window::tsc}) {
    const PmSettings s = mesh_settings(window, true);
    PmSolver pm(s);
    std::mt19937_64 rng(42);
    std::printf("PM-only %s, 32^3 mesh, 64 random pairs per r; errors relative to |Ewald|\n"
                "  r/cell  <F_r/F_ewald>  rms err   max err\n", orbis::window_name(window));
    for (double r : {0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0}) {
      const PairErrors e = pair_errors(pm, r, 64, rng, [](const Vec3d&, const Vec3d& ewald) { return ewald; });
      std::printf("  %5.2f   %10.5f   %8.2e  %8.2e\n", r, e.mean_radial_ratio, e.rms, e.max);
      // TSC (the default): every sampled pair within 1% from 4 cells on (0.45% at 4 cells over
      // 1000 pairs). CIC is aliasing-limited: rms under 1% from 4 cells, every pair from 6
      // (1000 pairs: max 1.8% at 4 cells, 1.2% at 5, 0.9% at 6).
      if (window == Window::tsc && r >= 4.0) CHECK(e.max < 0.01);
      if (window == Window::cic && r >= 4.0) CHECK(e.rms < 0.01);
      if (window == Window::cic && r >= 6.0) CHECK(e.max < 0.01);
      // The mean force exceeds Newton's by at most ~2% (at 2 cells: the reference is not a
      // positive kernel, since its low-k deficit 1 - S = 0.165 (k cell)^2 is kept small for the
      // pancake and growth tests; a Gaussian with no overshoot needs 0.30). Inside 1.5 cells
      // it is below Newton's, as in every PM force.
      CHECK(e.mean_radial_ratio < 1.025);
    }
  }
}

TEST_CASE("PM long-range force matches Ewald minus the short-range erfc force") {
  for (Window window : {Window::cic, Window::tsc}) {
    const PmSettings s = mesh_settings(window, true, 1.2 * kBox / 32);
    PmSolver pm(s);
    std::mt19937_64 rng(7);
    std::printf("PM long range %s, r_s = 1.2 cells, 32^3 mesh; errors relative to |Ewald|\n"
                "  r/cell  <F_r/F_long>   rms err   max err\n", orbis::window_name(window));
    for (double r : {0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0}) {
      const PairErrors e = pair_errors(pm, r, 24, rng, [&](const Vec3d& d, const Vec3d& ewald) {
        return ewald - short_range(d, kBox, s.r_s_mpc_h);
      });
      std::printf("  %5.2f   %10.5f   %8.2e  %8.2e\n", r, e.mean_radial_ratio, e.rms, e.max);
      // TSC: every pair within 1%. CIC is aliasing-limited at r_s = 1.2 cells (rms 1.5%, max
      // 3.5% near 3 cells) but unbiased on average.
      if (window == Window::tsc) CHECK(e.max < 0.01);
      else CHECK(e.rms < 0.02);
      // Unbiased: the mean of 24 pairs within 1% of the long-range force. For CIC inside
      // 1.5 cells, where the long range is a few % of the force, each pair's aliasing error is
      // ~5% of it, and the mean of 24 is uncertain by 1%: 2% there.
      CHECK(std::abs(e.mean_radial_ratio - 1) < (window == Window::cic && r < 1.5 ? 0.02 : 0.01));
    }
  }
}

TEST_CASE("PM forces on a random set sum to zero (momentum conservation)") {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0, kBox);
  std::vector<Vec3d> pos(5000);
  for (auto& p : pos) p = {u(rng), u(rng), u(rng)};
  for (bool twice : {false, true}) {
    for (Window window : {Window::cic, Window::tsc}) {
      PmSolver pm(mesh_settings(window, twice));
      std::vector<Vec3d> acc;
      pm.accelerations(pos, kMass, acc);
      Vec3d total;
      double magnitude = 0;
      for (const auto& a : acc) total += a, magnitude += orbis::norm(a);
      const double ratio = orbis::norm(total) / magnitude;
      std::printf("momentum: %s %s mesh |sum g| / sum |g| = %.2e\n", orbis::window_name(window),
                  twice ? "double" : "float", ratio);
      CHECK(ratio < (twice ? 1e-12 : 1e-5));
    }
  }
}
