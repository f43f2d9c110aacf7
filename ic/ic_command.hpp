// `orbis ic FILE [--set section.key=value ...]`: validates the parameters, logs every value in
// force, and writes into output.directory
//   used_parameters.toml   every parameter, defaults included (Params::to_toml)
//   ics.hdf5               the ICs as a GADGET-4 layout snapshot (io/snapshot.hpp)
//   ic_power.txt           with ic.self_test: measured vs input P(k) of the IC density field
//                          and of the particles' displacement (plot it with
//                          analysis/python/plot_ic_power.py)
// All files are written atomically. An isolated system ([gravity] boundary = "vacuum") writes
// used_parameters.toml and ics.hdf5 (its [ic] kind at [time] t_begin, io/snapshot.hpp's
// non-comoving layout).
#pragma once
#include <string>
#include <vector>

#include "core/comm.hpp"

namespace orbis {

// Returns the process exit status (0); errors are thrown as orbis::Error. Over several ranks
// (collective) each makes its slab of the grid; the files are the same as on one rank.
int run_ic_command(const std::string& parameter_file, const std::vector<std::string>& overrides,
                   const Comm& comm = Comm::world());

}  // namespace orbis
