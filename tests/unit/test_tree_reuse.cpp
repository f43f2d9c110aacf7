// The tree policy (tree/tree_reuse.hpp) on scripted sequences of steps: when it builds and
// why, and that a policy started afresh at a step where another built (a restart from a
// checkpoint written there) takes the other's decisions from then on, while one started
// where the other had refitted does not (why checkpoints wait for a fresh tree).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/params.hpp"
#include "tree/tree_reuse.hpp"

using namespace orbis;

namespace {

// One step: begin, then end with the given pair count; returns the decision.
TreeBuild step(TreeReusePolicy& p, bool long_range, bool full, std::uint64_t pairs, bool has_tree = true) {
  const TreeBuild why = p.begin(long_range, has_tree);
  p.end(full, pairs);
  return why;
}

// A PM step of a block-step run: `subs` sub-steps (active subsets), then the long-range step
// (every particle active) with `pairs` P2P pairs; returns the long-range step's decision.
TreeBuild pm_step(TreeReusePolicy& p, int subs, std::uint64_t pairs) {
  for (int k = 0; k < subs; ++k) CHECK(step(p, false, false, 7 + k) == TreeBuild::none);
  return step(p, true, true, pairs);
}

}  // namespace

TEST_CASE("tree reuse: a long-range step builds by age, pair growth or request; sub-steps refit") {
  TreeReuseSettings s;
  s.rebuild_every = 3;
  s.pair_growth = 0.1;
  TreeReusePolicy p(s);
  CHECK(p.last_long_range_fresh());   // no long-range step yet: nothing stale
  CHECK(step(p, true, true, 1000, false) == TreeBuild::first);   // the run's start: no tree
  CHECK(p.last_long_range_fresh());
  CHECK(pm_step(p, 15, 1050) == TreeBuild::none);   // served 1 of 3
  CHECK(!p.last_long_range_fresh());
  CHECK(pm_step(p, 15, 1100) == TreeBuild::none);   // served 2; 1100 = 1.1 x 1000 is not more
  CHECK(pm_step(p, 15, 1100) == TreeBuild::age);    // served 3
  CHECK(p.last_long_range_fresh());
  // The growth's reference is the first full step on the tree (its build's, here): the
  // last full step's pairs decide the next long-range step.
  p = TreeReusePolicy(s);
  CHECK(step(p, true, true, 2000, false) == TreeBuild::first);
  CHECK(pm_step(p, 4, 2201) == TreeBuild::none);
  CHECK(pm_step(p, 4, 2000) == TreeBuild::growth);   // 2201 > 1.1 x 2000
  CHECK(p.last_long_range_fresh());
  CHECK(pm_step(p, 4, 2000) == TreeBuild::none);
  // A request (the benchmark's) waits through the sub-steps for the next long-range step,
  // and is used up by it.
  p.request_rebuild();
  CHECK(pm_step(p, 4, 2000) == TreeBuild::asked);
  CHECK(p.last_long_range_fresh());
  CHECK(pm_step(p, 4, 2000) == TreeBuild::none);
  // A step whose solver lost its tree (another particle count) builds, whatever the step.
  CHECK(step(p, false, false, 5, false) == TreeBuild::first);

  CHECK(p.long_range_steps() == 6);
  CHECK(p.long_range_builds() == 3);
  CHECK(p.long_range_builds(TreeBuild::first) == 1);
  CHECK(p.long_range_builds(TreeBuild::growth) == 1);
  CHECK(p.long_range_builds(TreeBuild::asked) == 1);
  CHECK(p.sub_step_builds() == 1);
  const std::string summary = p.summary();
  MESSAGE(summary);
  CHECK(summary.find("tree built at 3 of 6 long-range steps") == 0);
  CHECK(summary.find("pair growth: 1") != std::string::npos);
  CHECK(summary.find("and at 1 sub-steps") != std::string::npos);
}

TEST_CASE("tree reuse: rebuild_every = 1 builds at every long-range step; max_refits limits refits anywhere") {
  TreeReuseSettings every;
  every.rebuild_every = 1;
  TreeReusePolicy p(every);
  CHECK(step(p, true, true, 100, false) == TreeBuild::first);
  for (int k = 0; k < 4; ++k) {
    CHECK(pm_step(p, 20, 100) == TreeBuild::age);   // 20 sub-steps refit: no limit by default
    CHECK(p.last_long_range_fresh());
  }

  TreeReuseSettings limited;
  limited.rebuild_every = 2;
  limited.max_refits = 3;
  TreeReusePolicy q(limited);
  CHECK(step(q, true, true, 100, false) == TreeBuild::first);
  for (int k = 0; k < 3; ++k) CHECK(step(q, false, false, 1) == TreeBuild::none);
  CHECK(step(q, false, false, 1) == TreeBuild::refits);   // the 4th in a row builds, at a sub-step
  q.request_rebuild();                                     // a sub-step's build does not use it up
  CHECK(step(q, false, false, 1) == TreeBuild::none);
  CHECK(step(q, true, true, 100) == TreeBuild::asked);
  // A sub-step's build leaves the age alone: the long-range step after it refits that tree
  // (not fresh), but the next builds as the age says, however the sub-steps went (so a
  // checkpoint never waits more than rebuild_every - 1 PM steps).
  // (The long-range step's refit counts toward the refits in a row.)
  for (int pm = 0; pm < 4; ++pm) {
    CAPTURE(pm);
    const int builds_at = pm % 2 == 0 ? 3 : 2;   // the sub-step that builds
    for (int k = 0; k < 4; ++k) CHECK(step(q, false, false, 1) == (k == builds_at ? TreeBuild::refits : TreeBuild::none));
    if (pm % 2 == 0) {
      CHECK(step(q, true, true, 100) == TreeBuild::none);
      CHECK(!q.last_long_range_fresh());
    } else {
      CHECK(step(q, true, true, 100) == TreeBuild::age);
      CHECK(q.last_long_range_fresh());
    }
  }
  CHECK(q.sub_step_builds() == 5);
}

