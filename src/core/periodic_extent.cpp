#include "core/periodic_extent.hpp"

#include <algorithm>
#include <cmath>

namespace orbis {
namespace {

// Where x lies relative to c, in [-box/2, box/2): the nearest periodic image.
double wrapped(double x, double c, double box) {
  double d = x - c;
  d -= box * std::floor(d / box + 0.5);
  return d;
}

}  // namespace

PeriodicExtent PeriodicExtent::around(const std::vector<Vec3d>& pos, const Vec3d& centre, double box) {
  PeriodicExtent e{centre, Vec3d{HUGE_VAL, HUGE_VAL, HUGE_VAL}, Vec3d{-HUGE_VAL, -HUGE_VAL, -HUGE_VAL},
                   pos.empty() ? 1u : 0u};
  // Over the threads (a rank's particles at every PM step): minima and maxima are exact, the
  // same for any thread count.
  double lo0 = HUGE_VAL, lo1 = HUGE_VAL, lo2 = HUGE_VAL, hi0 = -HUGE_VAL, hi1 = -HUGE_VAL, hi2 = -HUGE_VAL;
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(pos.size());
#pragma omp parallel for schedule(static) reduction(min : lo0, lo1, lo2) reduction(max : hi0, hi1, hi2)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const Vec3d& x = pos[static_cast<std::size_t>(i)];
    const double u0 = wrapped(x[0], centre[0], box), u1 = wrapped(x[1], centre[1], box),
                 u2 = wrapped(x[2], centre[2], box);
    lo0 = std::min(lo0, u0), lo1 = std::min(lo1, u1), lo2 = std::min(lo2, u2);
    hi0 = std::max(hi0, u0), hi1 = std::max(hi1, u1), hi2 = std::max(hi2, u2);
  }
  e.lo = Vec3d{lo0, lo1, lo2};
  e.hi = Vec3d{hi0, hi1, hi2};
  return e;
}

PeriodicExtent PeriodicExtent::of(const std::vector<Vec3d>& pos, double box) {
  // Occupancy of 256 bins per axis; the centre lies half a box from the middle of the longest
  // run of empty bins (circularly), so no point is on the far side of the cut.
  constexpr int kBins = 256;
  Vec3d centre{0.5 * box, 0.5 * box, 0.5 * box};
  for (int a = 0; a < 3 && !pos.empty(); ++a) {
    std::vector<char> used(kBins, 0);
    for (const Vec3d& x : pos) used[std::clamp(static_cast<int>(x[a] / box * kBins), 0, kBins - 1)] = 1;
    int best_len = 0, best_start = 0;
    for (int start = 0; start < kBins; ++start) {
      if (used[start] || used[(start + kBins - 1) % kBins] == 0) continue;   // runs start after a used bin
      int len = 0;
      while (len < kBins && !used[(start + len) % kBins]) ++len;
      if (len > best_len) best_len = len, best_start = start;
    }
    if (best_len == 0) continue;   // every bin used: any centre is as good
    const double gap_middle = (best_start + 0.5 * best_len) * box / kBins;
    centre[a] = std::fmod(gap_middle + 0.5 * box, box);
  }
  return around(pos, centre, box);
}

double PeriodicExtent::distance2(const Vec3d& x, double box) const {
  double d2 = 0;
  for (int a = 0; a < 3; ++a) {
    const double u = wrapped(x[a], centre[a], box);
    double best = HUGE_VAL;
    for (int m = -1; m <= 1; ++m) {
      const double v = u + m * box;
      best = std::min(best, v < lo[a] ? lo[a] - v : (v > hi[a] ? v - hi[a] : 0.0));
    }
    d2 += best * best;
  }
  return d2;
}

double PeriodicExtent::gap2(const PeriodicExtent& other, double box) const {
  if (empty || other.empty) return 0;
  double g2 = 0;
  for (int a = 0; a < 3; ++a) {
    // x - y for x here and y there lies in [t0, t1] modulo box; the axis's distance is that
    // interval's distance to the nearest multiple of box.
    const double t0 = centre[a] - other.centre[a] + lo[a] - other.hi[a];
    const double t1 = centre[a] - other.centre[a] + hi[a] - other.lo[a];
    if (!(t1 - t0 < box)) continue;   // as wide as the box: it holds a multiple
    const double k = std::floor(t0 / box);
    const double below = t0 - k * box;         // t0 above the multiple k box
    const double above = (k + 1) * box - t1;   // t1 below the next one
    if (above <= 0 || below <= 0) continue;
    const double gap = std::min(below, above);
    g2 += gap * gap;
  }
  return g2;
}

}  // namespace orbis
