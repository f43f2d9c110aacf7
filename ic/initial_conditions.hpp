// Grid initial conditions (the ic/ layer): a Gaussian random field with the linear
// P(k) (ic/gaussian_field.hpp), Zel'dovich or 2LPT displacements and momenta (ic/lpt.hpp),
// at a_init = 1 / (1 + ic.z_init).
//   positions   q + D1 psi1 + D2 psi2 wrapped into [0, L), q = (ix, iy, iz) L / N
//   momenta     p = a^2 dx/dt = a^2 H(a) (f1 D1 psi1 + f2 D2 psi2), km/s
//   IDs         1-based grid order, ID - 1 = (ix N + iy) N + iz (also the storage order)
//   mass        omega_m rho_crit0 L^3 / N^3, 1e10 Msun/h
// Memory: the particles, one FFT mesh and one array of modes (delta_k), about 72 N^3 bytes,
// within the budget of 2 x (particle arrays + one FFT grid) = 2 x 64 N^3 bytes.
// Reproducibility: the white noise depends only on (seed, grid point); every other step is a
// fixed sequence of FFTs (FftPlan::reproducible) and element-wise operations, so the ICs are
// bitwise the same for any number of OpenMP threads and MPI ranks
// (tests/unit/test_ic_reproducible.cpp, tests/mpi/test_ic_ranks.cpp).
// Ranks: each makes the particles of its x slab of the grid (pm/fft_mesh.hpp's slab_planes
// over the particle grid), in ID order; the concatenation over the ranks is the one-rank set.
#pragma once
#include <cstdint>
#include <vector>

#include "core/comm.hpp"
#include "core/particles.hpp"
#include "core/timer.hpp"
#include "ic/ic_power.hpp"

namespace orbis {

class Params;
class Cosmology;
class LinearPower;

struct IcSettings {
  int n = 0;                 // particles per side
  double box_mpc_h = 0;
  double z_init = 49.0;
  std::uint64_t seed = 12345;
  int lpt_order = 2;
  bool fixed_amplitude = false, paired = false;
  bool self_test = false;    // measure the power spectra into IcReport

  // box.*, ic.*; checks what the schema cannot (N even, z_init within the growth tables).
  static IcSettings from_params(const Params& params);
};

struct IcReport {
  double a_init = 0;
  double d1 = 0, d2 = 0, f1 = 0, f2 = 0;   // growth factors and rates at a_init
  double hubble = 0;                        // H(a_init), km/s/(Mpc/h)
  double delta_rms = 0;                     // of the grid density field at a_init
  double displacement_rms_mpc_h = 0, displacement_max_mpc_h = 0;   // |x - q|
  double momentum_rms_km_s = 0;             // |p|
  // Self-test (IcSettings::self_test): delta as generated, and -div(x - q) of the particles,
  // both against P_lin(k) D1(a_init)^2.
  std::vector<ic::PowerBin> delta_power, displacement_power;
  PhaseTimes times;                         // seconds per phase
};

// This rank's particles; collective over `comm` (the report's values are global).
Particles make_initial_conditions(const IcSettings& settings, const Cosmology& cosmology, const LinearPower& power,
                                  IcReport* report = nullptr, const Comm& comm = Comm::self());
// The run loop's entry point: IcSettings::from_params, no self-test.
Particles make_initial_conditions(const Params& params, const Cosmology& cosmology, const LinearPower& power,
                                  const Comm& comm = Comm::self());

// Logs the report: growth factors, rms values, and the self-test's chi^2/dof (k < k_Nyq / 2).
void log_ic_report(const IcSettings& settings, const IcReport& report);

}  // namespace orbis
