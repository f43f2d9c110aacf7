// The host step engine (step_engine.hpp): the particles in host memory; the long-range force
// from the PM (FFTW), the short-range force from the FMM on the CPU with P2P on the [gpu]
// backend's evaluator (the CPU one, or the CUDA one, which then also builds the tree and
// walks it on its device on full steps). gravity.solver = "pm" runs the PM alone, whose
// force is then the whole force (the long-range one, kicked on the PM step).
//
// Over several ranks (a communicator of more than one): each engine holds its rank's
// particles. The PM is x slabs (pm/pm_solver.hpp) whose long-range transforms and Fourier
// work run on each rank's GPU (cuFFT, gpu/pm_cuda_slabs.hpp) when the [gpu] backend is not
// "cpu" and every rank has a usable GPU, on the host's slabs otherwise (and for PM-only); for TreePM
// the particles move to their domains at every PM step, runs of the global ORB tree's
// depth-d nodes (rebuilt when the measured work is out of balance: domain/rank_domains.hpp),
// and each rank's short-range solver runs on a forest of its nodes' subtrees plus the remote
// nodes within r_cut as ghosts: the serial tree's subtrees, so the forces equal the one-rank
// run's but for the order of the sums. The reductions (largest
// acceleration, rms momentum, bin counts) are over every rank. The phase "domain" is the
// migration and ghost import, "comm" the time inside communication (waiting included) of
// every phase, a part of their times.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "domain/rank_domains.hpp"
#include "fmm/p2p.hpp"
#include "fmm/short_range.hpp"
#include "integrate/step_engine.hpp"
#include "pm/pm_solver.hpp"

namespace orbis {

class HostStepEngine final : public StepEngine {
 public:
  // Checks every [gravity] and [gpu] setting before any work.
  explicit HostStepEngine(const Params& params, const Comm& comm = Comm::world());
  ~HostStepEngine() override;

  std::string describe() const override;
  double softening() const override;
  bool has_short_range() const override { return short_range_.has_value(); }
  void load(Particles particles) override;
  const Particles& particles() override;
  const std::vector<Vec3d>& accelerations() override;
  void compute_forces(bool long_range, int min_active_bin, ForceStats& stats) override;
  void kick(const KickPlan& plan) override;
  void drift(double drift_factor) override;
  double max_acceleration() override;
  double rms_momentum() override;
  Vec3d total_momentum() override;
  BinCounts assign_bins(const BinRule& rule) override;
  // The CUDA P2P evaluator computes every particle of a target leaf that holds an active
  // one (it ignores P2PInput::targets); the CPU one only the active targets.
  bool computes_whole_leaves() const override { return p2p_ && p2p_->name() == "cuda"; }
  std::string domain_state() const override { return domains_.state(); }
  void restore_domain_state(const std::string& state, const std::string& what) override;

  // The rank domains (tests, diagnostics).
  const RankDomains& domains() const { return domains_; }

  // Steps with some particles inactive refit the last tree instead of building a new one
  // (a tuning knob and benchmark hook; the default is the measured choice).
  void set_tree_refit(bool refit) { refit_tree_ = refit; }

 private:
  void forces(bool long_range, int min_active_bin, ForceStats& stats);

  double box_mpc_h_ = 0;
  Comm comm_;
  PmSolver pm_;
  RankDomains domains_;
  double work_since_update_ = 0;   // this rank's interactions since the last domain update
  // TreePM only:
  ShortRangeSettings short_settings_;
  std::optional<ShortRangeSolver> short_range_;
  std::unique_ptr<P2PEvaluator> p2p_;
  bool refit_tree_ = true;

  Particles particles_;
  Particles wrapped_;   // particles(): a copy with the positions wrapped, when some lie outside
  std::vector<Vec3d> acc_long_, acc_short_;   // per particle, (km/s)^2/(Mpc/h)
  std::vector<Vec3d> acc_total_;              // accelerations()
  std::vector<Vec3d> acc_with_ghosts_;        // the short-range solver's, ghosts after the particles
  std::vector<std::uint8_t> target_mask_;       // likewise: 1 for an active own particle, else 0
};

}  // namespace orbis
