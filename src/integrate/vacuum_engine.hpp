// The step engine of an isolated system ([gravity] boundary = "vacuum") on the host
// (step_engine.hpp): the particles in host memory, the whole force from the tree gravity of
// vacuum boundaries (fmm/short_range.hpp with Boundary::vacuum: softened Newtonian P2P,
// untruncated M2L over the whole tree; solver = "direct": theta = 0, every pair in P2P) with
// P2P on the [gpu] backend's evaluator. There is no long-range force: all of it is kicked on
// the particles' bins (KickPlan::short_range), the PM step's long-range kick is empty, and
// bin 0's step is [time] max_dt (integrate/newtonian_clock.hpp). Positions are not wrapped.
// One rank (the rank domains are a periodic box's). Individual masses (Particles::masses):
// the sources weigh masses[i] / mass in P2P, the multipoles and P2L, with G mass as the
// constant; their P2P runs on the CPU evaluator.
//
// Units: those of [units] (core/physical_units.hpp): positions in the length unit, momenta
// p = dx/dt in the velocity unit, accelerations in velocity^2/length.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "fmm/p2p.hpp"
#include "fmm/short_range.hpp"
#include "integrate/step_engine.hpp"

namespace orbis {

class VacuumStepEngine final : public StepEngine {
 public:
  // Checks every [gravity] and [gpu] setting before any work.
  explicit VacuumStepEngine(const Params& params, const Comm& comm = Comm::world());
  ~VacuumStepEngine() override;

  std::string describe() const override;
  double softening() const override { return settings_.softening; }
  bool has_short_range() const override { return true; }
  void load(Particles particles) override;
  const Particles& particles() override { return particles_; }
  const std::vector<Vec3d>& accelerations() override { return acc_; }
  void compute_forces(bool long_range, int min_active_bin, ForceStats& stats) override;
  void kick(const KickPlan& plan) override;
  void drift(double drift_factor) override;
  double max_acceleration() override;
  double rms_momentum() override;
  Vec3d total_momentum() override;
  BinCounts assign_bins(const BinRule& rule) override;
  bool computes_whole_leaves() const override { return p2p_ && p2p_->name() == "cuda"; }

  const ShortRangeSettings& settings() const { return settings_; }

 private:
  std::string solver_;   // "fmm" or "direct"
  double g_ = 1;         // G in the [units] system
  ShortRangeSettings settings_;
  std::optional<ShortRangeSolver> tree_;
  std::unique_ptr<P2PEvaluator> p2p_;
  Particles particles_;
  std::vector<double> weights_;   // masses / mass of individual masses; empty: all 1
  std::vector<Vec3d> acc_;        // velocity^2 / length
};

}  // namespace orbis
