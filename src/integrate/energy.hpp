// The Layzer-Irvine cosmic energy equation as a check of a run's integration (derivation in
// docs/design.md, "Energy check"). With the peculiar velocity v = p / a and the peculiar
// potential Phi = phi / a (phi the comoving potential whose gradient the forces are,
// nabla^2 phi = 4 pi G (rho - rho_bar), comoving), K = (1/2) m sum |v|^2 and
// W = (1/2) m sum Phi(x_i), the equations orbis integrates (dx/da = p / (a^3 H),
// dp/da = -grad phi / (a^2 H)) give
//   d[a (K + W)]/da = -K,
// so C(a) = a K + a W + int_{a0}^{a} K da' keeps its starting value. The log reports the
// running residual (C(a) - C(a0)) / |a W| (over a K where that is larger: W crosses zero
// early in a run from a grid, whose own energy is positive); a wrong sign of W or a wrong
// power of a in either term makes it grow like the terms themselves. In code units (lengths Mpc/h, momenta km/s,
// masses 1e10 Msun/h): a K = m sum |p|^2 / (2a), and a W = (1/2) m sum phi(x_i) is what is
// computed here, from the particles alone:
//   mesh:       (1/2) sum m phi_long(x_i), the PM's long-range potential with the force's
//               window (PmSolver::potential_energy), each particle's own smooth part included
//               (CudaPmSolver::potential_energy where the pair sum runs on the GPU);
//   pairs:      -(1/2) G m^2 sum_{i != j, r < cut} erfc(s / 2r_s) / s, s^2 = r^2 + eps^2: the
//               potential of the P2P force, with its cut and softening (fmm/pair_energy.hpp,
//               summed where P2P runs: [gpu] backend);
//   self:       + N G m^2 / (2 sqrt(pi) r_s): removes that own part (erf(r/2r_s)/r -> 1/(sqrt(pi) r_s));
//   background: + (1/2) G M rho_bar 4 pi int_0^cut r erfc(r / 2r_s) dr, the mean density's
//               share of the pair sum (the mesh has no k = 0 mode): W of a uniform set is 0.
// With the cut at infinity this is the Ewald sum's energy with split alpha = 1 / (2 r_s).
//
// The check runs where every particle is synchronised: at the ends of PM steps. K is taken at
// each of them (the trapezoid rule between them integrates K da); W, which costs a PM
// assignment and forward FFT plus the pair sum within the cut, from the particles on the host
// (the CUDA engine downloads them), at the start, at every output and every [analysis]
// energy_check_every PM steps. TreePM. Where the pair sum runs on the GPU (one rank, the
// [gpu] backend's P2P evaluator on CUDA) the mesh term does too, with cuFFT from the same
// device pool the step engine uses, given back after each check; over ranks with a [gpu]
// backend other than "cpu" and a usable GPU on every rank (the CUDA step engine's case) it
// runs on the ranks' GPUs (CudaPmRanks built for the energy: its slabs too come from the pool
// at each check and go back, so the step engine's own slabs are not doubled); elsewhere the
// host PM (pm/pm_solver.hpp: fixed-point assignment, FFTW's reproducible plan).
// Where the step engine holds the particles on a device (the CUDA engine on one rank), W's
// position terms come from there (potential(StepEngine&), StepEngine::potential_energy_terms):
// the pair sum with its chaining mesh made on the device (gpu/pair_energy_cuda.cuh: the same
// kernel and the same cell order as the host-built mesh's, hence the same sum) and the mesh
// term from the engine's own cuFFT PM, in memory the engine takes from its pool for the check;
// nothing per particle crosses the bus. Elsewhere (over ranks, the host engine, or a device
// without the memory) W comes from the particles on the host (potential(Particles)).
//
// Over several ranks each rank holds its domain's particles, and every term is a sum over the
// ranks: K from the engine's reduced sum |p|^2; the mesh term from x slabs (the particles
// routed to them as for the forces; fixed-point assignment): on the host, the reproducible
// plan and its plane sums added in plane order, bitwise the one-rank host PM's value; on the
// GPUs (gpu/pm_cuda_ranks.hpp), cuFFT on the slabs and the row sums gathered and added in
// the one-GPU order, the one-GPU value to the transforms' rounding; the pairs from
// each rank's particles with each other and with ghosts, the other ranks' particles within the
// cut, imported for the check (domain/particle_exchange.hpp), a pair between two ranks taken by
// exactly one of them (fmm/pair_energy.hpp), where the one-rank sum runs (the rank's GPU with
// a CUDA backend); self and background from the global count. Every rank gets the same W, so
// the budget (RunState, saved in every rank's checkpoint file) is the same on every rank, and
// it equals the one-rank run's to the sums' rounding.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/particles.hpp"
#include "core/vec3.hpp"
#include "fmm/p2p.hpp"
#include "fmm/short_range.hpp"
#include "integrate/run_state.hpp"
#include "pm/pm_solver.hpp"

