#include "ic/ic_command.hpp"

#include "core/gravity_mode.hpp"
#include "ic/isolated_ics.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "core/timer.hpp"
#include "cosmology/cosmology.hpp"
#include "cosmology/linear_power.hpp"
#include "ic/initial_conditions.hpp"
#include "io/atomic_file.hpp"
#include "io/snapshot.hpp"

namespace orbis {
namespace {

// An isolated system's ICs ([gravity] boundary = "vacuum", ic/isolated_ics.hpp): ics.hdf5 at
// t_begin, written by the first rank (the generator is serial).
int write_isolated_ics(Params params, const Comm& comm, const Stopwatch& total) {
  check_isolated_ics(params);
  if (!params.has("ic.kind"))
    fail("{}: `orbis ic` makes the built-in ICs of [ic] kind; ICs from [ic] file are read by `orbis run` as they are",
         params.describe("ic.file"));
  if (!params.has("time.t_begin")) params.set("time.t_begin", ParamValue(0.0), params.source() + " (default)");
  const std::string directory = params.get_string("output.directory");
  std::vector<std::string> written;
  run_collectively(comm, [&] {
    if (!comm.is_root()) return;
    make_directories(directory);
    write_text_atomically(join_path(directory, "used_parameters.toml"), params.to_toml());
    const Particles particles = make_isolated_ics(params);
    written = write_snapshot(join_path(directory, "ics.hdf5"), particles, params.get_real("time.t_begin"), params,
                             {}, Comm::self());
    log::info("orbis ic: wrote {} in {:.2f} s", written.front(), total.seconds());
  });
  return 0;
}

}  // namespace

int run_ic_command(const std::string& parameter_file, const std::vector<std::string>& overrides, const Comm& comm) {
  Stopwatch total;
  // Everything is read and checked before any work or output.
  const Params params = Params::load(parameter_file, overrides);
  log::info("orbis ic: parameters from {} (every value in force):", params.source());
  for (const auto& [name, value] : params.flat()) log::info("  {} = {}   [{}]", name, value, params.where(name));
  if (!gravity_mode(params).periodic()) return write_isolated_ics(params, comm, total);
  const Cosmology cosmology = Cosmology::from_params(params);
  const LinearPower power = LinearPower::from_params(params);
  const IcSettings settings = IcSettings::from_params(params);
  log::info("linear P(k): {}; sigma8 of the z = 0 spectrum {:.6f}", power.description(), power.sigma8());

  const std::string directory = params.get_string("output.directory");
  run_collectively(comm, [&] {
    if (!comm.is_root()) return;
    make_directories(directory);
    write_text_atomically(join_path(directory, "used_parameters.toml"), params.to_toml());
  });

  IcReport report;
  const Particles particles = make_initial_conditions(settings, cosmology, power, &report, comm);
  std::vector<std::string> written;
  {
    ScopedPhase phase(report.times, "write");
    written = write_snapshot(join_path(directory, "ics.hdf5"), particles, report.a_init, params, {}, comm);
    run_collectively(comm, [&] {
      if (comm.is_root() && settings.self_test)
        write_text_atomically(join_path(directory, "ic_power.txt"),
                              ic::power_table_text(report.delta_power, report.displacement_power));
    });
  }
  log_ic_report(settings, report);
  const std::string files = written.size() == 1 ? written.front()
                                                : fmt::format("{} ... ({} files)", written.front(), written.size());
  log::info("orbis ic: wrote {}{} in {:.2f} s on {}", files,
            settings.self_test ? " and " + join_path(directory, "ic_power.txt") : std::string(), total.seconds(),
            comm.size() == 1 ? std::string("1 rank") : fmt::format("{} ranks", comm.size()));
  return 0;
}

}  // namespace orbis
