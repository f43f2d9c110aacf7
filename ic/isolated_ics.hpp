// The ICs of an isolated-system run ([gravity] boundary = "vacuum"), in the [units] system:
// either built in, from [ic] kind and its parameters: a Plummer or a Hernquist sphere
// (ic/plummer.hpp, ic/hernquist.hpp), or a merger of two Hernquist spheres on a parabolic
// orbit (ic/parabolic_orbit.hpp; the second sphere's seed is the first's + 1, its mass
// mass_ratio times the first's with as many particles, its scale radius scale_radius
// mass_ratio^(1/3)); centre-of-mass frame, IDs 1..N, momenta p = dx/dt. Or read from [ic]
// file (io/system_file.hpp): any GADGET particle types and individual masses, as the file has
// them.
#pragma once
#include <cstdint>

#include "core/particles.hpp"

namespace orbis {

class Params;

// The particles the parameters ask for (every check before the sampling); [ic] kind only.
Particles make_isolated_ics(const Params& params);
// Checks the [ic] keys that go together before any work: [ic] kind or [ic] file (one of them);
// with kind, [ic] particles and, for a merger, its separation and pericentre; with a file, none
// of the generators' keys. Returns how many particles the generators make ([ic] particles, twice
// that for a merger; 0 with [ic] file: the file says).
std::uint64_t check_isolated_ics(const Params& params);
// [ic] file's particles (relative to the parameter file's folder), converted to the [units]
// system and checked (io/system_file.hpp), logged; the run's start time set: [time] t_begin
// when given, else the file's Time (in params, with the file as its origin, so that
// used_parameters.toml and a restart see it).
Particles read_isolated_ics(Params& params);

}  // namespace orbis
