// The GADGET-4 layout of a snapshot file as both writers make it (io/snapshot_write.cpp: one
// mass of type 1, the files filled by every rank at once; io/snapshot_write_types.cpp: an
// isolated system's types and individual masses, one rank): the /Header and the unit
// attributes of a type's datasets.
#pragma once
#include <array>
#include <cstdint>

#include "io/particle_file.hpp"

namespace orbis {

class H5Writer;
class Params;

// The velocity the files hold per unit of momentum: GADGET's u = sqrt(a) dx/dt = p / a^(3/2)
// in a comoving run; dx/dt = p itself for an isolated system (the Newtonian clock).
double snapshot_velocity_scale(const Params& params, double a);

// /Header of one file of `files`: this file's and the whole set's particles of each type, the
// mass of each type (0: its particles' Masses), at scale factor a (comoving) or time t (an
// isolated system: what GADGET-4 writes without comoving integration, Time = t, no box, no
// cosmology; units physical, h = 1).
void write_snapshot_header(H5Writer& file, const TypeCounts& this_file, const TypeCounts& total,
                           const std::array<double, 6>& mass_table, int files, double a, const Params& params);

// The unit attributes and descriptions (gadget_units.hpp) of /PartTypeN's datasets: Coordinates,
// Velocities, with_acc: Acceleration, with_pot: Potential (isolated systems), with_masses: Masses.
void describe_particle_datasets(H5Writer& file, int type, bool with_acc, bool with_pot, bool with_masses,
                                const Params& params);

}  // namespace orbis
