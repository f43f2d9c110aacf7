#include "integrate/outputs.hpp"

#include <fmt/format.h>

#include "analysis/fof.hpp"
#include "analysis/halo_catalogue.hpp"
#include "analysis/power_spectrum.hpp"
#include "analysis/power_spectrum_io.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "cosmology/cosmology.hpp"
#include "cosmology/linear_power.hpp"
#include "io/atomic_file.hpp"
#include "io/snapshot.hpp"

namespace orbis {

void validate_outputs(const Params& params) {
  // Building the settings checks them; nothing is measured or written here.
  if (params.get_bool("analysis.pk")) {
    PowerSpectrumSettings::from_params(params);
    LinearPower::from_params(params);
  }
  if (params.get_bool("analysis.fof")) fof::config_from_params(params);
}

std::vector<std::string> write_run_outputs(const OutputContext& c, const Particles& particles,
                                           const std::vector<Vec3d>& accelerations) {
  std::vector<std::string> files;
  const Params& params = c.params;
  const double box = params.get_real("box.size_mpc_h");
  const std::string number = fmt::format("{:03d}", c.index);
  log::info("output {} at a = {:.6f} (z = {:.4f})", number, c.a, 1 / c.a - 1);

  if (params.get_bool("output.snapshots")) {
    const std::string path = join_path(c.directory, "snapshot_" + number + ".hdf5");
    write_snapshot(path, particles, c.a, params, params.get_bool("output.accelerations") ? &accelerations : nullptr);
    files.push_back(path);
  }
  if (params.get_bool("analysis.pk")) {
    const LinearPower power = LinearPower::from_params(params);
    const double d = c.cosmology.growth(c.a);
    const PowerSpectrum pk = measure_power_spectrum(particles.pos, box, PowerSpectrumSettings::from_params(params),
                                                    [&](double k) { return power(k) * d * d; });
    const std::string base = join_path(c.directory, "powerspec_" + number);
    write_power_spectrum(base, pk, c.a, params);
    files.push_back(base + ".txt");
    files.push_back(base + ".hdf5");
  }
  if (params.get_bool("analysis.fof")) {
    const std::string path = join_path(c.directory, halo::catalogue_file_name(c.index));
    const GroupCatalogue catalogue = halo::find_haloes(particles, box, c.a, params);
    halo::write_halo_outputs(path, catalogue, params);
    log::info("  {} haloes with at least {} particles", catalogue.len.size(), params.get_int("analysis.fof_min_members"));
    files.push_back(path);
    files.push_back(halo::mass_function_path(path));
  }
  for (const auto& f : files) log::info("  wrote {}", f);
  return files;
}

}  // namespace orbis
