#include "io/provenance.hpp"

#include <fmt/format.h>

#include <variant>

#include "core/banner.hpp"
#include "core/gravity_mode.hpp"
#include "core/params.hpp"
#include "core/physical_units.hpp"
#include "core/units.hpp"
#include "cosmology/cosmology.hpp"
#include "io/gadget_units.hpp"
#include "io/hdf5_file.hpp"
#include "orbis/build_info.hpp"

namespace orbis {
namespace {

// An isolated system's: GADGET-4's parameters of a run without comoving integration, in the
// [units] system (physical, h = 1).
void write_gadget_vacuum_parameters(H5Writer& file, const Params& params) {
  const std::string group = "/Parameters";
  const PhysicalUnits units = physical_units(params);
  file.attribute(group, "UnitLength_in_cm", units.length_in_cm);
  file.attribute(group, "UnitMass_in_g", units.mass_in_g);
  file.attribute(group, "UnitVelocity_in_cm_per_s", units.velocity_in_cm_per_s);
  file.attribute(group, "GravityConstantInternal", units.g);
  file.attribute(group, "HubbleParam", 1.0);
  file.attribute(group, "Omega0", 0.0);
  file.attribute(group, "OmegaLambda", 0.0);
  file.attribute(group, "OmegaBaryon", 0.0);
  file.attribute(group, "BoxSize", 0.0);
  file.attribute(group, "PeriodicBoundariesOn", std::int32_t{0});
  file.attribute(group, "ComovingIntegrationOn", std::int32_t{0});
  if (params.has("time.t_begin")) file.attribute(group, "TimeBegin", params.get_real("time.t_begin"));
  file.attribute(group, "TimeMax", params.get_real("time.t_end"));
  file.attribute(group, "MaxSizeTimestep", params.get_real("time.max_dt"));
  const double softening = params.get_real("gravity.softening");
  file.attribute(group, "SofteningComovingClass0", softening);
  file.attribute(group, "SofteningMaxPhysClass0", softening);
  for (int type = 0; type < 6; ++type)
    file.attribute(group, "SofteningClassOfPartType" + std::to_string(type), std::int32_t{0});
}

// GADGET-4's names for the same run (provenance.hpp lists them and their units).
void write_gadget_parameters(H5Writer& file, const Params& params) {
  if (!gravity_mode(params).periodic()) return write_gadget_vacuum_parameters(file, params);
  const std::string group = "/Parameters";
  file.attribute(group, "UnitLength_in_cm", kMpcInCm);
  file.attribute(group, "UnitMass_in_g", kMassUnitInG);
  file.attribute(group, "UnitVelocity_in_cm_per_s", kKmInCm);
  file.attribute(group, "GravityConstantInternal", units::G);
  file.attribute(group, "Hubble", units::H0);
  const CosmologyParams cosmology = cosmology_params(params);
  file.attribute(group, "HubbleParam", params.get_real("cosmology.h"));
  file.attribute(group, "Omega0", cosmology.omega_m);
  file.attribute(group, "OmegaLambda", cosmology.omega_lambda);
  file.attribute(group, "OmegaBaryon", params.get_real("cosmology.omega_b"));
  const double box = params.get_real("box.size_mpc_h");
  file.attribute(group, "BoxSize", box);
  file.attribute(group, "ComovingIntegrationOn", std::int32_t{1});
  if (params.has("box.particles_per_side")) {
    const double softening = params.get_real("gravity.softening_over_spacing") * box /
                             static_cast<double>(params.get_int("box.particles_per_side"));
    file.attribute(group, "SofteningComovingClass0", softening);
    file.attribute(group, "SofteningMaxPhysClass0", softening);   // never limited: comoving always
    for (int type = 0; type < 6; ++type)
      file.attribute(group, "SofteningClassOfPartType" + std::to_string(type), std::int32_t{0});
  }
}

}  // namespace

void write_provenance(H5Writer& file, const Params& params) {
  file.create_group("/Config");
  file.attribute("/Config", "Version", build::version);
  file.attribute("/Config", "GitRevision", build::git_hash);
  file.attribute("/Config", "Build", build_summary());
  file.attribute("/Config", "ParameterFile", params.source());

  file.create_group("/Parameters");
  for (const auto& spec : param_schema()) {
    const std::string name = spec.name();
    if (!params.has(name)) continue;
    switch (spec.type) {
      case ParamType::integer: file.attribute("/Parameters", name, params.get_int(name)); break;
      case ParamType::real: file.attribute("/Parameters", name, params.get_real(name)); break;
      case ParamType::boolean:
        file.attribute("/Parameters", name, static_cast<std::int32_t>(params.get_bool(name)));
        break;
      case ParamType::string: file.attribute("/Parameters", name, params.get_string(name)); break;
      case ParamType::real_list: file.attribute("/Parameters", name, params.get_real_list(name)); break;
    }
  }
  write_gadget_parameters(file, params);
}

}  // namespace orbis
