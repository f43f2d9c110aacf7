// The seam between the run loop and where the particles live. The run loop (one piece of code
// for every backend) decides the times, the time bins and the kick and drift factors; a
// StepEngine holds the particle state and does the work: forces, kicks, drifts, the
// per-particle step criterion and the few reductions the step criteria need. The host engine
// (host_engine.hpp) keeps the particles in host memory (PM with FFTW, the FMM on the CPU,
// P2P on any P2PEvaluator); the CUDA engine keeps them in device memory across steps and
// gives them to the host only for outputs and checkpoints. make_step_engine picks one.
//
// Block time steps (power-of-two bins, as GADGET-4, PKDGRAV3, SWIFT): the long-range (PM) step
// spans dln_pm in ln a; a particle in bin k takes short-range steps of dln_pm / 2^k, so bin 0
// is the PM step itself. At a sync point the active particles are exactly those whose bin
// k >= min_active_bin (the bins whose steps end there); at the start and end of a PM step
// every particle is active (min_active_bin = 0). The bins travel with the particles
// (Particles::time_bin), so checkpoints and MPI migration carry them.
//
// Every verb is a loop over the particle arrays (a kernel) or a reduction whose result does
// not depend on the thread count or the order of arrival (the run is bitwise reproducible).
// Units: positions comoving Mpc/h, momenta p = a^2 dx/dt in km/s, accelerations comoving
// g = -grad(phi) in (km/s)^2/(Mpc/h) (p += g * int da/(a^2 H)), as everywhere in orbis.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/power_spectrum.hpp"
#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/hostdevice.hpp"
#include "core/particles.hpp"
#include "core/timer.hpp"

namespace orbis {

class Params;

// What one force computation cost (the step log sums them per step).
struct ForceStats {
  PhaseTimes times;            // pm, tree, walk, m2l, p2p, ...
  double p2p_interactions = 0;
  double m2l_interactions = 0;
  std::string p2p_where;       // "cpu (2 threads)", "cuda (...)", or empty
  std::size_t device_bytes = 0;  // device memory the engine holds after the step (the log); 0: none or not reported
};

struct ShortRangeStats;
// A host engine's short-range computation (fmm/short_range.hpp) added to a step's stats: its
// phases, interaction counts and where P2P ran (integrate/host_engine.cpp).
void add_short_range_stats(const ShortRangeStats& s, ForceStats& stats);

constexpr int kMaxTimeBins = 32;

// The kicks of one sync point; momenta p += g * factor with factor = int da/(a^2 H).
// A particle whose short-range factor equals long_range is kicked with its whole force,
// p += (g_long + g_short) * factor (one rounding, as a single global step does); otherwise
// p += g_long * long_range, then p += g_short * short_range[bin] when it is active.
struct KickPlan {
  double long_range = 0;                          // every particle: p += g_long * long_range
  int min_active_bin = kMaxTimeBins;              // particles with bin >= this get ...
  std::array<double, kMaxTimeBins> short_range{}; // ... p += g_short * short_range[bin]
};

// Particles per bin after assign_bins (all particles, active or not).
using BinCounts = std::array<std::uint64_t, kMaxTimeBins>;

// The per-particle step criterion as assign_bins applies it. The run loop turns the
// acceleration criterion (integrate/block_steps.hpp) into one threshold: bin 0's step is short
// enough for |g| <= acc_bin0, and since the allowed step scales as |g|^(-1/2), bin k's for
// |g| <= acc_bin0 * 4^k (g = g_long + g_short, comoving (km/s)^2/(Mpc/h)).
struct BinRule {
  int min_active_bin = 0;            // only particles with bin >= this are (re)assigned ...
  int max_bin = kMaxTimeBins - 1;    // ... to a bin in [min_active_bin, max_bin]
  double acc_bin0 = HUGE_VAL;         // infinite: no criterion (every particle to min_active_bin)
};

// The bin of a particle with |g|^2 = g2 under `rule` (both engines use this one definition):
// the smallest k >= min_active_bin with g2 <= (acc_bin0 4^k)^2, at most max_bin. The thresholds
// are exact (products by 16), so the choice is the same on every backend.
ORBIS_HD int bin_for_acceleration(double g2, const BinRule& rule) {
  int k = 0;
  for (double threshold = rule.acc_bin0 * rule.acc_bin0; k < rule.max_bin && g2 > threshold; ++k) threshold *= 16;
  k = k < rule.min_active_bin ? rule.min_active_bin : k;
  return k > rule.max_bin ? rule.max_bin : k;
}

// What the energy check (integrate/energy.hpp) asks of an engine that computes the terms of W
// that need the positions where it holds them (StepEngine::potential_energy_terms): the pair
// sum's rule (fmm/pair_energy.hpp), the force's; the mesh term is the engine's own PM's.
struct PotentialEnergyRequest {
  double box = 0;         // Mpc/h
  double r_s = 0;         // the split scale, Mpc/h
  double cut = 0;         // pairs at r >= cut contribute nothing, Mpc/h
  double softening = 0;   // Plummer-equivalent eps, Mpc/h
  double cut_shift = 0;   // the shifted cut's a, 1/(Mpc/h)^2 (PairPotentialInput::cut_shift; 0: sharp)
};
// The answer, for all of the engine's particles.
struct PotentialEnergyTerms {
  double mesh = 0;            // (1/2) sum m phi_long(x_i), (km/s)^2 1e10 Msun/h (PmSolver::potential_energy)
  double pair_sum = 0;        // sum over pairs within the cut of erfc(s / 2r_s) / s, h/Mpc (pair_potential_sum_cpu's)
  double mass = 0;            // the particles' mass, 1e10 Msun/h
  std::uint64_t count = 0;    // the particles
  bool mesh_from_forces = false;   // the mesh term summed in the force pass before (expect_potential_energy)
};

class StepEngine {
 public:
  virtual ~StepEngine() = default;
  virtual std::string describe() const = 0;
  // Plummer-equivalent softening, comoving Mpc/h (the step criterion); 0 when unsoftened.
  virtual double softening() const = 0;
  // True when there is a short-range force (TreePM): without one (PM only) there is nothing
  // to kick on the bins, and every particle stays in bin 0.
  virtual bool has_short_range() const = 0;

