// The step log's ETA: the wall time until the run ends.
//
// Hierarchical steps (forecast_remaining_seconds): the cost to come is forecast from the
// physics the run already knows, since nothing in the first part of a run shows how much
// dearer the steps will get as structure forms. Per PM step, every particle is kicked
// 2^bin times, its bin the one its |g| needs (integrate/timestep.hpp: bin k holds
// |g| <= acc_bin0 4^k, acc_bin0 = eps a^3 (eta H / dln_pm)^2), and there are 2^deepest sync
// points. The distribution of |g| (comoving) comes from the linear power spectrum:
//   - the field: the linear acceleration g = 3/2 Omega_m H0^2 D(a) psi (psi the linear
//     displacement, Gaussian: |g| Maxwellian with the 3D rms of psi over the box's modes);
//   - the haloes: the Press-Schechter mass fraction in haloes of mass M >= one particle,
//     each a singular isothermal sphere of 200 times the mean density (the mass fraction with
//     |g| > G is g_vir / G), its |g| Plummer-softened as the P2P kernel's (none above
//     2 / (3 sqrt 3) G M / (r_vir eps), and less mass near that peak);
//   - a particle exceeds G if either does: P = 1 - (1 - P_field)(1 - P_halo).
// So the fraction P_k of particles in bins >= k, and of a PM step's sync points 2^(k-1) have
// bins >= k active (k = 1 .. deepest), the last one all of them.
//
// The seconds, each part from what the run measures (the recent PM steps: the last half of
// the ln a run so far, at least 3): a PM step costs
//   E + sum_k 2^(k-1) (s0 + e A(P_k)),
// E its last sync point (every particle active; measured), s0 what a sync point pays whatever
// its active count (the drift and kicks of every particle, the tree's refit, the walk's
// launches and the host's waits: the cheapest sub-step measured; before any, the full step's
// seconds outside the phases that follow the active particles and outside the tree, which
// there may be a build), e the full step's short-range work (E - s0 - its PM phase), and
// A(f) the share of it that a sync point with an active fraction f does. A(1) = 1; for small
// f it depends on how the engine goes by the active particles: an engine that computes
// every particle of a leaf (L particles) that holds an active one (the host engine with the
// CUDA P2P evaluator), or only the active targets (L = 1, A = f: the host engine's CPU P2P, and
// since 2026-11-29 the CUDA step engine). Before any sub-step is measured A is the share of leaves
// that hold an active particle where the forecast puts them (active_above): the field's
// anywhere, a leaf free of them with the chance (1 - P_field)^L; the haloes' in the shells
// of their spheres, filling the leaves inside and adding those their bounding spheres cut
// (far fewer than as many particles at random would touch: a halo's leaves are mostly all
// active or none); between f and 1 - (1 - f)^L. Once sub-steps are
// measured, A is drawn to f^alpha, alpha the one that prices the recent sub-steps at their
// measured seconds (less s0 each), with the weight m / (m + e) (m those measured seconds:
// the calibration counts for as much as it has seen work). The forecast's deepest bin is
// lowered to the one measured once the run has any (it predicts the single most accelerated
// particle, the least certain of its numbers).
//
// Global steps (predicted_remaining_seconds): the measured seconds per unit ln a over the
// recent PM steps, grown as they grew there (a least-squares exponential trend in ln a, at
// most e^kMaxCostGrowth per unit ln a, never falling), integrated to the end.
//
// Both add the outputs still to come times the measured seconds of one output (before the
// first one, an estimate), the energy check's potential W still to come times its measured
// seconds, and the wait for the last background output at the end (OutputCost).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "integrate/time_bins.hpp"

namespace orbis {

class Cosmology;
class LinearPower;

// The sub-steps (sync points before a PM step's end) whose active fraction f = active / N
// lies in [2^-(b+1), 2^-b), summed: the ETA prices a sync point by its f (cost_model.hpp).
struct SubStepCost {
  double syncs = 0, seconds = 0, active = 0;
};
constexpr int kSubStepBuckets = 48;   // f >= 2^-48: any particle count a run can hold

// The measured cost of one PM step (the ETA's history).
struct CostRecord {
  double ln_a = 0;            // ln a at the step's start
  double dln_a = 0;           // its length in ln a
  double particle_steps = 0;  // force evaluations in it (active particles summed over sync points)
  double seconds = 0;         // wall seconds of its sync points (outputs not included)
  // Not in checkpoints (which keep the four above; a restarted run's older records have 0):
  double syncs = 0;           // its sync points
  double deepest = 0;         // the deepest bin populated at any of them
  double end_seconds = 0;     // the seconds of its last sync point (every particle active), of which
  double end_pm = 0;          //   the long-range (PM) phase
  double end_other = 0;       //   and what no phase that follows the active particles or the tree
                              //   holds (the drift and kicks of every particle, the host's waits)
  double sub_min = 0;         // the cheapest sub-step's seconds (0: none)
  std::array<SubStepCost, kSubStepBuckets> sub{};
};

// What the run has measured of its steps so far (run_forecast.hpp measures it; a checkpoint
// keeps it, the four numbers of each record that it keeps).
struct MeasuredCosts {
  CostRecord pm_step;                // the PM step in progress, so far
  std::vector<CostRecord> history;   // the completed PM steps
};

// The cost per unit ln a grows at most e^kMaxCostGrowth per unit ln a in the trend of global
// steps: measured on a 256^3 run (the cost per ln a grew 5x between z = 8 and z = 0.5 and
// then flattened), an unbounded trend from the growth phase over-predicts the flat end by ~40%.
constexpr double kMaxCostGrowth = 0.5;

// What the run spends besides its steps.
struct OutputCost {
  int remaining = 0;          // outputs still to be written
  double seconds_each = 0;    // measured mean of those written, or an estimate
  // The energy check's potential W (integrate/energy.hpp): the evaluations still to come at
  // the outputs and the run's end, plus one every check_every PM steps (0: none), each as
  // long as those measured.
  int checks = 0;
  std::int64_t check_every = 0;   // [analysis] energy_check_every (up to 1e12: beyond int)
  double check_seconds = 0;
  double final_wait = 0;      // the wait at the run's end for the background writer's last output
};

// What the forecast needs of a run (code units: comoving Mpc/h, km/s, 1e10 Msun/h).
struct ClusteringInputs {
  double omega_m = 0.3;
  double softening = 0;          // comoving
  double eta = 0;                // time.eta
  double max_dln_a = 0.075;      // time.max_dln_a: the PM step of the forecast's bins
  double particles = 0;          // N
  double particle_mass = 0;
  double sigma_psi = 0;          // 3D rms linear displacement at D = 1 (k from 2 pi / L to pi n / L)
  std::vector<double> sigma_m;   // sigma(M_j) at z = 0, M_j = particle_mass 10^(j/4), j = 0 .. 4 log10 N
  // The particles whose short-range work one isolated active particle costs: 1 where only the
  // active targets are computed, a leaf's where whole leaves are (StepEngine::
  // computes_whole_leaves: leaf_particles). Not from the power spectrum: the run sets it.
  double work_particles = 1;

