// The matter power spectrum of a periodic particle set, P(k) = V <|delta_k|^2>, with k in
// h/Mpc and P in (Mpc/h)^3 (the convention of GADGET-4, Pylians and nbodykit).
//
//   delta_k = F(k) / (N W(k)),  F = FFT of the CIC/TSC particle counts on an N_g^3 mesh,
//   W(k) = prod_i sinc^p(k_i cell / 2) the window (deconvolved once).
// Interlacing (on by default; Sefusatti et al. 2016): a second mesh of the particles shifted by
// half a cell along each axis, combined as F = (F_1 + F_2 e^{i k.(1,1,1) cell/2}) / 2, which
// cancels the aliased images with odd n_x + n_y + n_z.
// Folding (GADGET-4, PKDGRAV3): with F > 1 a second spectrum is measured from positions taken
// modulo L/F, whose mesh modes are the modes F k of the full box, reaching F times the
// Nyquist frequency with the same mesh; rows with bin centre below half the unfolded Nyquist
// frequency come from the unfolded spectrum, the rest from the folded one.
// Shot noise: each bin reports the expected power of a Poisson sample through this estimator,
// (V/N) <sum_images W^2(k + 2 k_N n) / W^2(k)> over its modes (Jing 2005; images with odd
// n_x + n_y + n_z left out when interlaced). It equals V/N at k << k_Nyquist and exceeds it
// near k_Nyquist, where a deconvolved estimator also deconvolves the aliased noise.
// N_modes counts k and -k separately (half of them are independent).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/vec3.hpp"
#include "pm/mass_assignment.hpp"

namespace orbis {

class Params;

struct PowerSpectrumSettings {
  int grid_side = 64;               // N_g, even
  Window window = Window::tsc;
  bool interlacing = true;
  int fold_factor = 1;              // F; 1: no folding
  bool log_bins = false;            // false: linear in units of k_F = 2 pi / L
  int num_bins = 0;                 // 0: one per k_F (linear) or 10 per decade (log)
  bool subtract_shot_noise = false;

  // [analysis] pk_grid_side (0: 2 x particles_per_side), pk_assignment, pk_interlacing,
  // pk_fold_factor, pk_binning, pk_num_bins, pk_subtract_shot_noise.
  static PowerSpectrumSettings from_params(const Params& params);
};

struct PowerSpectrumBin {
  double k_mean = 0;        // mean |k| of the bin's modes, h/Mpc
  double power = 0;         // (Mpc/h)^3; shot noise subtracted if the settings say so
  std::int64_t modes = 0;   // number of modes, k and -k counted separately
  double shot_noise = 0;    // expected Poisson power in this bin, (Mpc/h)^3
  double linear = 0;        // linear-theory P_lin(k_mean) D^2, (Mpc/h)^3; NaN when not given
  int fold = 1;             // 1: unfolded spectrum, F: folded
};

struct PowerSpectrum {
  PowerSpectrumSettings settings;
  double box_mpc_h = 0;
  std::uint64_t num_particles = 0;
  std::vector<PowerSpectrumBin> bins;   // increasing k; empty bins left out
};

// P_lin(k) D(z)^2 at k in h/Mpc, in (Mpc/h)^3, e.g.
//   [&](double k) { return power(k) * d * d; }   (LinearPower power, D = cosmology.growth(a))
using LinearPowerFn = std::function<double(double)>;

// The spectrum of the particles of every rank of comm (collective; each rank passes its own):
// the mesh is distributed in slabs (pm/fft_mesh.hpp) and the particles travel to their slabs
// (pm/slab_routing.hpp); the result is the same on every rank and equals one rank's bit for
// bit, for any thread count and particle order: the counts are assigned in 64-bit fixed point
// (pm/fixed_point_mesh.hpp), the transforms are the reproducible ones and the bins are summed
// in x-plane order. Memory: two meshes (one without interlacing) of 8 bytes a node, and the
// fixed-point sums of one of them (8 bytes a node) while assigning.
PowerSpectrum measure_power_spectrum(const std::vector<Vec3d>& pos, double box_mpc_h,
                                     const PowerSpectrumSettings& settings,
                                     const LinearPowerFn& linear = {}, const Comm& comm = Comm::self());

}  // namespace orbis