  // Takes the run's particles (time_bin empty: all in bin 0; else one bin per particle).
  virtual void load(Particles particles) = 0;
  // The state on the host, brought up to date (the CUDA engine downloads it): outputs and
  // checkpoints. Valid until the next call that changes the state.
  virtual const Particles& particles() = 0;
  // A copy of particles() for the caller to keep (the outputs' host thread). An engine whose
  // particles() is only a cache of a state held elsewhere (the CUDA engine's device) gives
  // that cache away instead.
  virtual Particles particles_copy() { return particles(); }
  // A copy of particles_copy() that its keeper is done with (an output written): an engine
  // that gives its cache away may fill these arrays next instead of new ones (whose first
  // touch, 0.9 GB at 256^3, costs a quarter of a second).
  virtual void recycle(Particles spent) { (void)spent; }
  // g_long + g_short of every particle, on the host (snapshots with accelerations); only
  // meaningful when every particle is synchronised.
  virtual const std::vector<Vec3d>& accelerations() = 0;

  // Forces at the current positions: the long-range force of every particle when
  // `long_range`, the short-range force of the active particles (bin >= min_active_bin);
  // the others keep the forces they have. Restarts rely on this: at the end of a PM step
  // compute_forces(true, 0) must give the same bits whether the engine ran the steps before
  // or was just load()ed with the checkpoint's particles (checkpoints hold no forces). An
  // engine that carries state between force computations (a tree refitted between
  // rebuilds) says whether its last long-range computation was free of it
  // (forces_from_fresh_tree); the run loop writes checkpoints only there.
  virtual void compute_forces(bool long_range, int min_active_bin, ForceStats& stats) = 0;
  // Whether the last long-range compute_forces() gave the forces a freshly loaded engine
  // would give at these positions (its tree built from them, not refitted): a checkpoint
  // may be written now (else the run loop waits for a PM step where it is). The host engine
  // builds its tree at every full step: always true.
  virtual bool forces_from_fresh_tree() const { return true; }
  // What the engine's tree policy did over the run, for its last log line ("": nothing to say).
  virtual std::string tree_summary() const { return {}; }
  // Whether a sync point computes every particle of a tree leaf that holds an active one (the
  // ETA's price of a sync point: integrate/cost_model.hpp), not only the active particles.
  virtual bool computes_whole_leaves() const { return false; }
  virtual void kick(const KickPlan& plan) = 0;
  // Every particle: x += p * drift_factor, wrapped into [0, box).
  virtual void drift(double drift_factor) = 0;

  // The reductions of the step criteria.
  // max over particles of |g_long + g_short|, (km/s)^2/(Mpc/h): the global step's criterion.
  virtual double max_acceleration() = 0;
  // sqrt(mean |p|^2) over particles, km/s: the PM step's criterion.
  virtual double rms_momentum() = 0;
  // The sum of p over all particles, km/s (times the mass: the total momentum, which gravity
  // conserves; with individual masses each p weighs masses[i] / mass): the step log's check
  // at the end of each PM step. NaN: not provided.
  virtual Vec3d total_momentum() { return Vec3d{NAN, NAN, NAN}; }
  // The terms of the energy check's W that need the positions (PotentialEnergyTerms),
  // computed where the engine holds the particles; nullopt: the engine does not compute them
  // (the host engine, or not enough device memory), and the check takes particles()
  // (integrate/energy.hpp). Collective over an engine's ranks: all return terms (the same on
  // every rank) or none does. The CUDA engine computes them on the device(s).
  virtual std::optional<PotentialEnergyTerms> potential_energy_terms(const PotentialEnergyRequest& /*request*/) {
    return std::nullopt;
  }
  // A hint from the run loop: the next long-range compute_forces() is followed by
  // potential_energy_terms() at the same positions (the energy check at that PM step's end).
  // An engine may sum a term there from what the force pass computes anyway (the CUDA
  // engine: the PM's density modes give the mesh term); potential_energy_terms() answers the
  // same bits whether it did or not. Over ranks the same on every rank.
  virtual void expect_potential_energy(bool /*expected*/) {}
  // New bins for the particles with bin >= rule.min_active_bin (bin_for_acceleration of
  // their |g_long + g_short|); returns the particles per bin, all of them.
  virtual BinCounts assign_bins(const BinRule& rule) = 0;

