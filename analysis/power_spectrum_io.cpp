#include "analysis/power_spectrum_io.hpp"

#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "core/timer.hpp"
#include "io/atomic_file.hpp"
#include "io/hdf5_file.hpp"
#include "io/output_guard.hpp"
#include "io/provenance.hpp"
#include "io/snapshot.hpp"

namespace orbis {
namespace {

std::string settings_summary(const PowerSpectrum& pk) {
  const auto& s = pk.settings;
  return fmt::format("grid {}^3, {}, interlacing {}, fold {}, {} bins, shot noise {}", s.grid_side,
                     window_name(s.window), s.interlacing ? "on" : "off", s.fold_factor,
                     s.log_bins ? "log" : "linear", s.subtract_shot_noise ? "subtracted" : "not subtracted");
}

// --out, or the snapshot's path without .hdf5 plus "_pk".
std::string output_base(const PkCommandOptions& o) {
  if (!o.out.empty()) return o.out;
  std::string base = o.snapshot;
  const std::string ext = ".hdf5";
  if (base.size() > ext.size() && base.compare(base.size() - ext.size(), ext.size(), ext) == 0)
    base.resize(base.size() - ext.size());
  return base + "_pk";
}

}  // namespace

void write_power_spectrum_text(const std::string& path, const PowerSpectrum& pk, double a) {
  std::string text = fmt::format(
      "# k_mean [h/Mpc]  P [(Mpc/h)^3]  N_modes  shot_noise [(Mpc/h)^3]  P_lin_D2 [(Mpc/h)^3]  fold"
      "  ; a = {:.8g}, z = {:.8g}, box = {:.10g} Mpc/h, N = {}, {}\n",
      a, 1.0 / a - 1.0, pk.box_mpc_h, pk.num_particles, settings_summary(pk));
  for (const auto& b : pk.bins)
    text += fmt::format("{:.12e} {:.12e} {} {:.12e} {:.12e} {}\n", b.k_mean, b.power, b.modes,
                        b.shot_noise, b.linear, b.fold);
  write_text_atomically(path, text);
}

void write_power_spectrum_hdf5(const std::string& path, const PowerSpectrum& pk, double a,
                               const Params& params) {
  H5Writer file(path);
  const auto& s = pk.settings;
  file.create_group("/Header");
  file.attribute("/Header", "Time", a);
  file.attribute("/Header", "Redshift", 1.0 / a - 1.0);
  file.attribute("/Header", "BoxSize", pk.box_mpc_h);
  file.attribute("/Header", "NumPart", static_cast<std::uint64_t>(pk.num_particles));
  file.attribute("/Header", "Grid", static_cast<std::int32_t>(s.grid_side));
  file.attribute("/Header", "Window", window_name(s.window));
  file.attribute("/Header", "Interlacing", static_cast<std::int32_t>(s.interlacing));
  file.attribute("/Header", "FoldFactor", static_cast<std::int32_t>(s.fold_factor));
  file.attribute("/Header", "Binning", s.log_bins ? "log" : "linear");
  file.attribute("/Header", "ShotNoiseSubtracted", static_cast<std::int32_t>(s.subtract_shot_noise));
  file.attribute("/Header", "Convention", "P(k) = V <|delta_k|^2>; N_modes counts k and -k");

  const std::size_t n = pk.bins.size();
  std::vector<double> k(n), power(n), shot(n), linear(n);
  std::vector<std::int64_t> modes(n);
  std::vector<std::int32_t> fold(n);
  for (std::size_t i = 0; i < n; ++i) {
    k[i] = pk.bins[i].k_mean;
    power[i] = pk.bins[i].power;
    modes[i] = pk.bins[i].modes;
    shot[i] = pk.bins[i].shot_noise;
    linear[i] = pk.bins[i].linear;
    fold[i] = pk.bins[i].fold;
  }
  file.create_group("/PowerSpectrum");
  auto dataset = [&](const char* name, const auto& values, const char* units) {
    const std::string full = std::string("/PowerSpectrum/") + name;
    file.write(full, values);
    file.attribute(full, "Units", units);
  };
  dataset("K", k, "h/Mpc (mean |k| of the bin's modes)");
  dataset("Power", power, "(Mpc/h)^3");
  dataset("NumModes", modes, "modes (k and -k counted separately)");
  dataset("ShotNoise", shot, "(Mpc/h)^3 (expected Poisson power of this estimator in the bin)");
  dataset("LinearPower", linear, "(Mpc/h)^3 (P_lin(k) D(z)^2; NaN when not available)");
  dataset("Fold", fold, "1: unfolded spectrum; F: positions folded F times");
  write_provenance(file, params);
  file.commit();
}

void write_power_spectrum(const std::string& base_path, const PowerSpectrum& pk, double a,
                          const Params& params) {
  write_power_spectrum_text(base_path + ".txt", pk, a);
  write_power_spectrum_hdf5(base_path + ".hdf5", pk, a, params);
}

void run_pk_command(const PkCommandOptions& o, const Comm& comm) {
  Stopwatch watch;
  // Cheap checks first, so a typo does not cost a snapshot read (the schema checks the rest).
  parse_window(o.window);
  if (o.binning != "linear" && o.binning != "log") fail("pk: --binning {}: expected linear or log", o.binning);
  if (o.grid != 0 && (o.grid < 4 || o.grid % 2 != 0)) fail("pk: --grid {}: expected an even number >= 4", o.grid);
  if (o.fold < 1) fail("pk: --fold {}: expected an integer >= 1", o.fold);
  const std::string base = output_base(o);
  refuse_to_replace({base + ".txt", base + ".hdf5"}, o.overwrite, "orbis pk");
  check_folder_writable(parent_folder(base), o.out.empty() ? "the snapshot's folder" : "--out");
  const Snapshot snap = read_snapshot(o.snapshot, comm);
  const auto& h = snap.header;
  const std::size_t count = h.num_total;
  log::info("pk: read {} particles from '{}' (box {} Mpc/h, a = {:.6g}, z = {:.6g})", count,
            o.snapshot, h.box_mpc_h, h.a, h.redshift);
  if (count == 0) fail("pk: snapshot '{}' holds no particles", o.snapshot);
  const int per_side = std::max(2, static_cast<int>(std::lround(std::cbrt(static_cast<double>(count)))));
  int grid = o.grid;
  if (grid == 0) grid = std::min(2 * per_side, 512);

  // The settings go through the parameter schema, so the command line is checked like a
  // parameter file and the HDF5 output records them in /Parameters.
  std::string toml = fmt::format(
      "[box]\nsize_mpc_h = {:.17g}\nparticles_per_side = {}\n"
      "[analysis]\npk_grid_side = {}\npk_assignment = \"{}\"\npk_interlacing = {}\n"
      "pk_fold_factor = {}\npk_binning = \"{}\"\npk_num_bins = {}\npk_subtract_shot_noise = {}\n",
      h.box_mpc_h, per_side, grid, o.window, o.interlacing, o.fold, o.binning, o.num_bins,
      o.subtract_shot_noise);
  if (h.omega_m > 0 && h.omega_m <= 2) {
    toml += fmt::format("[cosmology]\nomega_m = {:.17g}\n", h.omega_m);
    if (h.omega_lambda >= 0 && h.omega_lambda <= 3) toml += fmt::format("omega_lambda = {:.17g}\n", h.omega_lambda);
    if (h.h >= 0.2 && h.h <= 2) toml += fmt::format("h = {:.17g}\n", h.h);
  }
  const Params params = Params::parse(toml, "orbis pk " + o.snapshot);
  const PowerSpectrumSettings settings = PowerSpectrumSettings::from_params(params);

  const PowerSpectrum pk = measure_power_spectrum(snap.particles.pos, h.box_mpc_h, settings, {}, comm);
  run_collectively(comm, [&] {
    if (comm.is_root()) write_power_spectrum(base, pk, h.a, params);
  });
  log::info("pk: {} bins ({}) written to {}.txt and {}.hdf5 in {:.2f} s", pk.bins.size(),
            settings_summary(pk), base, base, watch.seconds());
}

}  // namespace orbis
