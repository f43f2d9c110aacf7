// When a step engine that keeps its short-range tree between force computations (the CUDA
// engine) builds it afresh, and when it refits the last one to the moved particles (the same
// leaves and order, new boxes: OrbTree::refit, DeviceOrbTree::refit). A refit costs a
// fraction of a build (0.004 s against 0.027 s at 256^3 on an H100) but its boxes loosen as
// the particles move, so the walk finds more P2P pairs, and its forces are not those of a
// tree built from the positions alone.
//
// Restarts decide the rules. A restart computes the forces at the checkpoint's positions on
// a fresh tree, so a run continues bitwise after a checkpoint only when its own forces there
// came from a fresh tree too, and when every later decision depends only on what both runs
// share from that build on. Hence:
// - decisions about building are taken at long-range (PM) steps, from counters that a
//   long-range build resets: the long-range steps since it, the P2P pair count of the first
//   full step on the current tree and that of the last full step (integer counts, exact);
// - sub-steps between PM steps refit, unless max_refits (a limit on refits in a row, also
//   a count since the build) says otherwise;
// - last_long_range_fresh() tells the run loop whether a checkpoint may be written now; when
//   it may not, the checkpoint waits for the next long-range step that builds (at most
//   rebuild_every - 1 PM steps later: integrate/simulation.cpp). The run loop does not ask
//   for a build: one the uninterrupted run would not make would change the trajectory, so a
//   run stopped and restarted (or checkpointed by the clock) would not end as one that ran
//   through.
// After a long-range build every counter is a function of the positions there and of what
// follows, the same in a run and in its restart. Host code with no device types: tests
// check it on a scripted sequence of steps.
#pragma once
#include <cstdint>
#include <string>

namespace orbis {

struct TreeReuseSettings {
  // A long-range step builds when this many long-range steps have passed since the last
  // long-range build (1: every long-range step builds; K: at least every K-th does).
  int rebuild_every = 4;
  // Refits in a row (any step) after which the next step builds; 0: no limit (sub-steps
  // always refit).
  int max_refits = 0;
  // A long-range step builds when the last full step's P2P pairs exceed (1 + pair_growth)
  // times those of the first full step on the tree.
  double pair_growth = 0.1;
};

class Params;

// max_refits for isolated systems ([gravity] boundary = "vacuum") unless [gpu]
// tree_max_refits is given: a cusp's particles leave a refitted leaf within tens of
// sub-steps, whose box then grows until no node accepts it (a 10^6-particle merger's P2P
// pairs grew from 1e8 to 3e9 a sub-step of ~2e4 active particles over 300 sub-steps, while a
// build costs ~2 ms); 1, 2, 4 and 8 ran its first 192 sub-steps alike (7.2-7.8 s on an H200).
inline constexpr int kVacuumMaxRefits = 4;
// The CUDA step engine's policy from [gpu] tree_rebuild_every and tree_max_refits (in vacuum
// kVacuumMaxRefits where the latter is not given).
TreeReuseSettings tree_reuse_settings(const Params& params);

// Why a force computation builds the tree (none: it refits the last one).
enum class TreeBuild { none, first, asked, age, growth, refits };
const char* tree_build_name(TreeBuild why);

class TreeReusePolicy {
 public:
  // Checks the settings (rebuild_every >= 1, max_refits >= 0, pair_growth >= 0).
  explicit TreeReusePolicy(const TreeReuseSettings& settings = {});

  // Before a force computation: build (the reason) or refit (TreeBuild::none). has_tree:
  // the solver holds a tree of the current particles (else it must build).
  TreeBuild begin(bool long_range, bool has_tree);
  // After it: full when every particle was active (its pair count then counts), and its P2P
  // pair count.
  void end(bool full, std::uint64_t pairs);

  // The next long-range step builds (benchmarks: a building step on demand). A run that
  // asks changes its trajectory from there on.
  void request_rebuild() { asked_ = true; }
  // Whether the last long-range step's forces came from a tree built at that step (true
  // before any long-range step).
  bool last_long_range_fresh() const { return last_long_range_fresh_; }

  const TreeReuseSettings& settings() const { return settings_; }
  // Totals since construction (the run's summary): long-range steps, the builds among them
  // by reason (indexed by TreeBuild), and the builds at sub-steps.
  std::int64_t long_range_steps() const { return long_range_steps_; }
  std::int64_t long_range_builds() const;
  std::int64_t long_range_builds(TreeBuild why) const { return builds_[static_cast<int>(why)]; }
  std::int64_t sub_step_builds() const { return sub_step_builds_; }
  // "tree built at 47 of 186 long-range steps (every 4: 41, pair growth: 3, ...)".
  std::string summary() const;

 private:
  TreeReuseSettings settings_;
  // The decisions' state: reset by a build.
  bool asked_ = false;
  int long_range_since_build_ = 0;    // long-range steps since the last long-range build (itself included)
  int refits_ = 0;                    // refits in a row
  bool have_first_pairs_ = false;
  std::uint64_t first_full_pairs_ = 0;   // P2P pairs of the first full step on the tree
  std::uint64_t last_full_pairs_ = 0;    // ... and of the last one
  // The step in progress, and the totals.
  bool step_long_range_ = false;
  TreeBuild step_build_ = TreeBuild::none;
  bool in_step_ = false;
  bool last_long_range_fresh_ = true;
  std::int64_t long_range_steps_ = 0, sub_step_builds_ = 0;
  std::int64_t builds_[6] = {};
};

}  // namespace orbis
