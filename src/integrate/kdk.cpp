#include "integrate/kdk.hpp"

#include <cstddef>

namespace orbis {

void kick(const KickPlan& plan, const std::vector<std::uint8_t>& bins, const std::vector<Vec3d>& g_long,
          const std::vector<Vec3d>* g_short, std::vector<Vec3d>& momenta) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(momenta.size());
  const double long_factor = plan.long_range;
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const int bin = bins[i];
    const bool active = g_short && bin >= plan.min_active_bin;
    const double short_factor = active ? plan.short_range[bin] : 0.0;
    if (active && short_factor == long_factor) {
      momenta[i] += (g_long[i] + (*g_short)[i]) * long_factor;   // one kick with the whole force
    } else {
      if (long_factor != 0) momenta[i] += g_long[i] * long_factor;
      if (active) momenta[i] += (*g_short)[i] * short_factor;
    }
  }
}

void drift(std::vector<Vec3d>& positions, const std::vector<Vec3d>& momenta, double drift_factor,
           double box_mpc_h) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(positions.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    Vec3d& x = positions[i];
    x += momenta[i] * drift_factor;
    if (box_mpc_h > 0)
      for (int d = 0; d < 3; ++d) x[d] = periodic_wrap_position(x[d], box_mpc_h);
  }
}

void wrap_positions(std::vector<Vec3d>& positions, double box_mpc_h) {
  if (!(box_mpc_h > 0)) return;
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(positions.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i)
    for (int d = 0; d < 3; ++d) positions[i][d] = periodic_wrap_position(positions[i][d], box_mpc_h);
}

bool positions_inside(const std::vector<Vec3d>& positions, double box_mpc_h) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(positions.size());
  bool inside = true;
#pragma omp parallel for schedule(static) reduction(&& : inside)
  for (std::ptrdiff_t i = 0; i < n; ++i)
    for (int d = 0; d < 3; ++d) inside = inside && positions[i][d] >= 0 && positions[i][d] < box_mpc_h;
  return inside;
}

}  // namespace orbis
