// The top levels of ONE global ORB tree, split collectively over the ranks: bit for bit the
// nodes OrbTree::build would make on all ranks' particles together (step 1 of the plan in
// docs/design.md, "Ranks: domains and ghosts"). The rank domains (domain/rank_domains.hpp)
// build it at every PM step: its depth-d nodes are the groups they share out.
//
// The rule reproduced (src/tree/orb_tree.cpp): the tree's shape depends on N and max_leaf
// alone (a node of n > max_leaf particles has children of n/2 and n - n/2, the left one
// first in preorder; indices as OrbTree::shape). A node's box is the exact min/max of its
// members' positions; it splits along split_axis(lo, hi, its depth, `depth`)
// (tree/split_axis.hpp): above `depth` the lowest axis whose side is within 2% of the
// longest, at `depth` (a depth-d node's sorting axis) the longest side, ties to the lowest
// axis, all in double, as OrbTree::build with top_levels = depth; its left child holds the
// n/2 smallest members in the total order PositionLess<A> (coordinate A, then (A+1)%3,
// then (A+2)%3, compared as doubles).
//
// How, without gathering particles: each coordinate maps to an order-preserving uint64 (the
// sign trick; -0.0 as +0.0, as == compares them), so a member's key under axis A is the 192-bit
// word (A, A+1, A+2) and PositionLess is the order of keys. The rank-k member of every node
// of a level is found together by radix selection, a digit per round from the first bit the
// node's box leaves open (the bits all members share are skipped): one allreduce of a count
// histogram per unfinished node (over the members still matching the prefix found so far),
// until rank k falls on a bin's lower edge; the prefix found is then a threshold, and the
// left child is exactly the keys below it. Digits of 8 bits, up to 16 while a round's
// histograms stay under 2^18 bins (the top levels), counts of 4 bytes. Boxes: one
// min-allreduce per level (lo and -hi: exact in any order).
// Cost per level of s splitting nodes: a box reduction of 48 bytes per node, then R rounds of
// 1 KiB per unfinished node at depth (128^3 clustered, depth 9: 23-27 rounds), and two passes
// over this rank's members: the first round's histogram, then its filter, which also sends
// every member the round decides to its child (the children's boxes from the keys, the next
// level's members); the later rounds and the children of the members they decide see only
// the few left. Each pass runs over fixed blocks of the members in parallel (histograms and
// boxes per thread, integer sums and minima; lists concatenated in block order): the same
// tree for any thread count. The passes over the members are apart from the decisions
// (domain/top_tree_passes.hpp): the device runs its own (gpu/global_top_tree_cuda.cuh) under
// the same decisions.
// Not promised: which of several particles at exactly the same position goes to which child
// (the serial build's own order there is arbitrary: nth_element). The nodes (counts, boxes,
// axes) are still the serial ones; particle_node of such particles may differ from a serial
// build's. Positions must not be NaN; a -0.0 coordinate may give a box corner -0.0 where the
// serial build has +0.0 or the reverse (min/max of equal values).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/comm.hpp"
#include "core/vec3.hpp"

namespace orbis {

class TopTreePasses;

struct GlobalTopNode {
  std::int32_t index = 0;    // in OrbTree::shape(n_total, max_leaf) numbering (preorder)
  std::int32_t parent = -1;  // shape index of the parent (-1 for the root)
  std::int32_t depth = 0;
  std::uint32_t first = 0;   // the node's range [first, first + count) in the serial tree order
  std::uint32_t count = 0;
  Vec3d lo, hi;              // tight box of the members, exact (Mpc/h)
  int axis = 0;              // split_axis(lo, hi, depth, d): the split axis (a leaf's sorting axis)
  bool split = false;        // split within the requested depth (its children follow)
  bool leaf() const { return !split; }
};

class GlobalTopTree {
 public:
  // Collective over comm. `positions`: this rank's particles (any subset of the global set,
  // any order, possibly none). Levels 0..depth of the global tree (max_leaf >= 1, depth >= 0;
  // a node of <= max_leaf particles stops above `depth`). Throws (on every rank) if the
  // ranks hold no particle at all or more than OrbTree::kMaxParticles.
  static GlobalTopTree build(const std::vector<Vec3d>& positions, int max_leaf, int depth, const Comm& comm);
  // The same with other passes over this rank's n particles (domain/top_tree_passes.hpp: the
  // device's, gpu/global_top_tree_cuda.cuh): every decision is taken by the same code, so the
  // same positions give the same tree, particle_node and rounds. build(positions, ...) is
  // this with the host's passes.
  static GlobalTopTree build(TopTreePasses& passes, std::size_t n, int max_leaf, int depth, const Comm& comm);

  // The nodes of levels 0..depth, level by level, in increasing index order within a level;
  // the same on every rank.
  const std::vector<GlobalTopNode>& nodes() const { return nodes_; }
  // particle_node()[i]: the shape index of the deepest node (depth <= `depth`) holding this
  // rank's particle i.
  const std::vector<std::int32_t>& particle_node() const { return particle_node_; }
  std::int64_t n_total() const { return n_total_; }
  // Rounds of histogram reductions the build took (all levels).
  int rounds() const { return rounds_; }

 private:
  std::vector<GlobalTopNode> nodes_;
  std::vector<std::int32_t> particle_node_;
  std::int64_t n_total_ = 0;
  int rounds_ = 0;
};

}  // namespace orbis