namespace orbis {

class Params;
class StepEngine;

// a W by term, comoving: (km/s)^2 times 1e10 Msun/h.
struct PotentialEnergy {
  double mesh = 0, pairs = 0, self = 0, background = 0;
  double total() const { return mesh + pairs + self + background; }
};

// The self and background terms above for n particles of mass m in a box (shift: the shifted
// cut's pair-potential terms, fmm/pair_energy.hpp; default: a sharp cut).
double split_self_energy(std::size_t n, double g_mass, double mass, double r_s);
double split_background_energy(std::size_t n, double g_mass, double mass, double box, double r_s, double cut,
                               const CutShiftTerms& shift = {});

// a K = m sum |p|^2 / (2a) from sum |p|^2 (km/s)^2.
inline double scaled_kinetic_energy(double sum_p2, double mass, double a) { return 0.5 * mass * sum_p2 / a; }

class EnergyCheck {
 public:
  // From [analysis] energy_check, energy_check_every and energy_drift_warning; off
  // (enabled() false) when asked, or for a PM-only run (why_off() says). Over the ranks of
  // comm, each holding its share of the particles.
  explicit EnergyCheck(const Params& params, const Comm& comm = Comm::self());
  ~EnergyCheck();

  bool enabled() const { return enabled_; }
  const std::string& why_off() const { return why_off_; }
  // W is computed at the end of PM step `pm_steps` (1, 2, ...) when it lands on an output or
  // the run's end (`landmark`), or every energy_check_every PM steps.
  bool due(std::int64_t pm_steps, bool landmark) const {
    return enabled_ && (landmark || (every_ > 0 && pm_steps % every_ == 0));
  }
  double warning_threshold() const { return warning_; }
  std::int64_t every() const { return every_; }

  // a W of the particles (positions in [0, box)): over several ranks, of every rank's
  // (collective; each rank passes its own, and every rank gets the whole W).
  PotentialEnergy potential(const Particles& particles);
  // The same for the particles `engine` holds: on one rank from the engine's own terms where
  // it offers them (StepEngine::potential_energy_terms), else potential(engine.particles()).
  PotentialEnergy potential(StepEngine& engine);
  // Whether the last potential(StepEngine&) took the mesh term the engine summed in its force
  // pass before (StepEngine::expect_potential_energy) rather than a pass of its own.
  bool last_mesh_from_forces() const { return last_mesh_from_forces_; }

  // The budget at an end of a PM step at scale factor a, with sum |p|^2: starts it (needs W:
  // `potential` non-null) or advances the integral of K da. Returns the residual
  // (C(a) - C(a0)) / max(|a W|, a K) when `potential` is given (NaN otherwise).
  static double update(EnergyBudget& budget, double a, double sum_p2, double mass, const PotentialEnergy* potential);

 private:
  bool enabled_ = false;
  std::int64_t every_ = 0;
  double warning_ = 0;
  bool last_mesh_from_forces_ = false;
  std::string why_off_;
  Comm comm_;
  double box_ = 0;
  ShortRangeSettings short_;
  double cut_ = 0;
  // The shifted cut's pair-potential terms for these settings (a sharp cut: zeros).
  CutShiftTerms shift_terms() const;
  PmSettings pm_settings_;
  struct MeshSolver;                  // FFTW's or cuFFT's, made at the first potential()
  std::unique_ptr<MeshSolver> mesh_;
  std::string backend_;            // [gpu]: where the pair sum and the mesh term run
  int device_ = 0;
  std::unique_ptr<P2PEvaluator> pairs_;
  bool engine_terms_logged_ = false;   // potential(StepEngine&) said once where W is computed
};

}  // namespace orbis
