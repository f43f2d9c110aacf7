// The tests' own minimal-image distance (an independent reference for the code's periodic
// geometry: the nearer of |d| and box - |d| on each axis, for points inside [0, box)).
#pragma once
#include <algorithm>
#include <cmath>

#include "core/vec3.hpp"

namespace orbis::test {

inline double periodic_distance2(const Vec3d& a, const Vec3d& b, double box) {
  double d2 = 0;
  for (int k = 0; k < 3; ++k) {
    double d = std::abs(a[k] - b[k]);
    d = std::min(d, box - d);
    d2 += d * d;
  }
  return d2;
}

}  // namespace orbis::test
