// Power-spectrum outputs (docs/design.md, "Files"): a text table and an HDF5 file, both written
// atomically, and the `orbis pk SNAPSHOT` command that measures any GADGET-layout snapshot.
//
// Text: one header line naming the columns and their units (plus a, z, box, N and the
// estimator settings after a semicolon), then one row per bin:
//   k_mean [h/Mpc]  P [(Mpc/h)^3]  N_modes  shot_noise [(Mpc/h)^3]  P_lin_D2 [(Mpc/h)^3]  fold
// HDF5: /Header attributes Time, Redshift, BoxSize, NumPart, Grid, Window, Interlacing,
// FoldFactor, Binning, ShotNoiseSubtracted; /PowerSpectrum datasets K, Power, NumModes,
// ShotNoise, LinearPower, Fold (each with a Units attribute); /Parameters and /Config.
#pragma once
#include <string>

#include "analysis/power_spectrum.hpp"

namespace orbis {

class Params;

void write_power_spectrum_text(const std::string& path, const PowerSpectrum& pk, double a);
void write_power_spectrum_hdf5(const std::string& path, const PowerSpectrum& pk, double a,
                               const Params& params);
// BASE.txt and BASE.hdf5.
void write_power_spectrum(const std::string& base_path, const PowerSpectrum& pk, double a,
                          const Params& params);

struct PkCommandOptions {
  std::string snapshot;
  std::string out;               // base path; empty: the snapshot's path without .hdf5 + "_pk"
  int grid = 0;                  // 0: 2 x particles per side, at most 512
  std::string window = "tsc";
  bool interlacing = true;
  int fold = 1;
  std::string binning = "linear";
  int num_bins = 0;
  bool subtract_shot_noise = false;
  bool overwrite = false;        // replace existing output files (else: refuse before any work)
};

// `orbis pk`: reads the snapshot (read_snapshot: ours, GADGET-4, N-GenIC, MUSIC, monofonIC),
// measures P(k) and writes the two files. No parameter file is needed; the settings used are
// recorded in /Parameters like a run's. Over several ranks (collective) each reads a share
// of the snapshot, the mesh is distributed, and rank 0 writes. Existing output files are
// replaced only with `overwrite`; otherwise the command stops before reading the snapshot.
void run_pk_command(const PkCommandOptions& options, const Comm& comm = Comm::world());

}  // namespace orbis
