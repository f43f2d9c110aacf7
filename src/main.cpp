// orbis: the command line. Each subcommand loads and validates its inputs completely
// before doing any work; every orbis::Error becomes a message and exit code 1.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/parallel.hpp"
#include "core/params_schema.hpp"
#include "ic/ic_command.hpp"
#include "io/provenance.hpp"

int main(int argc, char** argv) {
  orbis::parallel::init(&argc, &argv);
  orbis::log::set_rank(orbis::parallel::rank());

  CLI::App app{"orbis: cosmological N-body simulations with PM + FMM gravity on CPUs and GPUs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", orbis::build_summary());

  auto* params_cmd = app.add_subcommand("params", "print the reference table of every parameter (Markdown)");

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
    } else if (ic_cmd->parsed()) {
      status = orbis::run_ic_command(ic_file, ic_overrides);
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
