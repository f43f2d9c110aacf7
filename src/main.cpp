// orbis: the command line. Each subcommand loads and validates its inputs completely
// before doing any work; every orbis::Error becomes a message and exit code 1.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "analysis/fof_command.hpp"
#include "analysis/power_spectrum_io.hpp"
#include "core/error.hpp"
#include "core/host_memory.hpp"
#include "core/log.hpp"
#include "core/parallel.hpp"
#include "core/params_schema.hpp"
#include "ic/ic_command.hpp"
#include "integrate/simulation.hpp"
#include "io/output_guard.hpp"
#include "core/banner.hpp"

namespace {

// Every rank that fails says so; an error on some ranks only must not leave the others
// waiting in a collective, so a multi-rank run ends all of them. Returns the exit status.
int report_error(const std::string& message) {
  if (orbis::parallel::size() > 1)
    fmt::print(stderr, "orbis: error (rank {} of {}): {}\n", orbis::parallel::rank(), orbis::parallel::size(), message);
  else
    fmt::print(stderr, "orbis: error: {}\n", message);
  std::fflush(stderr);
  orbis::parallel::abort_all(1);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  orbis::parallel::init(&argc, &argv);
  orbis::log::set_rank(orbis::parallel::rank(), orbis::parallel::size());

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
  fof_cmd->add_flag("--overwrite", fof_options.overwrite,
                    "replace an existing catalogue of the same name (without it: an error before any work)");

  std::string run_file;
  std::vector<std::string> run_overrides;
  orbis::RunOptions run_options;
  auto* run_cmd = app.add_subcommand("run", "run a simulation from built-in ICs to time.z_final, with "
                                            "snapshots, power spectra and halo catalogues at the outputs");
  run_cmd->add_option("FILE", run_file, "parameter file (TOML)")->required();
  run_cmd->add_option("--set", run_overrides, "override a parameter: section.key=value (repeatable)");
  run_cmd->add_flag("--overwrite", run_options.overwrite,
                    "replace files in the output folder that this run would write (without it: an error "
                    "before any work when one exists)");
  auto* overwrite_flag = run_cmd->get_option("--overwrite");
  run_cmd->add_flag("--restart", run_options.restart,
                    "continue the run from the newest complete checkpoint in its output folder (the physics "
                    "parameters must be the checkpoint's; z_final and the outputs may change)")
      ->excludes(overwrite_flag);

  std::string ic_file;
  std::vector<std::string> ic_overrides;
  auto* ic_cmd = app.add_subcommand("ic", "generate Zel'dovich/2LPT initial conditions: <output.directory>/ics.hdf5");
  ic_cmd->add_option("FILE", ic_file, "parameter file (TOML)")->required();
  ic_cmd->add_option("--set", ic_overrides, "override a parameter: section.key=value (repeatable)");

  // orbis pk SNAPSHOT: P(k) of any GADGET-layout snapshot (analysis/power_spectrum_io.hpp).
  orbis::PkCommandOptions pk;
  bool pk_no_interlacing = false;
  auto* pk_cmd = app.add_subcommand("pk", "measure the power spectrum of a snapshot (text + HDF5)");
  pk_cmd->add_option("snapshot", pk.snapshot, "GADGET-layout HDF5 snapshot or IC file")->required();
  pk_cmd->add_option("--grid", pk.grid, "mesh cells per side (0: 2 x particles per side, at most 512)");
  pk_cmd->add_option("--window", pk.window, "mass assignment: cic or tsc")->capture_default_str();
  pk_cmd->add_flag("--no-interlacing", pk_no_interlacing, "measure without the interlaced mesh");
  pk_cmd->add_option("--fold", pk.fold, "fold factor F: also reach F x the Nyquist frequency")->capture_default_str();
  pk_cmd->add_option("--binning", pk.binning, "linear (in k_F) or log")->capture_default_str();
  pk_cmd->add_option("--bins", pk.num_bins, "number of bins (0: one per k_F, or 10 per decade)");
  pk_cmd->add_flag("--subtract-shot-noise", pk.subtract_shot_noise, "subtract the shot noise from P(k)");
  pk_cmd->add_option("--out", pk.out, "output base path: writes OUT.txt and OUT.hdf5 (default SNAPSHOT_pk)");
  pk_cmd->add_flag("--overwrite", pk.overwrite, "replace existing OUT.txt / OUT.hdf5 (without it: an error before any work)");

  int status = 0;
  try {
    app.parse(argc, argv);
    if (params_cmd->parsed()) {
      fmt::print("{}", orbis::schema_markdown());
    } else if (run_cmd->parsed()) {
      status = orbis::run_simulation_command(run_file, run_overrides, run_options);
    } else if (ic_cmd->parsed()) {
      status = orbis::run_ic_command(ic_file, ic_overrides);
    } else if (fof_cmd->parsed()) {
      status = orbis::run_fof_command(fof_options);
    } else if (pk_cmd->parsed()) {
      pk.interlacing = !pk_no_interlacing;
      orbis::run_pk_command(pk);
    }
  } catch (const CLI::ParseError& e) {
    status = app.exit(e);
  } catch (const orbis::Error& e) {
    status = report_error(e.what());
  } catch (const std::bad_alloc&) {
    // The run's host memory is checked before any work (integrate/run_memory.hpp) for what it
    // surely needs; this is the rest: the tree, the analysis, or another process's growth.
    status = report_error(fmt::format(
        "out of host memory (an allocation failed with {} in use by this process at its peak): lower "
        "[box] particles_per_side, [gravity] pm_grid_side or [analysis] pk_grid_side, or free memory",
        orbis::format_bytes(static_cast<double>(orbis::peak_resident_bytes()))));
  } catch (const std::exception& e) {
    status = report_error(fmt::format("internal error: {}", e.what()));
  }
  orbis::parallel::finalize();
  if (status != 0) {
    // After an error, skip the libraries' exit handlers: HDF5 would close again a file whose
    // write failed (the disk full) and crash; every complete file is already closed.
    std::fflush(nullptr);
    std::_Exit(status);
  }
  return status;
}
