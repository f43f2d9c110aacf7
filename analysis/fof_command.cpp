#include "analysis/fof_command.hpp"

#include <cmath>
#include <filesystem>
#include <map>

#include "analysis/halo_catalogue.hpp"
#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "io/hdf5_file.hpp"
#include "io/output_guard.hpp"
#include "io/snapshot.hpp"

namespace orbis {
namespace {

// An orbis snapshot's /Parameters as TOML values by "section.key" (none for other codes').
std::map<std::string, std::string> stored_parameters(const std::string& file) {
  std::map<std::string, std::string> out;
  H5Reader r(file);
  if (!r.has("/Parameters")) return out;
  for (const auto& spec : param_schema()) {
    const std::string name = spec.name();
    if (!r.has_attribute("/Parameters", name)) continue;
    ParamValue value;
    switch (spec.type) {
      case ParamType::integer: value = r.attribute<std::int64_t>("/Parameters", name); break;
      case ParamType::real: value = r.attribute<double>("/Parameters", name); break;
      case ParamType::boolean: value = r.attribute<std::int32_t>("/Parameters", name) != 0; break;
      case ParamType::string: value = r.attribute_string("/Parameters", name); break;
      case ParamType::real_list: value = r.attribute_array<double>("/Parameters", name); break;
    }
    out[name] = value_to_toml(value);
  }
  return out;
}

bool overridden(const std::vector<std::string>& overrides, const std::string& name) {
  for (const auto& o : overrides)
    if (o.rfind(name + "=", 0) == 0) return true;
  return false;
}

std::string to_toml(const std::map<std::string, std::string>& values) {
  std::map<std::string, std::string> sections;
  for (const auto& [name, value] : values) {
    const auto dot = name.find('.');
    sections[name.substr(0, dot)] += name.substr(dot + 1) + " = " + value + "\n";
  }
  std::string text;
  for (const auto& [section, body] : sections) text += "[" + section + "]\n" + body;
  return text;
}

}  // namespace

std::string default_catalogue_path(const std::string& snapshot) {
  namespace fs = std::filesystem;
  const fs::path p(snapshot);
  std::string stem = p.filename().string();
  for (const std::string ext : {".hdf5", ".0"})
    if (stem.size() > ext.size() && stem.compare(stem.size() - ext.size(), ext.size(), ext) == 0)
      stem.resize(stem.size() - ext.size());
  const std::string prefix = "snapshot_";
  if (stem.rfind(prefix, 0) == 0) stem = stem.substr(prefix.size());
  return (p.parent_path() / ("fof_tab_" + stem + ".hdf5")).string();
}

int run_fof_command(const FofCommandOptions& options) {
  if (Comm::world().size() > 1)
    fail("orbis fof runs on one rank for now (the friends-of-friends merge across ranks is not written yet); "
         "run it without mpirun");
  const std::string file = snapshot_first_file(options.snapshot);
  // Before reading anything: a catalogue of that name may be another code's (GADGET-4 writes
  // fof_tab_NNN.hdf5 next to its snapshots too), and the folder must take the new one.
  const std::string out = options.out.empty() ? default_catalogue_path(options.snapshot) : options.out;
  refuse_to_replace({out, halo::mass_function_path(out)}, options.overwrite, "orbis fof");
  check_folder_writable(parent_folder(out), options.out.empty() ? "the snapshot's folder" : "--out");
  Snapshot snap = read_snapshot(options.snapshot);
  const SnapshotHeader& head = snap.header;
  if (snap.particles.size() == 0) fail("snapshot '{}' holds no particles", options.snapshot);

  // Parameters: stored ones, then the header's box and cosmology, then the command line.
  auto values = stored_parameters(file);
  values["box.size_mpc_h"] = value_to_toml(head.box_mpc_h);
  if (!values.count("box.particles_per_side"))   // required by the schema; informative only here
    values["box.particles_per_side"] = value_to_toml(static_cast<std::int64_t>(
        std::max(2.0, std::round(std::cbrt(static_cast<double>(snap.particles.size()))))));
  // The softening of the potential minima (halo_potential.hpp): a GADGET-4 snapshot's
  // SofteningComovingClass0 (Plummer-equivalent, in the unit of its BoxSize) as orbis's ratio
  // to the mean spacing; orbis snapshots store gravity.softening_over_spacing itself.
  if (!values.count("gravity.softening_over_spacing")) {
    H5Reader r(file);
    if (r.has_attribute("/Parameters", "SofteningComovingClass0") && r.has_attribute("/Parameters", "BoxSize"))
      values["gravity.softening_over_spacing"] = value_to_toml(
          r.attribute<double>("/Parameters", "SofteningComovingClass0") / r.attribute<double>("/Parameters", "BoxSize") *
          std::max(2.0, std::round(std::cbrt(static_cast<double>(snap.particles.size())))));
  }
  // The header's cosmology (GADGET-4 keeps it in /Parameters under the same names).
  std::vector<std::string> missing;
  {
    H5Reader r(file);
    for (const auto& [name, attribute] : {std::pair{"cosmology.omega_m", "Omega0"},
                                          std::pair{"cosmology.omega_lambda", "OmegaLambda"},
                                          std::pair{"cosmology.h", "HubbleParam"}}) {
      if (r.has_attribute("/Header", attribute)) values[name] = value_to_toml(r.attribute<double>("/Header", attribute));
      else if (r.has_attribute("/Parameters", attribute)) values[name] = value_to_toml(r.attribute<double>("/Parameters", attribute));
      else if (!values.count(name) && !overridden(options.overrides, name)) missing.push_back(name);
    }
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += " --set " + m + "=...";
    fail("snapshot '{}' has no {} in /Header or /Parameters (Omega0, OmegaLambda, HubbleParam); the "
         "spherical-overdensity masses need the cosmology: pass it with{}", file, missing.front(), list);
  }
  std::vector<std::string> overrides = options.overrides;
  if (options.linking_length >= 0)
    overrides.push_back("analysis.fof_linking_length=" + value_to_toml(options.linking_length));
  if (options.min_members >= 0)
    overrides.push_back("analysis.fof_min_members=" + value_to_toml(options.min_members));
  const Params params = Params::parse(to_toml(values), file + " (/Header, /Parameters)", overrides);

  log::info("fof: {} particles from '{}', box {} Mpc/h, a = {:.6g} (z = {:.4g})", snap.particles.size(),
            options.snapshot, head.box_mpc_h, head.a, head.redshift);
  const GroupCatalogue catalogue = halo::find_haloes(snap.particles, head.box_mpc_h, head.a, params);
  halo::write_halo_outputs(out, catalogue, params);
  return 0;
}

}  // namespace orbis
