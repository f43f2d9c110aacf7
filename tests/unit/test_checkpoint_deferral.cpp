// Checkpoints wait for a fresh tree (integrate/simulation.cpp, step_engine.hpp). The engine
// here is the host engine under a tree policy of its own (tree/tree_reuse.hpp, deciding from
// the host engine's P2P pair counts as the CUDA engine does from the device's), which says
// at each long-range step whether a tree kept between steps would have been built there.
// The run must write checkpoints only where the engine says its tree was fresh, wait for
// the next PM step that builds where it was not (never asking for a build: the trajectory
// is the same with and without checkpoints), stop on a signal that came on a stale tree
// only there, and a restart from that checkpoint must then take the tree decisions of the
// run that never stopped (the policy's counters are the same in both) and end on its bits.
#include <doctest/doctest.h>

#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/params.hpp"
#include "integrate/simulation.hpp"
#include "integrate/step_engine.hpp"
#include "support/scratch_dir.hpp"
#include "tree/tree_reuse.hpp"

using namespace orbis;

namespace {

// [checkpoint] every_steps: with this run's steps some checkpoints come due where the tree
// was built, others where it was refitted.
constexpr std::int64_t kEverySteps = 8;

// What the engine saw: its long-range steps (labelled by the sync points before them, the
// run's RunState::steps), the tree decision at each, and the checkpoints written.
struct TreeRecord {
  std::vector<std::int64_t> long_range_at;
  std::vector<TreeBuild> decisions;
  std::vector<std::int64_t> written_at;
  int raise_after = -1;               // SIGUSR1 at the first stale long-range step after this many
  std::int64_t raised_at = -1;
};

class TreeTrackingEngine final : public StepEngine {
 public:
  TreeTrackingEngine(const Params& params, const TreeReuseSettings& settings, std::shared_ptr<TreeRecord> record,
                     std::int64_t first_step)
      : inner_(make_step_engine(params)), policy_(settings), record_(std::move(record)), step_(first_step) {}

  std::string describe() const override { return "tree-tracking " + inner_->describe(); }
  double softening() const override { return inner_->softening(); }
  bool has_short_range() const override { return inner_->has_short_range(); }
  void load(Particles particles) override { inner_->load(std::move(particles)); }
  const Particles& particles() override { return inner_->particles(); }
  const std::vector<Vec3d>& accelerations() override { return inner_->accelerations(); }
  void compute_forces(bool long_range, int min_active_bin, ForceStats& stats) override {
    if (started_) ++step_;   // the first one (the run's start, a restart's) comes before any sync point
    started_ = true;
    const double before = stats.p2p_interactions;
    const TreeBuild why = policy_.begin(long_range, has_tree_);
    inner_->compute_forces(long_range, min_active_bin, stats);
    policy_.end(min_active_bin <= 0, static_cast<std::uint64_t>(stats.p2p_interactions - before));
    has_tree_ = true;
    if (!long_range) return;
    record_->long_range_at.push_back(step_);
    record_->decisions.push_back(why);
    if (record_->raise_after >= 0 && record_->raised_at < 0 && why == TreeBuild::none &&
        static_cast<int>(record_->decisions.size()) > record_->raise_after) {
      record_->raised_at = step_;
      raise(SIGUSR1);   // the run's StopSignals records it
    }
  }
  void kick(const KickPlan& plan) override { inner_->kick(plan); }
  void drift(double drift_factor) override { inner_->drift(drift_factor); }
  double max_acceleration() override { return inner_->max_acceleration(); }
  double rms_momentum() override { return inner_->rms_momentum(); }
  Vec3d total_momentum() override { return inner_->total_momentum(); }
  BinCounts assign_bins(const BinRule& rule) override { return inner_->assign_bins(rule); }
  // Called once per checkpoint written (write_checkpoint's domains).
  std::string domain_state() const override {
    record_->written_at.push_back(step_);
    return inner_->domain_state();
  }
  bool forces_from_fresh_tree() const override { return policy_.last_long_range_fresh(); }
  std::string tree_summary() const override { return policy_.summary(); }

