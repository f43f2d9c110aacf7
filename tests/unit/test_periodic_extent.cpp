// PeriodicExtent::gap2, which lets the ghost selection skip ranks far from this one: a lower
// bound of every pair's periodic distance (brute force over random clusters, some across
// the boundary), the exact gap for boxes whose corners are points, and 0 where the extents
// overlap through a periodic image or one is empty.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/periodic_extent.hpp"
#include "support/periodic_distance.hpp"

using orbis::PeriodicExtent;
using orbis::Vec3d;

using orbis::test::periodic_distance2;

namespace {

// The 8 corners of [lo, hi] (each coordinate wrapped into [0, box)).
std::vector<Vec3d> corners(const Vec3d& lo, const Vec3d& hi, double box) {
  std::vector<Vec3d> out;
  for (int c = 0; c < 8; ++c) {
    Vec3d x;
    for (int a = 0; a < 3; ++a) x[a] = std::fmod((c >> a & 1 ? hi[a] : lo[a]) + box, box);
    out.push_back(x);
  }
  return out;
}

}  // namespace

TEST_CASE("gap2 is a lower bound of the periodic distance between two sets' points") {
  const double box = 100.0;
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int positive = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<Vec3d> a, b;
    const auto cluster = [&](std::vector<Vec3d>& pts) {
      const Vec3d centre{u(rng) * box, u(rng) * box, u(rng) * box};
      const double size = box * (0.02 + 0.3 * u(rng));
      for (int i = 0; i < 40; ++i) {
        Vec3d x;
        for (int k = 0; k < 3; ++k) x[k] = std::fmod(centre[k] + size * (u(rng) - 0.5) + box, box);
        pts.push_back(x);
      }
    };
    cluster(a);
    cluster(b);
    const PeriodicExtent ea = PeriodicExtent::of(a, box);
    const PeriodicExtent eb = trial % 2 ? PeriodicExtent::of(b, box) : PeriodicExtent::around(b, Vec3d{50, 50, 50}, box);
    double nearest = HUGE_VAL;
    for (const Vec3d& x : a)
      for (const Vec3d& y : b) nearest = std::min(nearest, periodic_distance2(x, y, box));
    const double g2 = ea.gap2(eb, box);
    CHECK(g2 <= nearest * (1 + 1e-12) + 1e-12);
    CHECK(eb.gap2(ea, box) == doctest::Approx(g2).epsilon(1e-12));
    positive += g2 > 0;
  }
  CHECK(positive > 30);   // the bound is not trivially 0
}

TEST_CASE("gap2: the gap between boxes, across the boundary too; 0 when they overlap or one is empty") {
  const double box = 100.0;
  const PeriodicExtent a = PeriodicExtent::of(corners({10, 10, 10}, {20, 20, 20}, box), box);
  // 10 apart in x.
  CHECK(a.gap2(PeriodicExtent::of(corners({30, 10, 10}, {40, 20, 20}, box), box), box) == doctest::Approx(100.0));
  // 5 apart in x across x = 0 (the box [95, 105) wraps), 3 in y.
  CHECK(a.gap2(PeriodicExtent::of(corners({-5, 23, 12}, {5, 30, 18}, box), box), box) ==
        doctest::Approx(25.0 + 9.0));
  // x: [10, 20] against [22, 98]: 2 apart directly, 12 through the image at -2.
  CHECK(a.gap2(PeriodicExtent::around(corners({22, 10, 10}, {98, 20, 20}, box), Vec3d{60, 15, 15}, box), box) ==
        doctest::Approx(4.0));
  // Overlapping, and overlapping only through the periodic image.
  CHECK(a.gap2(PeriodicExtent::of(corners({15, 15, 15}, {50, 50, 50}, box), box), box) == 0.0);
  CHECK(a.gap2(PeriodicExtent::around(corners({60, 12, 12}, {115, 18, 18}, box), Vec3d{87.5, 15, 15}, box), box) ==
        0.0);
  CHECK(a.gap2(PeriodicExtent::around({}, Vec3d{50, 50, 50}, box), box) == 0.0);
}
