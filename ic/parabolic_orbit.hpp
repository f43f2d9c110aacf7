// Two isolated systems on a parabolic (E = 0) Kepler orbit of their centres of mass: the
// usual set-up of a merger (e.g. Hernquist 1992, Naab & Burkert 2003). The relative orbit
// r = 2 r_p / (1 + cos f), mu = G (M_a + M_b), is placed in the x-y plane with its
// pericentre on +x and its angular momentum along +z; at the requested separation d the
// systems approach each other (true anomaly f = -arccos(2 r_p / d - 1)), with relative
// velocity sqrt(mu / 2 r_p) (-sin f, 1 + cos f, 0), |v| = sqrt(2 mu / d). The result is
// in the centre-of-mass frame of the pair: a's particles first, then b's.
#pragma once
#include "ic/isolated_system.hpp"

namespace orbis {

struct ParabolicEncounter {
  double separation = 0;   // d: distance of the centres of mass now, > 0
  double pericentre = 0;   // r_p: closest approach of the point-mass orbit, 0 < r_p <= d
  double g = 1;            // the gravitational constant of the systems' units
};

// Each system is placed by its own centre of mass and mean velocity, whatever frame it comes
// in. Systems of one particle mass give a system of that mass; otherwise the result has
// individual masses (IsolatedSystem::masses; particle_mass their mean).
IsolatedSystem place_on_parabolic_orbit(const IsolatedSystem& a, const IsolatedSystem& b,
                                        const ParabolicEncounter& orbit);

}  // namespace orbis