  // The power spectrum of the particles where they are (analysis/power_spectrum.hpp's
  // estimator, without the linear column: NaN), for an output; nullopt: the engine does not
  // measure it (the host engine, or not enough device memory), and the output measures it
  // from its copy of the particles. Over ranks every rank calls it and gets the same answer.
  // The CUDA engine measures it on the device (gpu/power_spectrum_cuda.cuh; over ranks
  // gpu/power_spectrum_cuda_ranks.hpp).
  virtual std::optional<PowerSpectrum> power_spectrum(const PowerSpectrumSettings& /*settings*/) {
    return std::nullopt;
  }

  // An isolated system's softened potential sums phi~_i = sum_{j != i} w_j (r_ij^2 +
  // eps^2)^(-1/2) of the particles where they are, in particles()'s order
  // (integrate/conservation.hpp: W = -G m^2 pair_sum_of_potentials, the snapshots' Potential
  // -G m phi~_i; eps = softening(), w the mass weights); nullopt: the engine does not compute
  // them, and the run sums them on the host from its copy. The CUDA engine sums them on the
  // device (gpu/vacuum_potential_cuda.cuh); sums_potentials() says so before load().
  virtual std::optional<std::vector<double>> softened_potentials() { return std::nullopt; }
  virtual bool sums_potentials() const { return false; }

  // The friends-of-friends groups of the particles where they are, for an output's halo
  // catalogue: for each particle (in particles()'s order) the smallest index of its group's
  // members, the groups exactly analysis/fof.hpp's for linking length b x the mean spacing
  // (b = [analysis] fof_linking_length). nullopt: the engine does not link them (the host
  // engine, several ranks, or not enough device memory), and the output links them from its
  // copy. The CUDA engine on one rank links them on the device (gpu/fof_cuda.cuh).
  virtual std::optional<std::vector<std::uint32_t>> fof_labels(double /*linking_length_over_spacing*/) {
    return std::nullopt;
  }

  // Over several ranks, the friends-of-friends links of this rank's particles together with
  // `ghosts` (the other ranks' particles within one linking length of them, in [0, box): the
  // output imports them, analysis/fof_ranks.hpp), with linking length link_mpc_h, made where
  // the particles are: for each particle (in particles()'s order), then each ghost, the
  // smallest index of its component in that order (fof::LocalLinker's form; the links
  // analysis/fof.hpp's host linker makes). nullopt: the engine does not link them (the host
  // engine, one rank, or not enough device memory), and the output links them on the host.
  // The CUDA engine links them on its GPU (gpu/fof_cuda.cuh), positions wrapped into the box.
  virtual std::optional<std::vector<std::uint32_t>> fof_labels_with_ghosts(const std::vector<Vec3d>& /*ghosts*/,
                                                                           double /*link_mpc_h*/) {
    return std::nullopt;
  }
  // Whether fof_labels_with_ghosts may link: over ranks the output then imports the ghosts on
  // the main thread, before the output's thread starts (integrate/outputs.hpp engine_fof_links).
  virtual bool links_fof_with_ghosts() const { return false; }

  // Over several ranks: the state besides the particles that decides which rank computes
  // what in the steps to come (the rank domains), as bytes for a checkpoint written at the
  // end of a PM step; "" when there is none (one rank). restore_domain_state takes it back
  // before load(), so that the restart's first compute_forces(true, 0) finds each particle
  // where the run that wrote it had it. `what` names the checkpoint in errors.
  // Defined here, not in a .cpp: the class stays header-only, so that the engines of lower
  // layers (gpu/step_engine_cuda) link without the integrate library.
  virtual std::string domain_state() const { return {}; }
  virtual void restore_domain_state(const std::string& state, const std::string& what) {
    if (!state.empty()) fail("{}: it holds rank domains, which this step engine ({}) does not keep", what, describe());
  }
};

// The engine for [gravity] and [gpu]: every setting is checked here, before any work. Over
// several ranks (comm) each rank's engine holds its share of the particles.
std::unique_ptr<StepEngine> make_step_engine(const Params& params, const Comm& comm = Comm::world());

}  // namespace orbis
