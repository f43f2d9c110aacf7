#include "fmm/walk.hpp"

#include <cmath>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "fmm/p2p_grouping.hpp"

namespace orbis {
namespace {

// Pairs in the serial top of the walk before the parallel part starts. Fixed (not tied to
// the thread count) so the task lists never depend on the number of threads.
constexpr std::size_t kFrontierPairs = 2048;

// Tasks of a list, a mutual one counted twice.
std::size_t expanded_size(const std::vector<InteractionTask>& list) {
  std::size_t n = list.size();
  for (const InteractionTask& t : list) n += (t.flags & kMutualTask) ? 1 : 0;
  return n;
}

}  // namespace

void check_walk_settings(const WalkSettings& s) {
  if (!(s.box_mpc_h > 0)) fail("short-range walk: box size {} Mpc/h must be > 0", s.box_mpc_h);
  if (!(s.r_cut > 0)) fail("short-range walk: r_cut = {} Mpc/h must be > 0", s.r_cut);
  if (!(s.r_cut < 0.5 * s.box_mpc_h))
    fail("short-range walk: r_cut = {} Mpc/h must be < BoxSize/2 = {} Mpc/h (reduce "
         "[gravity] r_cut_over_rs or rs_over_cell, or use a finer PM mesh)",
         s.r_cut, 0.5 * s.box_mpc_h);
  if (!(s.theta > 0 && s.theta <= 1)) fail("short-range walk: theta = {} must be in (0, 1]", s.theta);
}

struct DualTreeWalk::Context {
  const std::vector<WalkNode>& nodes;
  double box, half_box, r_cut, r_cut2, theta2;
  bool half_p2p;

  // Classifies the pair: emits its task(s) and returns 0, or writes the pairs it splits
  // into to `split` and returns how many. A pair of distinct nodes is mutual: each task is
  // emitted for both directions (source image negated); (t, t) is a node with itself.
  int step(std::int32_t t, std::int32_t s, TaskLists& out, Pair* split) const {
    const bool mutual = t != s;
    const WalkNode& T = nodes[static_cast<std::size_t>(t)];
    const WalkNode& S = nodes[static_cast<std::size_t>(s)];
    const Vec3d& tc = T.box_centre;
    const Vec3d& sc = S.box_centre;
    const Vec3d& th = T.half_width;
    const Vec3d& sh = S.half_width;
    double raw[3], half[3], gap2 = 0, far2 = 0;
    std::int8_t image[3];
    bool unique = true;
    for (int d = 0; d < 3; ++d) {
      // Swapping T and S negates every quantity exactly: the decision is symmetric.
      raw[d] = sc[d] - tc[d];
      // Centres lie in [0, L): |raw| < L, so the nearest image is -1, 0 or +1 (a tie at
      // exactly L/2 keeps 0, as nearbyint's round-half-even would).
      const double e = raw[d] > half_box ? -1.0 : (raw[d] < -half_box ? 1.0 : 0.0);
      const double dc = std::fabs(raw[d] + e * box);
      half[d] = th[d] + sh[d];
      if (dc > half[d]) gap2 += (dc - half[d]) * (dc - half[d]);
      far2 += (dc + half[d]) * (dc + half[d]);
      // Another image moves this axis' separation by L: it stays beyond r_cut if so.
      if (dc + half[d] + r_cut >= box) unique = false;
      image[d] = static_cast<std::int8_t>(e);
    }
    if (gap2 > r_cut2) return 0;

    if (unique && far2 <= r_cut2) {
      const Vec3d shift{image[0] * box, image[1] * box, image[2] * box};
      const Vec3d R = (T.centre - S.centre) - shift;
      const double reach = T.radius + S.radius;
      if (reach * reach < theta2 * norm2(R)) {
        emit(out.m2l, static_cast<std::uint32_t>(t), static_cast<std::uint32_t>(s), image, mutual);
        return 0;
      }
    }

    if (T.is_leaf() && S.is_leaf()) {
      const auto tl = static_cast<std::uint32_t>(T.leaf), sl = static_cast<std::uint32_t>(S.leaf);
      if (unique) {
        emit_p2p(out.p2p, tl, sl, image, mutual);
        return 0;
      }
      // Several images can come within r_cut (a leaf comparable to L/2 - r_cut): one task
      // per image whose boxes do; the P2P cut keeps each particle pair in one at most.
      double gap_axis[3][3];
      for (int d = 0; d < 3; ++d)
        for (int e = -1; e <= 1; ++e) {
          const double dc = std::fabs(raw[d] + e * box);
          gap_axis[d][e + 1] = dc > half[d] ? dc - half[d] : 0.0;
        }
      for (int ex = -1; ex <= 1; ++ex)
        for (int ey = -1; ey <= 1; ++ey)
          for (int ez = -1; ez <= 1; ++ez) {
            const double g2 = gap_axis[0][ex + 1] * gap_axis[0][ex + 1] +
                              gap_axis[1][ey + 1] * gap_axis[1][ey + 1] +
                              gap_axis[2][ez + 1] * gap_axis[2][ez + 1];
            if (g2 > r_cut2) continue;
            // For a leaf with itself the loop already visits every image and its negation.
            const std::int8_t e[3] = {static_cast<std::int8_t>(ex), static_cast<std::int8_t>(ey),
                                      static_cast<std::int8_t>(ez)};
            emit_p2p(out.p2p, tl, sl, e, mutual);
          }
      return 0;
    }

    bool split_t, split_s;
    if (T.is_leaf()) {
      split_t = false, split_s = true;
    } else if (S.is_leaf()) {
      split_t = true, split_s = false;
    } else {
      split_t = T.radius >= S.radius;
      split_s = S.radius >= T.radius;
    }
    int n = 0;
    const std::int32_t tk[2] = {split_t ? T.left : t, split_t ? T.right : t};
    const std::int32_t sk[2] = {split_s ? S.left : s, split_s ? S.right : s};
    for (int a = 0; a < (split_t ? 2 : 1); ++a)
      for (int b = 0; b < (split_s ? 2 : 1); ++b) {
        // A node with itself (both split): (left, right) is mutual, so (right, left) is not
        // visited. Distinct nodes lie in disjoint subtrees, so their children pairs do too.
        if (!mutual && a > b) continue;
        split[n++] = Pair{tk[a], sk[b]};
      }
    return n;
  }

