// The split axis of an ORB node, one formula for host and device: OrbTree::build, the
// device build (gpu/orb_tree_cuda.cu) and GlobalTopTree (domain/global_top_tree.cpp) take
// the same decision from the same doubles, so the serial tree, the device tree and the
// ranks' collective top tree keep the same nodes.
#pragma once
#include <cstdint>

#include "core/hostdevice.hpp"
#include "core/vec3.hpp"

namespace orbis {

// The longest side of the box [lo, hi] (hi[d] - lo[d] in double), ties to the lowest axis.
ORBIS_HD int longest_axis(const Vec3d& lo, const Vec3d& hi) {
  int axis = 0;
  for (int d = 1; d < 3; ++d)
    if (hi[d] - lo[d] > hi[axis] - lo[axis]) axis = d;
  return axis;
}

// How much shorter than the longest side a side of a node above the walk's top depth may be
// and still be chosen (relative). Near-cubic boxes (the root, the top levels of a nearly
// uniform field) have sides within a fraction of a percent of each other, so "the longest"
// flips with tiny drifts of the extreme particles and reshuffles every depth-d node: with
// node domains ~57% of the particles changed rank at a PM step (128^3, issue #17). With the
// lowest axis within 2% the choice only flips when a side crosses 98% of the longest, which
// a PM step's drift seldom makes it do (bench_domains' jitter of 0.3 Mpc/h is 0.06% of the
// 500 Mpc/h root, ~0.5% of a depth-9 node): it measured 2754-2804 particles a PM step at
// 128^3 on 2 ranks (box domains move ~2800) against ~1.2M (tests/bench/bench_domains_results.md).
inline constexpr double kTopSplitTolerance = 0.02;

// The split axis of a node of depth `depth` with box [lo, hi] in a tree whose walk starts at
// depth top_levels (WalkSettings::top_levels; 0: none). Nodes at or below that depth keep
// longest_axis, so nothing below the depth-d nodes changes; nodes above it (only split by
// the walk, never an M2L or P2P partner, so their shape changes no force, only which
// particles each depth-d node holds) take the lowest axis whose side is within
// kTopSplitTolerance of the longest. One multiply and compares: no contraction into an
// FMA can change a decision between host and device.
ORBIS_HD int split_axis(const Vec3d& lo, const Vec3d& hi, std::int32_t depth, int top_levels) {
  if (depth >= top_levels) return longest_axis(lo, hi);
  const double side[3] = {hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]};
  const double longest = side[0] > side[1] ? (side[0] > side[2] ? side[0] : side[2])
                                           : (side[1] > side[2] ? side[1] : side[2]);
  constexpr double kKeep = 1.0 - kTopSplitTolerance;
  const double bar = kKeep * longest;
  if (side[0] >= bar) return 0;
  if (side[1] >= bar) return 1;
  return 2;
}

}  // namespace orbis
