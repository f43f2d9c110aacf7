#include "integrate/kdk.hpp"

#include <cstddef>

namespace orbis {

void kick(std::vector<Vec3d>& momenta, const std::vector<Vec3d>& acc, double kick_factor) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(momenta.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) momenta[i] += acc[i] * kick_factor;
}

void drift(std::vector<Vec3d>& positions, const std::vector<Vec3d>& momenta, double drift_factor,
           double box_mpc_h) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(positions.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    Vec3d& x = positions[i];
    x += momenta[i] * drift_factor;
    for (int d = 0; d < 3; ++d) x[d] = periodic_wrap_position(x[d], box_mpc_h);
  }
}

}  // namespace orbis
