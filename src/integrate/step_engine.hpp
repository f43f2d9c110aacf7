// The seam between the run loop and where the particles live. The run loop (one piece of code
// for every backend) decides the times, the time bins and the kick and drift factors; a
// StepEngine holds the particle state and does the work: forces, kicks, drifts and the
// per-particle step criterion. The host engine keeps the particles in host memory (PM with
// FFTW, the FMM on the CPU, P2P on any P2PEvaluator); the CUDA engine keeps them in device
// memory across steps and gives them to the host only for outputs and checkpoints.
//
// Block time steps (power-of-two bins, as GADGET-4, PKDGRAV3, SWIFT): the long-range (PM) step
// spans dln_pm in ln a; a particle in bin k takes short-range steps of dln_pm / 2^k, so bin 0
// is the PM step itself. At a sync point the active particles are exactly those whose bin
// k >= min_active_bin (the bins whose steps end there); at the start and end of a PM step
// every particle is active (min_active_bin = 0). The bins travel with the particles
// (Particles::time_bin), so checkpoints and MPI migration carry them.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "core/particles.hpp"
#include "integrate/gravity.hpp"

namespace orbis {

constexpr int kMaxTimeBins = 32;

// The kicks of one sync point; momenta p += g * factor with factor = int da/(a^2 H).
struct KickPlan {
  double long_range = 0;                          // every particle: p += g_long * long_range
  int min_active_bin = kMaxTimeBins;              // particles with bin >= this get ...
  std::array<double, kMaxTimeBins> short_range{}; // ... p += g_short * short_range[bin]
};

// Particles per bin after assign_bins (all particles, active or not).
using BinCounts = std::array<std::uint64_t, kMaxTimeBins>;

class StepEngine {
 public:
  virtual ~StepEngine() = default;
  virtual std::string describe() const = 0;
  // Plummer-equivalent softening, comoving Mpc/h (the step criterion); 0 when unsoftened.
  virtual double softening() const = 0;

  // Takes the run's particles (time_bin empty: all in bin 0).
  virtual void load(Particles particles) = 0;
  // The state on the host, brought up to date (the CUDA engine downloads it): outputs and
  // checkpoints. Valid until the next call that changes the state.
  virtual const Particles& particles() = 0;
  // g_long + g_short of every particle, on the host (snapshots with accelerations); only
  // meaningful when every particle is synchronised.
  virtual const std::vector<Vec3d>& accelerations() = 0;

  // Forces at the current positions: the long-range force of every particle when
  // `long_range`, the short-range force of the active particles (bin >= min_active_bin);
  // the others keep the forces they have.
  virtual void compute_forces(bool long_range, int min_active_bin, ForceStats& stats) = 0;
  virtual void kick(const KickPlan& plan) = 0;
  // Every particle: x += p * drift_factor, wrapped into [0, box).
  virtual void drift(double drift_factor) = 0;
};

}  // namespace orbis
