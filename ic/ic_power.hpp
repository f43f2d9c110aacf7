// The ICs' self-test: the power spectrum of a field's Fourier modes in linear bins of the
// fundamental frequency k_f = 2 pi / L (bin b holds (b - 1/2) k_f <= |k| < (b + 1/2) k_f),
// compared with the input spectrum mode by mode, and a chi^2 of the comparison.
// Modes are counted over the full k space (both k and -k); the dropped modes (k = 0 and the
// Nyquist planes, ic/modes.hpp) are left out.
#pragma once
#include <complex>
#include <cstdint>
#include <string>
#include <vector>

#include "ic/gaussian_field.hpp"
#include "pm/fft_mesh.hpp"

namespace orbis::ic {

struct PowerBin {
  double k_mean = 0;       // mean |k| of the bin's modes, h/Mpc
  double p_measured = 0;   // mean of V |delta_k|^2 * scale, (Mpc/h)^3
  double p_input = 0;      // mean of the input P(k) over the same modes
  double p2_input = 0;     // mean of P(k)^2 over them (for the variance of p_measured)
  std::int64_t modes = 0;
  // Variance of p_measured for a Gaussian field: each (k, -k) pair is one exponential deviate.
  double variance() const { return modes > 0 ? 2.0 * p2_input / static_cast<double>(modes) : 0.0; }
};

// `modes` in the complex layout of `layout` (its n^3 grid and its x slab), normalised as
// delta_k of ic/gaussian_field.hpp (P = V |delta_k|^2), times `scale` (e.g. D(a)^2). The bins
// are summed over the slabs of layout.comm() (collective); the result does not depend on the
// number of threads.
std::vector<PowerBin> bin_power(const FftMesh<double>& layout, const std::complex<double>* modes, double box_mpc_h,
                                double scale, const PowerFunction& p_input);

struct PowerCheck {
  double chi2 = 0;
  int dof = 0;                 // bins used
  double tolerance = 0;        // accepted |chi2/dof - 1|: 5 sqrt(2/dof)
  double max_relative_deviation = 0;   // max |P_measured / P_input - 1| over the bins used
  bool consistent = false;
  double chi2_per_dof() const { return dof > 0 ? chi2 / dof : 0.0; }
};

// Bins with k_mean < k_max_h_mpc. A Gaussian field is consistent when chi^2/dof lies within
// 1 +- 5 sqrt(2/dof); a fixed-amplitude field has no scatter, so it must match every bin to
// 1e-6 instead.
PowerCheck check_power(const std::vector<PowerBin>& bins, double k_max_h_mpc, bool fixed_amplitude);

// The text table of ic_power.txt: one header line, then one row per non-empty bin.
std::string power_table_text(const std::vector<PowerBin>& delta, const std::vector<PowerBin>& displacement);

}  // namespace orbis::ic