  // From the linear power spectrum of the run's ICs and its box.
  static ClusteringInputs from_power(const LinearPower& power, double omega_m, double box, double particles_per_side,
                                     double softening, double eta, double max_dln_a);
  std::string describe() const;   // the log line that eta_accuracy.py --replay reads back
};

struct BinForecast {
  double kicks = 1;   // per particle per PM step
  int deepest = 0;    // the deepest bin that holds at least one particle
  std::array<double, kDeepestBin + 1> above{};   // above[k]: the fraction in bins >= k (k = 1 .. deepest)
  std::array<double, kDeepestBin + 1> work{};    // work[k]: the prior A of a sync point with those active
};

// The mean particles per leaf of the ORB tree of n particles in leaves of at most max_leaf
// (tree/orb_tree.hpp: its shape depends on n and max_leaf alone).
double leaf_particles(double n, int max_leaf);

// The particles with comoving |g| > g_comoving at growth factor `growth`: their mass fraction
// f, and the prior share A of the short-range work that a sync point with them active does
// (leaves of in.work_particles; above), f <= A <= 1 - (1 - f)^L, A = f for L = 1.
struct ActiveShare {
  double fraction = 0;
  double work = 0;
};
ActiveShare active_above(const ClusteringInputs& in, double growth, double g_comoving);
double fraction_above(const ClusteringInputs& in, double growth, double g_comoving);   // active_above's f
// Kicks per particle per PM step and the deepest bin at scale factor a, PM step dln_pm.
BinForecast forecast_bins(const ClusteringInputs& in, double growth, double hubble, double a, double dln_pm);

// forecast_bins on a grid in ln a (PM step max_dln_a), computed once per run.
class ClusteringForecast {
 public:
  ClusteringForecast() = default;
  ClusteringForecast(const ClusteringInputs& in, const Cosmology& cosmology, double ln_a_begin, double ln_a_end);
  bool empty() const { return kicks_.empty(); }
  double particles() const { return particles_; }
  BinForecast at(double ln_a) const;   // kicks and fractions interpolated linearly, the deepest bin of the grid point below

 private:
  double begin_ = 0, step_ = 1, particles_ = 0;
  std::vector<double> kicks_;
  std::vector<int> deepest_;
  std::vector<std::array<double, kDeepestBin + 1>> above_, work_;
};

// The outputs, the energy check's W and the last output's wait, with pm_steps PM steps to come.
double other_seconds(const OutputCost& outputs, double pm_steps);

// A sync point's price from the cost records history[begin ..] of a run of n particles
// (above): E (full), s0 (fixed), e (work) and A(f): the forecast's prior drawn to f^alpha
// with the weight the measured sub-steps give it.
struct SyncPointPrice {
  bool valid = false;                      // false: no full step measured (a restart's records)
  double full = 0, fixed = 0, work = 0;   // E, s0, e
  double weight = 0, alpha = 1;            // A = weight f^alpha + (1 - weight) prior
  // e A(f): the seconds beyond s0 of a sync point with f active whose prior A is `prior`
  // (BinForecast::work).
  double at(double f, double prior) const;
};
SyncPointPrice sync_point_price(const std::vector<CostRecord>& history, std::size_t begin, double n);

// Predicted wall seconds from a sync point at scale factor a, after the completed PM steps
// `history`, to ln a = ln_a_end; negative while no PM step has been measured. With
// hierarchical steps (a forecast), from it; else the trend.
double forecast_remaining_seconds(const std::vector<CostRecord>& history, double a, const ClusteringForecast& forecast,
                                  double ln_a_end, const OutputCost& outputs);
double predicted_remaining_seconds(const std::vector<CostRecord>& history, double a, double ln_a_end,
                                   const OutputCost& outputs);

}  // namespace orbis