 private:
  std::unique_ptr<StepEngine> inner_;
  TreeReusePolicy policy_;
  std::shared_ptr<TreeRecord> record_;
  std::int64_t step_ = 0;
  bool started_ = false, has_tree_ = false;
};

// TreePM, 16^3 particles from z = 20 to 3 in 28 PM steps and ~130 sync points (long PM steps,
// so that the particles take bins 0-4); a checkpoint is due after 9 sync points. eta is pinned
// (not the default) so that the PM steps keep the mix of built and refitted trees the test needs.
Params run_params(const std::string& out) {
  return Params::parse(R"([box]
size_mpc_h = 32.0
particles_per_side = 16
[ic]
z_init = 20.0
self_test = false
[gravity]
pm_grid_side = 32
[gpu]
backend = "cpu"
[time]
z_final = 3.0
output_redshifts = []
max_dln_a = 0.06
eta = 0.3
pm_rms_displacement = 1.0
[analysis]
fof = false
pk = false
energy_check = false
[checkpoint]
every_steps = )" + std::to_string(kEverySteps) + R"(
[output]
snapshots = false
directory = ")" + out + "\"\n",
                       "deferral.toml");
}

TreeReuseSettings settings() {
  TreeReuseSettings s;
  s.rebuild_every = 3;
  return s;
}

struct Run {
  std::shared_ptr<TreeRecord> record = std::make_shared<TreeRecord>();
  RunSummary summary;
  Particles final_particles;
};

Run run(const std::string& out, bool restart, std::int64_t first_step, int raise_after = -1) {
  Run r;
  r.record->raise_after = raise_after;
  RunOptions options;
  options.restart = restart;
  options.overwrite = !restart;
  const Params params = run_params(out);
  Simulation sim(params, options, Comm::world(),
                 std::make_unique<TreeTrackingEngine>(params, settings(), r.record, first_step));
  r.summary = sim.run();
  r.final_particles = sim.particles();
  return r;
}

// A checkpoint is written at the end of a PM step exactly when one is due (every_steps sync
// points since the last, or a signal: `stop_at`, the stopped run's last step) and the step's
// tree was built there; returns how many waited (were due at an earlier PM step).
int check_written_on_fresh_trees(const TreeRecord& r, std::int64_t every_steps, std::int64_t stop_at = -1) {
  int waited = 0;
  std::int64_t last = r.long_range_at.front();   // the run's start, or the checkpoint a restart began at
  bool waiting = false;
  std::vector<std::int64_t> expected;
  // Not the first forces (before PM step 1) nor the run's last PM step (its end writes none).
  const std::size_t end = stop_at >= 0 ? r.long_range_at.size() : r.long_range_at.size() - 1;
  for (std::size_t k = 1; k < end; ++k) {
    const std::int64_t at = r.long_range_at[k];
    const bool due = at - last >= every_steps || (stop_at >= 0 && k + 1 == r.long_range_at.size());
    if (!due) continue;
    if (r.decisions[k] == TreeBuild::none) {
      waiting = true;
      continue;
    }
    expected.push_back(at);
    waited += waiting;
    waiting = false;
    last = at;
  }
  CHECK(r.written_at == expected);
  return waited;
}

bool same_bits(const std::vector<Vec3d>& a, const std::vector<Vec3d>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(Vec3d)) == 0;
}

}  // namespace

