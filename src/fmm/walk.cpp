#include "fmm/walk.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "fmm/p2p_grouping.hpp"
#include "fmm/walk_pair.hpp"

namespace orbis {
namespace {

// Pairs in the serial top of the walk before the parallel part starts. Fixed (not tied to
// the thread count) so the task lists never depend on the number of threads.
constexpr std::size_t kFrontierPairs = 2048;

// Vacuum: the opening angle of the leaf-cell pairs (WalkPairParams::leaf_cell_theta) over
// theta. A leaf-cell pair approximates what P2P summed exactly, with M2L's error at the same
// angle; at 0.8 theta the forces' median and 99th-percentile errors stay below the walk's
// without leaf-cell pairs (Plummer sphere and Hernquist pair of 24576 particles, theta 0.5,
// p 6, as tests/physics/test_vacuum_leaf_cell.cpp: 1.0 raised the median by ~1.5x), at
// ~0.35x its P2P pairs (0.2x at 1e5, tests/bench/bench_vacuum).
constexpr double kLeafCellThetaFactor = 0.8;

// Tasks of a list, a mutual one counted twice.
std::size_t expanded_size(const std::vector<InteractionTask>& list) {
  std::size_t n = list.size();
  for (const InteractionTask& t : list) n += (t.flags & kMutualTask) ? 1 : 0;
  return n;
}

// rank[i]: the place of key i in increasing order (keys distinct); of_rank its inverse.
void ranks_of(const std::vector<std::uint64_t>& keys, std::vector<std::uint32_t>& rank,
              std::vector<std::uint32_t>& of_rank) {
  of_rank.resize(keys.size());
  std::iota(of_rank.begin(), of_rank.end(), 0u);
  std::sort(of_rank.begin(), of_rank.end(), [&](std::uint32_t a, std::uint32_t b) { return keys[a] < keys[b]; });
  rank.resize(keys.size());
  for (std::size_t r = 0; r < keys.size(); ++r) {
    if (r > 0 && keys[of_rank[r]] == keys[of_rank[r - 1]])
      fail("dual-tree walk: source key {} given to two nodes", keys[of_rank[r]]);
    rank[of_rank[r]] = static_cast<std::uint32_t>(r);
  }
}

}  // namespace

void check_walk_settings(const WalkSettings& s) {
  if (s.periodic) {
    if (!(s.box_mpc_h > 0)) fail("short-range walk: box size {} Mpc/h must be > 0", s.box_mpc_h);
    if (!(s.r_cut > 0)) fail("short-range walk: r_cut = {} Mpc/h must be > 0", s.r_cut);
    if (!(s.r_cut < 0.5 * s.box_mpc_h))
      fail("short-range walk: r_cut = {} Mpc/h must be < BoxSize/2 = {} Mpc/h (reduce "
           "[gravity] r_cut_over_rs or rs_over_cell, or use a finer PM mesh)",
           s.r_cut, 0.5 * s.box_mpc_h);
  }
  if (!(s.theta >= 0 && s.theta <= 1)) fail("tree walk: theta = {} must be in [0, 1]", s.theta);
  if (s.top_levels < 0 || s.top_levels > 30) fail("short-range walk: top_levels = {} outside [0, 30]", s.top_levels);
}

void walk_nodes_of(const OrbTree& tree, int top_levels, std::vector<WalkNode>& out) {
  const auto& tn = tree.nodes();
  out.resize(tn.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(tn.size()); ++i) {
    const TreeNode& n = tn[static_cast<std::size_t>(i)];
    out[static_cast<std::size_t>(i)] = make_walk_node(n.lo, n.hi, n.centre, n.radius, n.left, n.right, n.leaf,
                                                     is_top_node(n.depth, n.left, top_levels));
  }
}

WalkPairParams walk_pair_params(const WalkSettings& s) {
  if (!s.periodic) {
    // Vacuum: a period no pair comes near and an infinite cut (WalkPairParams), so the
    // pair test's images are all 0 and unique, nothing is dropped, and M2L is decided by the
    // opening angle alone. 2^1000: exact in double, and 0 * it is exactly 0.
    const double no_period = 0x1p1000;
    const double no_cut2 = std::numeric_limits<double>::infinity();
    const double lc_theta = kLeafCellThetaFactor * s.theta;
    return WalkPairParams{no_period, 0.5 * no_period, 0.25 * no_period, no_cut2, s.theta * s.theta, lc_theta,
                          lc_theta * lc_theta, s.leaf_cell};
  }
  return WalkPairParams{s.box_mpc_h, 0.5 * s.box_mpc_h, s.r_cut, s.r_cut * s.r_cut, s.theta * s.theta, 0.0, 0.0, false};
}

struct DualTreeWalk::Context {
  const std::vector<WalkNode>& nodes;
  WalkPairParams params;
  bool half_p2p;
  const unsigned char* sinks;   // per node: holds a target (null: every node does)

