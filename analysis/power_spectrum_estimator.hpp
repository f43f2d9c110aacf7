// The parts of the P(k) estimator (analysis/power_spectrum.hpp) that every backend shares: the
// binning, the window and alias tables, the per-bin sums and how they become the spectrum's
// rows (fold switch, shot noise, k_mean). measure_power_spectrum sums the modes on the host;
// the CUDA step engine sums them on the device (gpu/power_spectrum_cuda.cuh) from these same
// tables, so that both measure one estimator.
#pragma once
#include <cstdint>
#include <vector>

#include "analysis/power_spectrum.hpp"
#include "core/hostdevice.hpp"
#include "core/vec3.hpp"

namespace orbis::pk {

// Bins on |m|, the mode's length in units of the mesh's fundamental frequency, for modes
// with 1 <= |m| <= n/2 (inside the Nyquist sphere).
struct Binning {
  bool log = false;
  int count = 0;
  double width = 1;    // linear: edges at 0.5 + i * width
  double log_top = 1;  // log: edges at (n/2)^(i / count)

  Binning(const PowerSpectrumSettings& s, int n);
  int index(double m) const;
  double centre(int b) const;
  // The bins as ranges of |m|^2 (an integer on the mesh): bin b holds the modes with
  // edges[b] <= |m|^2 < edges[b + 1], |m| = sqrt(|m|^2) binned by index() as the host does
  // (the same bits: no log or rounding on the device). count + 1 edges from 1 to (n/2)^2 + 1.
  std::vector<std::int64_t> squared_edges(int n) const;
};

// Per mesh index along one axis: the window W_1(m) and the alias sums of the shot noise,
// A(m) = sum_l W_1^2(m + l n), B(m) = sum_l (-1)^l W_1^2(m + l n) (Jing 2005). The terms fall
// as l^-2p, so |l| <= 400 leaves < 1e-8.
struct AxisTables {
  std::vector<double> w, a, b;
  AxisTables(Window window, int n);
};

// One spectrum's sums over the modes of each bin, weighted by the mode count (k and -k).
struct BinSums {
  std::vector<double> k, power, shot;   // sums of |m|, of the power and of the shot noise
  std::vector<std::int64_t> modes;
  explicit BinSums(int count) : k(count, 0), power(count, 0), shot(count, 0), modes(count, 0) {}
};

// The spectrum's rows from the unfolded sums and, with fold_factor > 1, the folded ones:
// rows with bin centre below half the unfolded Nyquist frequency from the first, the rest
// from the second; empty bins left out.
PowerSpectrum assemble(const PowerSpectrumSettings& settings, double box_mpc_h, std::uint64_t total,
                       const BinSums& unfolded, const BinSums* folded, const LinearPowerFn& linear);

// A position folded F times: modulo L/F, stretched back to [0, L) (mesh mode m is then the
// box's mode F m).
ORBIS_HD double fold_position(double x, double box_mpc_h, int fold) {
  return periodic_wrap_position(x, box_mpc_h / fold) * fold;
}

}  // namespace orbis::pk
