// One number for how far a force field is from a reference: the rms relative difference
// sqrt(sum |a - ref|^2 / sum |ref|^2). A per-particle ratio would be dominated by the few
// particles whose pulls cancel (their reference force is near zero).
// Or per particle, as the force-error tables give it: the median, 99th percentile and max of
// |a - ref| / |ref|.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/vec3.hpp"

namespace orbis::test {

inline double rms_relative_difference(const std::vector<Vec3d>& a, const std::vector<Vec3d>& ref) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    diff += norm2(a[i] - ref[i]);
    norm += norm2(ref[i]);
  }
  return std::sqrt(diff / norm);
}

struct ErrorStats {
  double median = 0, p99 = 0, max = 0;
};

inline ErrorStats relative_errors(const std::vector<Vec3d>& acc, const std::vector<Vec3d>& exact) {
  std::vector<double> e(exact.size());
  for (std::size_t i = 0; i < exact.size(); ++i) e[i] = norm(acc[i] - exact[i]) / norm(exact[i]);
  std::sort(e.begin(), e.end());
  return {e[e.size() / 2], e[static_cast<std::size_t>(0.99 * static_cast<double>(e.size() - 1))], e.back()};
}

}  // namespace orbis::test