  // P2P: in half mode a mutual pair is one task flagged kMutualTask (the backend expands
  // it into the same two tasks, in the same order).
  void emit_p2p(std::vector<InteractionTask>& list, std::uint32_t t, std::uint32_t s,
                const std::int8_t image[3], bool mutual) const {
    if (half_p2p && mutual)
      list.push_back(InteractionTask{t, s, {image[0], image[1], image[2]}, kMutualTask});
    else
      emit(list, t, s, image, mutual);
  }

  static void emit(std::vector<InteractionTask>& list, std::uint32_t t, std::uint32_t s,
                   const std::int8_t image[3], bool mutual) {
    list.push_back(InteractionTask{t, s, {image[0], image[1], image[2]}, 0});
    if (mutual)
      list.push_back(InteractionTask{s, t,
                                     {static_cast<std::int8_t>(-image[0]), static_cast<std::int8_t>(-image[1]),
                                      static_cast<std::int8_t>(-image[2])}, 0});
  }

  void recurse(std::int32_t t, std::int32_t s, TaskLists& out) const {
    Pair split[4];
    const int n = step(t, s, out, split);
    for (int i = 0; i < n; ++i) recurse(split[i].target, split[i].source, out);
  }
};

void DualTreeWalk::run(const OrbTree& tree, const WalkSettings& settings, TaskLists& lists,
                       P2POutput output) {
  check_walk_settings(settings);
  const bool half = output == P2POutput::kHalfSpans;
  // What the pair test reads, 96 bytes a node instead of TreeNode's 120 (and the box
  // centre and half width computed once, not per pair).
  const auto& tn = tree.nodes();
  walk_nodes_.resize(tn.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(tn.size()); ++i) {
    const TreeNode& node = tn[static_cast<std::size_t>(i)];
    walk_nodes_[static_cast<std::size_t>(i)] =
        WalkNode{node.box_centre(), node.half_width(), node.centre, node.radius, node.left, node.right, node.leaf};
  }
  const Context ctx{walk_nodes_, settings.box_mpc_h, 0.5 * settings.box_mpc_h, settings.r_cut,
                    settings.r_cut * settings.r_cut, settings.theta * settings.theta, half};

  Stopwatch watch;
  if (chunks_.empty()) chunks_.resize(1);
  TaskLists& top = chunks_[0];
  top.p2p.clear();
  top.m2l.clear();
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
  group_spans_by_target(m2l_spans, tree.nodes().size(), 0, m2l_offsets_, lists.m2l, scratch_);
  if (!half) {
    group_spans_by_target(p2p_spans_, tree.leaves().size(), 0, p2p_offsets_, lists.p2p, scratch_);
  } else {
    lists.p2p.clear();
    p2p_offsets_.clear();
  }
  group_seconds_ = watch.seconds();
}

}  // namespace orbis
