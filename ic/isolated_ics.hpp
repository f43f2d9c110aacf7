// The ICs of an isolated-system run ([gravity] boundary = "vacuum") from [ic] kind and its
// parameters, in the [units] system: a Plummer or a Hernquist sphere (ic/plummer.hpp,
// ic/hernquist.hpp), or a merger of two equal Hernquist spheres on a parabolic orbit
// (ic/parabolic_orbit.hpp; the second sphere's seed is the first's + 1). Centre-of-mass
// frame; IDs 1..N; momenta p = dx/dt.
#pragma once
#include <cstdint>

#include "core/particles.hpp"

namespace orbis {

class Params;

// The particles the parameters ask for (every check before the sampling).
Particles make_isolated_ics(const Params& params);
// Checks the [ic] keys that go together (a merger's separation and pericentre) before any
// work, and returns how many particles: [ic] particles, twice that for a merger.
std::uint64_t check_isolated_ics(const Params& params);

}  // namespace orbis
