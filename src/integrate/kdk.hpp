// Kick and drift of the comoving KDK leapfrog on host arrays (the host step engine). With the
// canonical momentum p = a^2 dx/dt and the comoving acceleration g (step_engine.hpp):
//   drift: x += p * int da/(a^3 H)      kick: p += g * int da/(a^2 H)
// both integrals exact (Cosmology::drift_factor / kick_factor).
#pragma once
#include <cstdint>
#include <vector>

#include "core/particles.hpp"
#include "integrate/step_engine.hpp"

namespace orbis {

// The kicks of `plan` (step_engine.hpp): g_short may be null (PM only: no short-range force);
// bins holds one bin per particle.
void kick(const KickPlan& plan, const std::vector<std::uint8_t>& bins, const std::vector<Vec3d>& g_long,
          const std::vector<Vec3d>* g_short, std::vector<Vec3d>& momenta);
// Wraps into [0, box) (periodic_wrap_position); box 0: not wrapped (isolated systems, and
// TreePM between tree builds: see HostStepEngine::drift).
void drift(std::vector<Vec3d>& positions, const std::vector<Vec3d>& momenta, double drift_factor,
           double box_mpc_h);
// Positions wrapped into [0, box) in place (the same bits as drift's wrap).
void wrap_positions(std::vector<Vec3d>& positions, double box_mpc_h);
// Whether every coordinate lies in [0, box).
bool positions_inside(const std::vector<Vec3d>& positions, double box_mpc_h);

}  // namespace orbis