TEST_CASE("tree reuse: a restart where the run built takes the run's decisions; where it refitted, it would not") {
  TreeReuseSettings s;
  s.rebuild_every = 4;
  s.pair_growth = 0.05;
  // The pair counts a run would measure: a function of the step, growing as the tree ages,
  // faster in some stretches than in others (so that both the age and the growth decide);
  // the same in a run and its restart, as the device's integer counts are.
  auto pairs = [](int pm, int age) {
    return static_cast<std::uint64_t>(100000 + 997 * pm + ((pm / 7) % 2 ? 600 : 2500) * age * age);
  };
  struct Trace {
    std::vector<TreeBuild> decisions;   // of the long-range steps from PM step `from` on
  };
  // The run from PM step `from` on, continuing `p`; `age` is tracked from the decisions.
  auto run = [&](TreeReusePolicy& p, int from, int to, int age) {
    Trace t;
    for (int pm = from; pm < to; ++pm) {
      for (int k = 0; k < 6; ++k) step(p, false, false, 11);
      const TreeBuild why = p.begin(true, true);
      age = why == TreeBuild::none ? age + 1 : 0;
      p.end(true, pairs(pm, age));
      t.decisions.push_back(why);
    }
    return t;
  };
  // The whole run, and the fresh steps in it.
  TreeReusePolicy whole(s);
  step(whole, true, true, pairs(0, 0), false);
  const Trace all = run(whole, 1, 60, 0);
  int builds = 0, by_growth = 0;
  for (TreeBuild why : all.decisions) builds += why != TreeBuild::none, by_growth += why == TreeBuild::growth;
  MESSAGE(whole.summary());
  CHECK(builds >= 10);
  CHECK(by_growth >= 3);   // the script exercises both reasons
  CHECK(builds - by_growth >= 3);

  int checked_fresh = 0, checked_stale = 0, diverged = 0;
  for (int at = 1; at < 50; ++at) {
    // The run to PM step `at`, then a restart there: a new policy whose first step (at the
    // checkpoint's positions) builds, with the pairs that positions and a new tree give.
    TreeReusePolicy run_part(s);
    step(run_part, true, true, pairs(0, 0), false);
    const Trace before = run(run_part, 1, at + 1, 0);
    const bool fresh = run_part.last_long_range_fresh();
    CHECK(fresh == (before.decisions.back() != TreeBuild::none));
    TreeReusePolicy restart(s);
    CHECK(step(restart, true, true, pairs(at, 0), false) == TreeBuild::first);
    const Trace after = run(restart, at + 1, 60, 0);
    const std::vector<TreeBuild> expected(all.decisions.begin() + at, all.decisions.end());
    if (fresh) {
      ++checked_fresh;
      CAPTURE(at);
      CHECK(after.decisions == expected);
    } else {
      ++checked_stale;
      diverged += after.decisions != expected;
    }
  }
  CHECK(checked_fresh >= 5);
  CHECK(checked_stale >= 20);
  CHECK(diverged == checked_stale);   // a checkpoint on a refitted tree would change the run
}

TEST_CASE("tree reuse: settings out of range stop before any step") {
  TreeReuseSettings s;
  s.rebuild_every = 0;
  CHECK_THROWS_AS(TreeReusePolicy{s}, Error);
  s.rebuild_every = 1;
  s.max_refits = -1;
  CHECK_THROWS_AS(TreeReusePolicy{s}, Error);
  s.max_refits = 0;
  s.pair_growth = -0.5;
  CHECK_THROWS_AS(TreeReusePolicy{s}, Error);
  TreeReusePolicy p;
  CHECK_THROWS_AS(p.end(true, 1), Error);   // a step ended that was not begun
}

TEST_CASE("tree_reuse_settings: isolated systems build after kVacuumMaxRefits refits unless the key is given") {
  const std::string vacuum =
      "[ic]\nkind = \"plummer\"\nparticles = 1000\nmass = 1.0\nscale_radius = 0.5\n[units]\nsystem = \"nbody\"\n"
      "[gravity]\nboundary = \"vacuum\"\nsolver = \"fmm\"\nsoftening = 0.02\n[time]\nt_end = 1.0\nmax_dt = 0.01\n";
  const TreeReuseSettings dflt = tree_reuse_settings(Params::parse(vacuum, "vacuum.toml"));
  CHECK(dflt.max_refits == kVacuumMaxRefits);
  CHECK(dflt.rebuild_every == 4);
  // Given, even as 0 (no limit), the key wins.
  CHECK(tree_reuse_settings(Params::parse(vacuum, "vacuum.toml", {"gpu.tree_max_refits=0"})).max_refits == 0);
  CHECK(tree_reuse_settings(Params::parse(vacuum, "vacuum.toml", {"gpu.tree_max_refits=9"})).max_refits == 9);
  CHECK(tree_reuse_settings(Params::parse(vacuum + "[gpu]\ntree_max_refits = 2\n", "vacuum.toml")).max_refits == 2);
  // A periodic box keeps the schema's default: sub-steps refit without limit.
  const std::string box = "[box]\nsize_mpc_h = 32.0\nparticles_per_side = 8\n";
  const TreeReuseSettings periodic = tree_reuse_settings(Params::parse(box, "box.toml", {"gpu.tree_rebuild_every=2"}));
  CHECK(periodic.max_refits == 0);
  CHECK(periodic.rebuild_every == 2);
}
