// The dual-tree walk of the short-range FMM: node pairs in their minimal periodic image ->
// M2L tasks (target node, source node) and P2P tasks (target leaf, source leaf). With
// vacuum boundaries (WalkSettings::periodic = false) the same walk has no images and no
// cut: steps 1 and 3's extra images never happen, and step 2 is the opening angle alone.
//
// The pair test itself is fmm/walk_pair.hpp (shared with the device walk, gpu/walk_cuda).
// For a (target T, source S) pair, per axis the source's bounding box is shifted by the
// image that brings its centre nearest the target's (the walk chooses the image; kernels
// never wrap). Then, in order:
//  1. drop: the boxes' closest distance exceeds r_cut (then it does in every image);
//  2. M2L: the image is unique (no other image can hold a pair within r_cut), the boxes'
//     farthest distance is <= r_cut (every member pair is inside the cut, so the expansion
//     approximates exactly the truncated sum; pairs straddling r_cut are opened down to
//     P2P, which applies the cut per particle pair), and r_T + r_S < theta |z_T - z_S|
//     (radii about the centres of mass);
//  3. P2P when both are leaves: one task in the unique image, or else one task per image
//     whose boxes come within r_cut (r_cut < L/2 puts each particle pair within r_cut in at
//     most one of them);
//  4. otherwise split the node of larger radius (both when equal; a leaf never); vacuum
//     only (WalkSettings::leaf_cell), before that: a leaf facing a node compact against its
//     distance from the leaf's particles takes one mutual leaf-cell pair, P2L into the
//     node's local expansion and M2P onto the leaf's particles (fmm/walk_pair.hpp).
// Between 1 and 2, a pair holding a top node (not a leaf, depth < top_levels) only splits it.
// So the pairs of depth-d nodes within r_cut are reached whatever the tree above them
// (a rank's forest of the global tree's depth-d subtrees, OrbTree::assemble_forest, or the
// serial tree) and the tasks below them are the same.
// The walk is mutual: a pair of distinct nodes is visited once and emits its task for both
// directions (the source image negated), so every ordered particle pair (i, j) within r_cut
// is covered once and M2L is applied both ways, which conserves momentum
// (fmm/expansions.hpp). A node with itself splits into (l, l), (l, r), (r, r).
//
// The top of the walk runs serially to a frontier of pairs, which are walked in parallel,
// each into its own buffer ("chunk"). The lists are grouped by target with a parallel
// counting sort of the chunks (fmm/p2p_grouping.hpp), and each target's tasks sorted by
// (source, image): the canonical order. The order in which the CPU sums a target's
// contributions (P2P evaluators, M2L batches) is then a function of its set of tasks alone,
// not of the frontier (which depends on the tree above depth d: the serial top or a forest's
// artificial one) nor of which side of a mutual pair the walk met first; with the walk rule
// above, a rank's forest gives bitwise the serial tree's forces (issue #17). Sources are
// compared by index, or by the keys given to run() (a forest whose groups are not in the
// global tree's order). The P2P chunks are also available as they are (walk order, what the
// CUDA backend reads: its sums are not canonical, they need not be bitwise over rank counts).
// All are identical for any thread count.
#pragma once
#include <cstdint>
#include <vector>

#include "fmm/p2p_grouping.hpp"
#include "fmm/tasks.hpp"
#include "fmm/walk_pair.hpp"
#include "tree/orb_tree.hpp"

namespace orbis {

struct WalkSettings {
  double box_mpc_h = 0;
  double r_cut = 0;    // Mpc/h, < box/2
  double theta = 0.5;  // opening angle; 0: no M2L, every pair (within r_cut) goes to P2P
  // The walk's top depth d: nodes above it that are not leaves are only split, never
  // tested (fmm/walk_pair.hpp), so the walk starts from the pairs of depth-d nodes within
  // r_cut. 0: the plain walk from the root.
  int top_levels = 0;
  // false: vacuum boundaries. No periodic images and no cut (box_mpc_h and r_cut are not
  // read): every pair of nodes is tested by the opening angle alone, every task's image is
  // 0, and what is not well separated goes down to P2P. With theta = 0, direct summation.
  bool periodic = true;
  // Vacuum only (not read when periodic): a leaf facing a node compact against its distance
  // from the leaf's particles takes one mutual leaf-cell pair, P2L and M2P (fmm/walk_pair.hpp,
  // TaskLists::p2l/m2p), instead of the node being split to its leaves, each of them summing
  // the leaf directly (the ORB tree's long outer leaves of an isolated system against its
  // core). Off: the plain walk (M2L and P2P only).
  bool leaf_cell = true;
};

class DualTreeWalk {
 public:
  // kGrouped: lists.p2p grouped by target leaf, p2p_spans() the same tasks in walk order.
  // kHalfSpans: lists.p2p left empty and each mutual P2P pair one task flagged
  // kMutualTask in p2p_spans(), for a backend that expands and groups on its own (the
  // CUDA one, on the device): half the P2P tasks to write, read and upload, and no host
  // pass over the largest array of the step.
  enum class P2POutput { kGrouped, kHalfSpans };