TEST_CASE("checkpoints wait for a PM step on a fresh tree; a restart there takes the uninterrupted run's decisions") {
  test::ScratchDir dir("checkpoint_deferral");

  // The run that is never stopped: a checkpoint is due every few PM steps; where the tree
  // was built (at every third PM step by age, or on pair growth) it is written at once,
  // elsewhere it waits for the next PM step that builds.
  const Run whole = run(dir.file("whole"), false, 0);
  const TreeRecord& w = *whole.record;
  const int pm_steps = static_cast<int>(w.decisions.size()) - 1;   // the first forces come before PM step 1
  int stale = 0;
  for (std::size_t k = 1; k < w.decisions.size(); ++k) stale += w.decisions[k] == TreeBuild::none;
  const int waited = check_written_on_fresh_trees(w, kEverySteps);
  MESSAGE(pm_steps << " PM steps, " << whole.summary.steps << " sync points, " << stale << " on a refitted tree; "
                   << w.written_at.size() << " checkpoints, " << waited << " of them later than due");
  CHECK(whole.summary.steps > pm_steps + 20);   // sub-steps between the PM steps
  CHECK(pm_steps >= 20);
  CHECK(stale >= pm_steps / 2);
  CHECK(w.written_at.size() >= 4);
  CHECK(waited >= 2);
  CHECK(static_cast<int>(w.written_at.size()) - waited >= 1);   // one due on a fresh tree did not wait

  // A stop signal at a PM step on a refitted tree: the checkpoint, and the stop, wait for
  // the next PM step that builds.
  const Run stopped = run(dir.file("stopped"), false, 0, 8);
  const TreeRecord& s = *stopped.record;
  REQUIRE(s.raised_at > 0);
  CHECK(stopped.summary.stopped_by == "SIGUSR1");
  const auto at = std::find(s.long_range_at.begin(), s.long_range_at.end(), s.raised_at) - s.long_range_at.begin();
  const auto last = static_cast<std::ptrdiff_t>(s.long_range_at.size()) - 1;
  MESSAGE("SIGUSR1 at sync point " << s.raised_at << " (PM step " << at << "), stopped after PM step " << last);
  CHECK(last > at);
  for (auto k = at; k < last; ++k) CHECK(s.decisions[k] == TreeBuild::none);
  CHECK(s.decisions[last] != TreeBuild::none);
  REQUIRE(!s.written_at.empty());
  CHECK(s.written_at.back() == s.long_range_at.back());
  check_written_on_fresh_trees(s, kEverySteps, s.raised_at);
  // Up to the stop, the same run as the one never stopped.
  REQUIRE(s.decisions.size() <= w.decisions.size());
  CHECK(std::equal(s.decisions.begin(), s.decisions.end(), w.decisions.begin()));
  CHECK(std::equal(s.long_range_at.begin(), s.long_range_at.end(), w.long_range_at.begin()));

  // The restart from that checkpoint: a fresh engine, whose first forces build the tree;
  // from then on the decisions, the checkpoints and the end are the uninterrupted run's.
  const std::int64_t from = s.written_at.back();
  const Run resumed = run(dir.file("stopped"), true, from);
  const TreeRecord& r = *resumed.record;
  REQUIRE(!r.decisions.empty());
  CHECK(r.long_range_at.front() == from);
  CHECK(r.decisions.front() == TreeBuild::first);
  const auto in_whole = std::find(w.long_range_at.begin(), w.long_range_at.end(), from) - w.long_range_at.begin();
  CHECK(std::vector<TreeBuild>(r.decisions.begin() + 1, r.decisions.end()) ==
        std::vector<TreeBuild>(w.decisions.begin() + in_whole + 1, w.decisions.end()));
  CHECK(std::vector<std::int64_t>(r.long_range_at.begin(), r.long_range_at.end()) ==
        std::vector<std::int64_t>(w.long_range_at.begin() + in_whole, w.long_range_at.end()));
  check_written_on_fresh_trees(r, kEverySteps);   // its own checkpoints, counted from the restart
  CHECK(resumed.summary.steps == whole.summary.steps);
  CHECK(same_bits(resumed.final_particles.pos, whole.final_particles.pos));
  CHECK(same_bits(resumed.final_particles.mom, whole.final_particles.mom));
}
