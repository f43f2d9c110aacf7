// One number for how far a force field is from a reference: the rms relative difference
// sqrt(sum |a - ref|^2 / sum |ref|^2). A per-particle ratio would be dominated by the few
// particles whose pulls cancel (their reference force is near zero).
#pragma once
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

}  // namespace orbis::test
