// orbis: the command line. Each subcommand loads and validates its inputs completely
// before doing any work; every orbis::Error becomes a message and exit code 1.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

#include "analysis/fof_command.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/parallel.hpp"
#include "core/params_schema.hpp"
#include "ic/ic_command.hpp"
#include "integrate/simulation.hpp"
#include "io/provenance.hpp"

int main(int argc, char** argv) {
  orbis::parallel::init(&argc, &argv);
  orbis::log::set_rank(orbis::parallel::rank());

  CLI::App app{"orbis: cosmological N-body simulations with PM + FMM gravity on CPUs and GPUs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", orbis::build_summary());

  auto* params_cmd = app.add_subcommand("params", "print the reference table of every parameter (Markdown)");

  // orbis fof SNAPSHOT: friends-of-friends haloes (analysis/fof_command.hpp).
  orbis::FofCommandOptions fof_options;
  auto* fof_cmd = app.add_subcommand(
      "fof", "find friends-of-friends haloes in a GADGET-layout snapshot; write a GADGET-4 fof_tab "
             "catalogue and its mass function");
  fof_cmd->add_option("snapshot", fof_options.snapshot, "snapshot file (PATH, PATH.hdf5 or PATH.0.hdf5)")
      ->required();
  fof_cmd->add_option("--linking-length,-b", fof_options.linking_length,
                      "linking length in mean inter-particle spacings (default 0.2)");
  fof_cmd->add_option("--min-members", fof_options.min_members, "smallest group kept (default 32)");
  fof_cmd->add_option("--out,-o", fof_options.out, "catalogue path (default: fof_tab_NNN.hdf5 next to the snapshot)");
  fof_cmd->add_option("--set", fof_options.overrides,
                      "override a parameter, e.g. --set cosmology.omega_m=0.3 (needed when the snapshot "
                      "has no cosmology)");

  std::string run_file;
  std::vector<std::string> run_overrides;
  auto* run_cmd = app.add_subcommand("run", "run a simulation from built-in ICs to time.z_final, with "
                                            "snapshots, power spectra and halo catalogues at the outputs");
  run_cmd->add_option("FILE", run_file, "parameter file (TOML)")->required();
  run_cmd->add_option("--set", run_overrides, "override a parameter: section.key=value (repeatable)");

  std::string ic_file;
  std::vector<std::string> ic_overrides;
  auto* ic_cmd = app.add_subcommand("ic", "generate Zel'dovich/2LPT initial conditions: <output.directory>/ics.hdf5");
  ic_cmd->add_option("FILE", ic_file, "parameter file (TOML)")->required();
  ic_cmd->add_option("--set", ic_overrides, "override a parameter: section.key=value (repeatable)");

  int status = 0;
  try {
    app.parse(argc, argv);
    if (params_cmd->parsed()) {
      fmt::print("{}", orbis::schema_markdown());
    } else if (run_cmd->parsed()) {
      status = orbis::run_simulation_command(run_file, run_overrides);
    } else if (ic_cmd->parsed()) {
      status = orbis::run_ic_command(ic_file, ic_overrides);
    } else if (fof_cmd->parsed()) {
      status = orbis::run_fof_command(fof_options);
    }
  } catch (const CLI::ParseError& e) {
    status = app.exit(e);
  } catch (const orbis::Error& e) {
    fmt::print(stderr, "orbis: error: {}\n", e.what());
    status = 1;
  }
  orbis::parallel::finalize();
  return status;
}