  // Fills `lists` (overwritten): p2p (see P2POutput) and m2l grouped by target, each group
  // in increasing target order, each target's tasks in the canonical order (above): by
  // source, then image (lexicographic). Throws if r_cut >= box/2.
  // `source_keys` (optional, one per node): the order of sources, instead of their index
  // (a leaf's is its node's); distinct keys for distinct nodes (ShortRangeSolver gives a
  // forest's nodes the keys of their global tree order, forest_source_keys).
  // With `sinks` (one flag per node: the node holds a particle whose force is wanted; block
  // time steps), only tasks whose target node is a sink are emitted, and pairs with no sink
  // below them are not walked: every sink's tasks are exactly those of the full walk, in the
  // same order, so the forces on the sinks' particles are bitwise the full walk's.
  void run(const OrbTree& tree, const WalkSettings& settings, TaskLists& lists,
           P2POutput output = P2POutput::kGrouped, const std::vector<unsigned char>* sinks = nullptr,
           const std::vector<std::uint64_t>* source_keys = nullptr);

  // p2p_offsets()[l] .. [l + 1]: the P2P tasks of target leaf l (when grouped);
  // m2l_offsets() per node. With leaf-cell tasks (vacuum), lists.p2l grouped by target node
  // (p2l_offsets(), per node) and lists.m2p by target leaf (m2p_offsets(), per leaf), each
  // target's tasks by source; both offsets empty when the lists are.
  const std::vector<std::size_t>& p2p_offsets() const { return p2p_offsets_; }
  const std::vector<std::size_t>& m2l_offsets() const { return m2l_offsets_; }
  const std::vector<std::size_t>& p2l_offsets() const { return p2l_offsets_; }
  const std::vector<std::size_t>& m2p_offsets() const { return m2p_offsets_; }
  // The P2P tasks of the last run as consecutive spans in walk order (lists.p2p holds the
  // same tasks, expanded, grouped by target, stably); valid until the next run.
  const std::vector<TaskSpan>& p2p_spans() const { return p2p_spans_; }
  // P2P tasks, a mutual one counted twice.
  std::size_t p2p_count() const { return p2p_count_; }
  // The last run's time in the pair traversal and in grouping the lists (seconds).
  double traverse_seconds() const { return traverse_seconds_; }
  double group_seconds() const { return group_seconds_; }

 private:
  struct Pair {
    std::int32_t target, source;
  };
  std::vector<WalkNode> walk_nodes_;
  struct Context;
  std::vector<TaskLists> chunks_;   // per frontier pair (+1 for the serial top), reused
  std::vector<Pair> frontier_, next_;
  std::vector<std::size_t> p2p_offsets_, m2l_offsets_, p2l_offsets_, m2p_offsets_;
  std::vector<TaskSpan> p2p_spans_;
  std::vector<std::size_t> p2p_tasks_;   // per chunk, expanded
  std::size_t p2p_count_ = 0;
  double traverse_seconds_ = 0, group_seconds_ = 0;
  std::vector<InteractionTask> scratch_;
  std::vector<std::uint64_t> leaf_keys_;
  std::vector<std::uint32_t> node_rank_, node_of_rank_, leaf_rank_, leaf_of_rank_;   // of source_keys
};

// The pair test's constants (fmm/walk_pair.hpp) for these settings, as both walks use them.
WalkPairParams walk_pair_params(const WalkSettings& settings);

// The pair test's records of a tree's nodes (fmm/walk_pair.hpp), by all threads; nodes
// above depth top_levels that are not leaves are flagged top.
void walk_nodes_of(const OrbTree& tree, int top_levels, std::vector<WalkNode>& out);

// Checks the walk's precondition (periodic: r_cut < box/2, r_cut > 0; theta in [0, 1]) with
// a message.
void check_walk_settings(const WalkSettings& settings);

}  // namespace orbis
