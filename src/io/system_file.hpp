// An isolated system's initial conditions from a GADGET file ([ic] file of a run with
// [gravity] boundary = "vacuum"): what DICE, MakeNewDisk, GalIC, pynbody and GADGET itself
// write, in HDF5 (the GADGET-2/3/4 layout, /PartType0 .. /PartType5) or GADGET's binary formats 1
// and 2 (either byte order), one file or a numbered set (io/snapshot.hpp's snapshot_file_set).
//
// Every type's particles go into one Particles, type order then file order (type 0 of every
// file, then type 1, ...). Masses from the header's MassTable where a type's entry is not 0,
// else from /PartTypeN/Masses (binary: the MASS block, which holds the types with particles
// and massarr 0, in type order); `masses` is filled only when they are not all equal (then
// `mass` is their mean), `type` only when some particle is not of type 1, so an equal-mass
// file of dark matter reads as the built-in ICs do. Velocities are dx/dt as GADGET writes
// them for a non-comoving run (no sqrt(a)): the momenta of the Newtonian clock.
//
// Units: an HDF5 file's UnitLength_in_cm, UnitMass_in_g and UnitVelocity_in_cm_per_s (in
// /Parameters, as GADGET-4 writes them, or /Header) are converted to the run's [units] system,
// Time with them (its unit is length / velocity); a file that gives them all as 1 is in N-body
// units (what orbis writes for [units] system = "nbody") and needs that system, and a file with
// physical units cannot go into N-body units. A file without them (GADGET's binary formats never
// have them) is taken in the run's units. HubbleParam is not applied: a non-comoving GADGET run's
// lengths are its unit lengths.
//
// Refused before any work, with the file and the particle named: a type with particles and
// neither a MassTable entry nor masses; masses that are zero, negative or not finite; positions
// or velocities that are not finite; two particles with one ID; two particles at the same
// position (overlapping particles); a file of a comoving run (/Parameters ComovingIntegrationOn
// = 1); counts that do not add up to the header's totals; no particles.
#pragma once
#include <string>

#include "core/particles.hpp"
#include "core/physical_units.hpp"
#include "io/particle_file.hpp"

namespace orbis {

struct SystemFile {
  Particles particles;   // positions, momenta p = dx/dt, IDs, masses and types, in the run's units
  double time = 0;       // the header's Time in the run's time unit
  double box = 0;        // the header's BoxSize in the run's length unit (an isolated system has no box: unused)
  TypeCounts per_type{}; // particles of each type, all files
  std::string units;     // how the file's units were taken, for the log
};

SystemFile read_system_file(const std::string& path, const PhysicalUnits& units);

}  // namespace orbis
