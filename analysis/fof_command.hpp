// `orbis fof SNAPSHOT`: friends-of-friends haloes of any GADGET-layout snapshot (orbis,
// GADGET-4, N-GenIC, MUSIC, monofonIC), written as a GADGET-4-layout catalogue plus its mass
// function. main.cpp only parses the command line and calls run_fof_command.
//
// Parameters: an orbis snapshot's /Parameters are taken as they are; for other files the
// schema defaults. Box and cosmology come from the snapshot header (BoxSize, Omega0,
// OmegaLambda, HubbleParam; GADGET-4 keeps the cosmology in /Parameters, read_snapshot looks
// there too). When the file has no cosmology the command stops and asks for
// --set cosmology.omega_m=... (and omega_lambda, h); --set overrides anything else too.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace orbis {

struct FofCommandOptions {
  std::string snapshot;                  // PATH, PATH.hdf5 or PATH.0.hdf5
  std::string out;                       // catalogue path; empty: next to the snapshot
  double linking_length = -1;            // b; < 0: from the parameters (default 0.2)
  std::int64_t min_members = -1;         // < 0: from the parameters (default 32)
  std::vector<std::string> overrides;    // "section.key=value"
  bool overwrite = false;                // replace an existing catalogue (else: refuse before any work)
};

// The catalogue path used when --out is not given: SNAPDIR/fof_tab_NNN.hdf5 for a snapshot
// named snapshot_NNN(.hdf5), else SNAPDIR/fof_tab_STEM.hdf5.
std::string default_catalogue_path(const std::string& snapshot);

// Throws orbis::Error on bad input; returns the process exit status.
int run_fof_command(const FofCommandOptions& options);

}  // namespace orbis