  bool is_sink(std::int32_t node) const { return !sinks || sinks[node]; }

  // Where the pair test's outcome goes: the tasks to `out`, the child pairs to `split`.
  struct Sink {
    const Context& ctx;
    std::int32_t t, s;
    TaskLists& out;
    Pair* split;
    int n = 0;
    void m2l(const std::int8_t image[3]) {
      ctx.emit(out.m2l, t, s, static_cast<std::uint32_t>(t), static_cast<std::uint32_t>(s), image, false);
    }
    void p2p(const std::int8_t image[3]) {
      ctx.emit(out.p2p, t, s, static_cast<std::uint32_t>(ctx.nodes[static_cast<std::size_t>(t)].leaf),
               static_cast<std::uint32_t>(ctx.nodes[static_cast<std::size_t>(s)].leaf), image, ctx.half_p2p);
    }
    // The leaf-cell pair's two tasks, each if its target is a sink: P2L (target the node,
    // source the leaf) and M2P (target the leaf, source the node).
    void p2l_m2p(bool leaf_is_target) {
      const std::int32_t leaf_node = leaf_is_target ? t : s, cell = leaf_is_target ? s : t;
      const auto leaf = static_cast<std::uint32_t>(ctx.nodes[static_cast<std::size_t>(leaf_node)].leaf);
      if (ctx.is_sink(cell)) out.p2l.push_back(InteractionTask{static_cast<std::uint32_t>(cell), leaf, {0, 0, 0}, 0});
      if (ctx.is_sink(leaf_node))
        out.m2p.push_back(InteractionTask{leaf, static_cast<std::uint32_t>(cell), {0, 0, 0}, 0});
    }
    void child(std::int32_t a, std::int32_t b) { split[n++] = Pair{a, b}; }
  };

  // Classifies the pair (fmm/walk_pair.hpp, shared with the device walk): emits its
  // task(s) and returns 0, or writes the pairs it splits into to `split` and returns how
  // many. A pair of distinct nodes is mutual: each task is emitted for both directions
  // (source image negated); (t, t) is a node with itself.
  int step(std::int32_t t, std::int32_t s, TaskLists& out, Pair* split) const {
    Sink sink{*this, t, s, out, split};
    walk_pair(t, s, nodes[static_cast<std::size_t>(t)], nodes[static_cast<std::size_t>(s)], params, sink);
    return sink.n;
  }

  // The task (target, source, image) of node pair (t, s) and, when t != s, (source, target,
  // -image), each only if its target node is a sink. In half mode (`half`, P2P) a mutual
  // pair whose both directions are wanted is one task flagged kMutualTask (the backend
  // expands it into the same two tasks, in the same order).
  void emit(std::vector<InteractionTask>& list, std::int32_t t, std::int32_t s, std::uint32_t target,
            std::uint32_t source, const std::int8_t image[3], bool half) const {
    const bool mutual = t != s;
    const bool forward = is_sink(t), backward = mutual && is_sink(s);
    if (half && forward && backward) {
      list.push_back(InteractionTask{target, source, {image[0], image[1], image[2]}, kMutualTask});
      return;
    }
    if (forward) list.push_back(InteractionTask{target, source, {image[0], image[1], image[2]}, 0});
    if (backward)
      list.push_back(InteractionTask{source, target,
                                     {static_cast<std::int8_t>(-image[0]), static_cast<std::int8_t>(-image[1]),
                                      static_cast<std::int8_t>(-image[2])}, 0});
  }

