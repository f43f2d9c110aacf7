#include "tree/tree_reuse.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/gravity_mode.hpp"
#include "core/params.hpp"

namespace orbis {

const char* tree_build_name(TreeBuild why) {
  switch (why) {
    case TreeBuild::none: return "refit";
    case TreeBuild::first: return "no tree";
    case TreeBuild::asked: return "asked";
    case TreeBuild::age: return "age";
    case TreeBuild::growth: return "pair growth";
    case TreeBuild::refits: return "refits in a row";
  }
  return "?";
}

TreeReuseSettings tree_reuse_settings(const Params& params) {
  TreeReuseSettings s;
  s.rebuild_every = static_cast<int>(params.get_int("gpu.tree_rebuild_every"));
  s.max_refits = static_cast<int>(params.get_int("gpu.tree_max_refits"));
  if (!gravity_mode(params).periodic() && !params.given("gpu.tree_max_refits"))
    s.max_refits = kVacuumMaxRefits;
  return s;
}

TreeReusePolicy::TreeReusePolicy(const TreeReuseSettings& settings) : settings_(settings) {
  if (settings.rebuild_every < 1)
    fail("tree reuse: rebuild_every = {} (a long-range step builds after at least 1 served)", settings.rebuild_every);
  if (settings.max_refits < 0) fail("tree reuse: max_refits = {} (0: no limit)", settings.max_refits);
  if (!(settings.pair_growth >= 0)) fail("tree reuse: pair growth {} must be >= 0", settings.pair_growth);
}

TreeBuild TreeReusePolicy::begin(bool long_range, bool has_tree) {
  if (in_step_) fail("internal: tree reuse: a step begun before the last one ended");
  TreeBuild why = TreeBuild::none;
  if (!has_tree) why = TreeBuild::first;
  else if (long_range && asked_) why = TreeBuild::asked;
  else if (long_range && long_range_since_build_ >= settings_.rebuild_every) why = TreeBuild::age;
  // Integers converted to double and one product: the same bits in a run and its restart.
  else if (long_range && have_first_pairs_ &&
           static_cast<double>(last_full_pairs_) > (1 + settings_.pair_growth) * static_cast<double>(first_full_pairs_))
    why = TreeBuild::growth;
  else if (settings_.max_refits > 0 && refits_ >= settings_.max_refits) why = TreeBuild::refits;
  in_step_ = true;
  step_long_range_ = long_range;
  step_build_ = why;
  return why;
}

void TreeReusePolicy::end(bool full, std::uint64_t pairs) {
  if (!in_step_) fail("internal: tree reuse: a step ended that was not begun");
  in_step_ = false;
  if (step_build_ != TreeBuild::none) {
    refits_ = 0;
    have_first_pairs_ = false;
    first_full_pairs_ = last_full_pairs_ = 0;
    // A sub-step's build (max_refits) leaves the age and a request to the long-range steps:
    // they still build at least every rebuild_every-th time, which bounds a checkpoint's wait.
    if (step_long_range_) {
      long_range_since_build_ = 0;
      asked_ = false;
    }
  } else {
    ++refits_;
  }
  if (step_long_range_) {
    ++long_range_since_build_;
    ++long_range_steps_;
    last_long_range_fresh_ = step_build_ != TreeBuild::none;
    ++builds_[static_cast<int>(step_build_)];
  } else if (step_build_ != TreeBuild::none) {
    ++sub_step_builds_;
  }
  if (full) {
    last_full_pairs_ = pairs;
    if (!have_first_pairs_) first_full_pairs_ = pairs;
    have_first_pairs_ = true;
  }
}

std::int64_t TreeReusePolicy::long_range_builds() const { return long_range_steps_ - builds_[0]; }

std::string TreeReusePolicy::summary() const {
  std::string reasons;
  for (TreeBuild why : {TreeBuild::first, TreeBuild::age, TreeBuild::growth, TreeBuild::asked, TreeBuild::refits})
    if (const std::int64_t n = long_range_builds(why))
      reasons += fmt::format("{}{}: {}", reasons.empty() ? "" : ", ", tree_build_name(why), n);
  std::string text = fmt::format("tree built at {} of {} long-range steps", long_range_builds(), long_range_steps_);
  if (!reasons.empty()) text += " (" + reasons + ")";
  if (sub_step_builds_ > 0) text += fmt::format(" and at {} sub-steps", sub_step_builds_);
  text += fmt::format("; policy: a long-range step builds every {} at least, or after {:.0f}% more P2P pairs",
                      settings_.rebuild_every, 100 * settings_.pair_growth);
  if (settings_.max_refits > 0) text += fmt::format(", any step after {} refits in a row", settings_.max_refits);
  return text;
}

}  // namespace orbis
