// Kick and drift of the comoving KDK leapfrog (DESIGN.md "One step"). With the canonical
// momentum p = a^2 dx/dt and the comoving acceleration g (gravity.hpp):
//   drift: x += p * int da/(a^3 H)      kick: p += g * int da/(a^2 H)
// both integrals exact (Cosmology::drift_factor / kick_factor).
#pragma once
#include <vector>

#include "core/particles.hpp"

namespace orbis {

void kick(std::vector<Vec3d>& momenta, const std::vector<Vec3d>& acc, double kick_factor);
void drift(std::vector<Vec3d>& positions, const std::vector<Vec3d>& momenta, double drift_factor,
           double box_mpc_h);   // wraps into [0, box)

}  // namespace orbis