  // Below the serial top: a pair none of whose nodes holds a sink has no task to give.
  void recurse(std::int32_t t, std::int32_t s, TaskLists& out) const {
    if (!is_sink(t) && !is_sink(s)) return;
    Pair split[4];
    const int n = step(t, s, out, split);
    for (int i = 0; i < n; ++i) recurse(split[i].target, split[i].source, out);
  }
};

void DualTreeWalk::run(const OrbTree& tree, const WalkSettings& settings, TaskLists& lists,
                       P2POutput output, const std::vector<unsigned char>* sinks,
                       const std::vector<std::uint64_t>* source_keys) {
  check_walk_settings(settings);
  if (sinks && sinks->size() != tree.nodes().size())
    fail("dual-tree walk: {} sink flags for {} nodes", sinks->size(), tree.nodes().size());
  if (source_keys && source_keys->size() != tree.nodes().size())
    fail("dual-tree walk: {} source keys for {} nodes", source_keys->size(), tree.nodes().size());
  const bool half = output == P2POutput::kHalfSpans;
  walk_nodes_of(tree, settings.top_levels, walk_nodes_);
  const Context ctx{walk_nodes_, walk_pair_params(settings), half, sinks ? sinks->data() : nullptr};

  Stopwatch watch;
  if (chunks_.empty()) chunks_.resize(1);
  TaskLists& top = chunks_[0];
  top.p2p.clear();
  top.m2l.clear();
  top.p2l.clear();
  top.m2p.clear();
  // The serial top is never pruned (only its tasks are filtered), so the frontier, and with
  // it the order of every target's tasks, is the same with sinks as without.
  frontier_.assign(1, Pair{0, 0});
  while (!frontier_.empty() && frontier_.size() < kFrontierPairs) {
    next_.clear();
    for (const Pair& pair : frontier_) {
      Pair split[4];
      const int n = ctx.step(pair.target, pair.source, top, split);
      next_.insert(next_.end(), split, split + n);
    }
    frontier_.swap(next_);
  }

  const std::size_t n_chunks = frontier_.size() + 1;
  if (chunks_.size() < n_chunks) chunks_.resize(n_chunks);
  p2p_tasks_.assign(n_chunks, 0);
  const long n_frontier = static_cast<long>(frontier_.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (long i = 0; i < n_frontier; ++i) {
    TaskLists& out = chunks_[static_cast<std::size_t>(i) + 1];
    out.p2p.clear();
    out.m2l.clear();
    out.p2l.clear();
    out.m2p.clear();
    ctx.recurse(frontier_[static_cast<std::size_t>(i)].target, frontier_[static_cast<std::size_t>(i)].source, out);
    p2p_tasks_[static_cast<std::size_t>(i) + 1] = expanded_size(out.p2p);
  }
  p2p_tasks_[0] = expanded_size(chunks_[0].p2p);   // (top dangles once chunks_ grew)
  traverse_seconds_ = watch.seconds();
  watch.restart();

  // M2L grouped by target node (the far field sums per target). P2P as spans of the
  // chunks in walk order (a backend that groups on its own reads them in place), and,
  // unless in half mode, grouped by target leaf into lists.p2p (the P2PInput::tasks
  // contract).
  std::vector<TaskSpan> m2l_spans(n_chunks);
  p2p_spans_.resize(n_chunks);
  for (std::size_t c = 0; c < n_chunks; ++c) {
    m2l_spans[c] = TaskSpan{chunks_[c].m2l.data(), chunks_[c].m2l.size()};
    p2p_spans_[c] = TaskSpan{chunks_[c].p2p.data(), chunks_[c].p2p.size()};
  }
  p2p_count_ = 0;
  for (std::size_t c = 0; c < n_chunks; ++c) p2p_count_ += p2p_tasks_[c];
  // Canonical: each target's tasks by (source, image), so that the CPU's sums do not
  // depend on the frontier or the side of a mutual pair (walk.hpp). Not the half spans.
  if (source_keys) {
    ranks_of(*source_keys, node_rank_, node_of_rank_);
    const auto& leaf_node = tree.leaf_node();
    leaf_keys_.resize(leaf_node.size());
    for (std::size_t l = 0; l < leaf_node.size(); ++l)
      leaf_keys_[l] = (*source_keys)[static_cast<std::size_t>(leaf_node[l])];
    ranks_of(leaf_keys_, leaf_rank_, leaf_of_rank_);
  }
  group_spans_by_target(m2l_spans, tree.nodes().size(), 0, m2l_offsets_, lists.m2l, scratch_, true,
                        source_keys ? node_rank_.data() : nullptr, source_keys ? node_of_rank_.data() : nullptr);
  if (!half) {
    group_spans_by_target(p2p_spans_, tree.leaves().size(), 0, p2p_offsets_, lists.p2p, scratch_, true,
                          source_keys ? leaf_rank_.data() : nullptr, source_keys ? leaf_of_rank_.data() : nullptr);
  } else {
    lists.p2p.clear();
    p2p_offsets_.clear();
  }
  // Leaf-cell tasks (vacuum only: no source keys, no forest), each target's by source.
  std::size_t n_p2l = 0, n_m2p = 0;
  for (std::size_t c = 0; c < n_chunks; ++c) n_p2l += chunks_[c].p2l.size(), n_m2p += chunks_[c].m2p.size();
  if (n_p2l + n_m2p > 0) {
    std::vector<TaskSpan> p2l_spans(n_chunks), m2p_spans(n_chunks);
    for (std::size_t c = 0; c < n_chunks; ++c) {
      p2l_spans[c] = TaskSpan{chunks_[c].p2l.data(), chunks_[c].p2l.size()};
      m2p_spans[c] = TaskSpan{chunks_[c].m2p.data(), chunks_[c].m2p.size()};
    }
    group_spans_by_target(p2l_spans, tree.nodes().size(), tree.leaves().size(), p2l_offsets_, lists.p2l, scratch_,
                          true);
    group_spans_by_target(m2p_spans, tree.leaves().size(), tree.nodes().size(), m2p_offsets_, lists.m2p, scratch_,
                          true);
  } else {
    lists.p2l.clear();
    lists.m2p.clear();
    p2l_offsets_.clear();
    m2p_offsets_.clear();
  }
  group_seconds_ = watch.seconds();
}

}  // namespace orbis
