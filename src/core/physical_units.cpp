#include "core/physical_units.hpp"

#include "core/error.hpp"
#include "core/params.hpp"

namespace orbis {

PhysicalUnits physical_units(const std::string& system) {
  PhysicalUnits u;
  u.system = system;
  if (system == "galaxy") {
    u.g = kGalaxyG;
    u.length_in_cm = kKpcInCm;
    u.mass_in_g = 1.989e43;
    u.velocity_in_cm_per_s = 1e5;
    u.length = "kpc", u.mass = "1e10 Msun", u.velocity = "km/s", u.time = "kpc/(km/s) = 0.9778 Gyr";
  } else if (system == "nbody") {
    u.length = "length unit", u.mass = "mass unit", u.velocity = "velocity unit", u.time = "time unit";
  } else {
    fail("internal: unknown unit system '{}'", system);
  }
  return u;
}

PhysicalUnits physical_units(const Params& params) { return physical_units(params.get_string("units.system")); }

}  // namespace orbis
