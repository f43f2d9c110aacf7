#include "io/snapshot_layout.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "core/gravity_mode.hpp"
#include "core/params.hpp"
#include "core/physical_units.hpp"
#include "cosmology/cosmology.hpp"
#include "io/gadget_units.hpp"
#include "io/hdf5_file.hpp"

namespace orbis {
namespace {

// The /Header of an isolated system's snapshot: what GADGET-4 writes without comoving
// integration (Time = t, Redshift 0, no box, no cosmology; units physical, h = 1).
void write_vacuum_header(H5Writer& file, double t, const Params& params) {
  const PhysicalUnits units = physical_units(params);
  file.attribute("/Header", "BoxSize", 0.0);
  file.attribute("/Header", "Time", t);
  file.attribute("/Header", "Redshift", 0.0);
  file.attribute("/Header", "Omega0", 0.0);
  file.attribute("/Header", "OmegaLambda", 0.0);
  file.attribute("/Header", "HubbleParam", 1.0);
  file.attribute("/Header", "UnitLength_in_cm", units.length_in_cm);
  file.attribute("/Header", "UnitMass_in_g", units.mass_in_g);
  file.attribute("/Header", "UnitVelocity_in_cm_per_s", units.velocity_in_cm_per_s);
}

}  // namespace

double snapshot_velocity_scale(const Params& params, double a) {
  return gravity_mode(params).periodic() ? std::pow(a, -1.5) : 1.0;
}

void write_snapshot_header(H5Writer& file, const TypeCounts& this_file, const TypeCounts& total,
                           const std::array<double, 6>& mass_table, int files, double a, const Params& params) {
  const bool comoving = gravity_mode(params).periodic();
  file.create_group("/Header");
  if (comoving) {
    file.attribute("/Header", "BoxSize", params.get_real("box.size_mpc_h"));
    file.attribute("/Header", "Time", a);
    file.attribute("/Header", "Redshift", 1.0 / a - 1.0);
  }
  file.attribute("/Header", "NumPart_ThisFile", std::vector<std::uint64_t>(this_file.begin(), this_file.end()));
  file.attribute("/Header", "NumPart_Total", std::vector<std::uint64_t>(total.begin(), total.end()));
  // NumPart_Total holds the whole 64-bit count (GADGET-4), so the high words are 0: readers
  // that add HighWord << 32 (the GADGET-2 convention) then count right too.
  file.attribute("/Header", "NumPart_Total_HighWord", std::vector<std::uint32_t>(6, 0));
  file.attribute("/Header", "MassTable", std::vector<double>(mass_table.begin(), mass_table.end()));
  if (comoving) {
    const CosmologyParams cosmology = cosmology_params(params);
    file.attribute("/Header", "Omega0", cosmology.omega_m);
    file.attribute("/Header", "OmegaLambda", cosmology.omega_lambda);
    file.attribute("/Header", "HubbleParam", params.get_real("cosmology.h"));
  }
  file.attribute("/Header", "NumFilesPerSnapshot", static_cast<std::int32_t>(files));
  file.attribute("/Header", "Flag_DoublePrecision", std::int32_t{1});
  if (comoving) {
    file.attribute("/Header", "UnitLength_in_cm", kMpcInCm);
    file.attribute("/Header", "UnitMass_in_g", kMassUnitInG);
    file.attribute("/Header", "UnitVelocity_in_cm_per_s", kKmInCm);
  } else {
    write_vacuum_header(file, a, params);
  }
}

void describe_particle_datasets(H5Writer& file, int type, bool with_acc, bool with_pot, bool with_masses,
                                const Params& params) {
  const std::string group = "/PartType" + std::to_string(type);
  if (gravity_mode(params).periodic()) {
    describe_dataset(file, group + "/Coordinates", kUnitLength, "comoving position, Mpc/h");
    describe_dataset(file, group + "/Velocities", kUnitVelocityU,
                     "u = sqrt(a) dx/dt (GADGET convention), km/s; peculiar velocity = sqrt(a) u");
    if (with_acc)
      describe_dataset(file, group + "/Acceleration", GadgetUnit{-2, 1, -1, 0, 2, kKmInCm * kKmInCm / kMpcInCm},
                       "comoving gravitational acceleration g = G sum_j m_j (x_j - x_i) / |x_j - x_i|^3 "
                       "(periodic, softened), (km/s)^2/(Mpc/h); dp/dt = g / a; the physical peculiar "
                       "acceleration is g / a^2 (GADGET-4 OUTPUT_ACCELERATION convention)");
    if (with_masses) describe_dataset(file, group + "/Masses", kUnitMass, "particle mass, 1e10 Msun/h");
    return;
  }
  const PhysicalUnits u = physical_units(params);
  describe_dataset(file, group + "/Coordinates", GadgetUnit{0, 0, 1, 0, 0, u.length_in_cm},
                   "position, " + u.length + " (isolated system: physical, no h)");
  describe_dataset(file, group + "/Velocities", GadgetUnit{0, 0, 0, 0, 1, u.velocity_in_cm_per_s},
                   "velocity dx/dt, " + u.velocity);
  if (with_acc)
    describe_dataset(file, group + "/Acceleration",
                     GadgetUnit{0, 0, -1, 0, 2, u.velocity_in_cm_per_s * u.velocity_in_cm_per_s / u.length_in_cm},
                     "gravitational acceleration G sum_j m_j (x_j - x_i) / (|x_j - x_i|^2 + eps^2)^(3/2), (" +
                         u.velocity + ")^2/" + u.length);
  if (with_pot)
    describe_dataset(file, group + "/Potential", GadgetUnit{0, 0, 0, 0, 2, u.velocity_in_cm_per_s * u.velocity_in_cm_per_s},
                     "gravitational potential -G sum_{j != i} m_j / (|x_j - x_i|^2 + eps^2)^(1/2) (the direct sum "
                     "over every other particle; no self term), (" + u.velocity + ")^2");
  if (with_masses)
    describe_dataset(file, group + "/Masses", GadgetUnit{0, 0, 0, 1, 0, u.mass_in_g},
                     "particle mass, " + u.mass + " (this type's MassTable entry is 0: its particles' masses differ)");
}

}  // namespace orbis
