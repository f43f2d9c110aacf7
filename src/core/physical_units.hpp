// The units of an isolated system's run ([units] system, [gravity] boundary = "vacuum"):
// GADGET's galaxy units (kpc, km/s, 1e10 Msun, so G = 43007.1 and the time unit is
// kpc/(km/s) = 0.9778 Gyr) or N-body units (G = 1; the files then say 1 cm, 1 g, 1 cm/s,
// which tools read as "no physical scale"). Physical, not comoving, and without h: what
// GADGET-4 writes for ComovingIntegrationOn = 0. (Cosmological runs keep core/units.hpp.)
#pragma once
#include <string>

namespace orbis {

class Params;

struct PhysicalUnits {
  std::string system;                // "galaxy" or "nbody"
  double g = 1;                      // the gravitational constant in these units
  double length_in_cm = 1, mass_in_g = 1, velocity_in_cm_per_s = 1;
  std::string length, mass, velocity, time;   // the names of the units, for logs and files
};

inline constexpr double kKpcInCm = 3.085678e21;
inline constexpr double kGalaxyG = 43007.1;   // kpc (km/s)^2 / (1e10 Msun), GADGET's value

PhysicalUnits physical_units(const std::string& system);
PhysicalUnits physical_units(const Params& params);   // [units] system

}  // namespace orbis
