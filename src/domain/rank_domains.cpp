#include "domain/rank_domains.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "fmm/walk_pair.hpp"

namespace orbis {
namespace {

// walk_pair's sink that only notes whether the pair was kept (any outcome but the drop).
// The groups that walk_pair may keep with a group, found by their box centres along x: a kept
// pair's boxes are at most reach apart on every axis (walk_pair drops a pair whose gaps, per
// axis, add up to more), so b's nearest-image centre distance along x from a is at most
// a's half width + the widest half width + reach. Sorted by centre, those are one or two runs
// (the box is periodic); a small margin covers the rounding of the two ways of measuring it.
// With the boxes of a few thousand groups each ~1/16 of the box wide, a row tests ~1/6 of
// the groups instead of all (the exact test stays walk_pair's).
class CentreIndex {
 public:
  CentreIndex(const std::vector<WalkNode>& nodes, double box) : box_(box) {
    order_.resize(nodes.size());
    for (std::uint32_t g = 0; g < nodes.size(); ++g) order_[g] = g;
    centre_.resize(nodes.size());
    for (std::size_t g = 0; g < nodes.size(); ++g) {
      centre_[g] = nodes[g].box_centre[0];
      widest_ = std::max(widest_, nodes[g].half_width[0]);
    }
    std::sort(order_.begin(), order_.end(),
              [&](std::uint32_t a, std::uint32_t b) { return centre_[a] < centre_[b] || (centre_[a] == centre_[b] && a < b); });
    sorted_.resize(order_.size());
    for (std::size_t k = 0; k < order_.size(); ++k) sorted_[k] = centre_[order_[k]];
  }
  // Calls f(b) for every group b that may be within reach of a (a itself included), each once.
  template <typename F>
  void near(const WalkNode& a, double reach, F&& f) const {
    const double c = a.box_centre[0];
    const double r = a.half_width[0] + widest_ + reach + 1e-9 * box_;
    if (2 * r >= box_ || order_.empty()) {
      for (std::uint32_t b : order_) f(b);
      return;
    }
    // [c - r, c + r] and its images one box away, clipped to the sorted centres' span.
    for (double shift : {-box_, 0.0, box_}) visit(c - r + shift, c + r + shift, f);
  }

 private:
  template <typename F>
  void visit(double lo, double hi, F&& f) const {
    auto k = static_cast<std::size_t>(std::lower_bound(sorted_.begin(), sorted_.end(), lo) - sorted_.begin());
    for (; k < sorted_.size() && sorted_[k] <= hi; ++k) f(order_[k]);
  }
  double box_ = 0, widest_ = 0;
  std::vector<std::uint32_t> order_;
  std::vector<double> centre_, sorted_;
};

struct KeptSink {
  bool kept = false;
  void m2l(const std::int8_t*) { kept = true; }
  void p2p(const std::int8_t*) { kept = true; }
  void p2l_m2p(bool) { kept = true; }
  void child(std::int32_t, std::int32_t) { kept = true; }
};

}  // namespace

RankDomains::RankDomains(double box_mpc_h, int max_leaf, int top_depth, const Comm& comm)
    : comm_(comm), box_(box_mpc_h), max_leaf_(max_leaf), top_depth_(top_depth) {
  if (max_leaf < 1 || top_depth < 0)
    fail("internal: rank domains for max_leaf = {} and top depth {}", max_leaf, top_depth);
}

std::string RankDomains::state() const { return built_ ? domains_.to_bytes() : std::string(); }

void RankDomains::restore(const std::string& state, const std::string& what) {
  ghosts_chosen_ = false;
  updated_ = false;
  built_ = !state.empty();
  domains_ = built_ ? NodeDomains::from_bytes(state, comm_.size(), what) : NodeDomains();
}

// Which other ranks' groups this rank imports and which of its own it sends where, from the
// reference boxes of all groups (the same on every rank, so both sides agree without a
// request): the pairs (own group, other rank's group) that walk_pair keeps at r_cut = reach
// between them, tested with the lower group first (the test is symmetric; one order makes
// that plain). full: every pair, afresh; else only the pairs of a group `moved` marks (whose
// reference is its current box now), the others' near_ as it was.
bool RankDomains::choose_ghosts(double reach, bool full, const std::vector<unsigned char>& moved) {
  const int me = comm_.rank();
  const std::size_t ranks = static_cast<std::size_t>(comm_.size());
  const std::uint32_t g_begin = domains_.begin(me), g_end = domains_.end(me), n_groups = domains_.groups();
  const std::size_t n_own = g_end - g_begin;
  std::vector<WalkNode> nodes(n_groups);
  std::vector<int> owner(n_groups);
  for (std::uint32_t g = 0; g < n_groups; ++g) {
    const Vec3d c = 0.5 * (ref_lo_[g] + ref_hi_[g]);
    nodes[g] = make_walk_node(ref_lo_[g], ref_hi_[g], c, 0.0, -1, -1, -1, false);
    owner[g] = domains_.owner(g);
  }
  const WalkPairParams params{box_, 0.5 * box_, reach, reach * reach, 0.0};
  if (full) {
    near_.assign(n_own * n_groups, 0);
    near_ranks_.assign(n_own * ranks, 0);
    near_own_.assign(n_groups, 0);
  }
  // The other ranks' groups whose pairs are all tested again.
  std::vector<std::uint32_t> moved_remote;
  if (!full)
    for (std::uint32_t b = 0; b < n_groups; ++b)
      if (moved[b] && (b < g_begin || b >= g_end)) moved_remote.push_back(b);
  Stopwatch tests_watch;
  const CentreIndex index(nodes, box_);
  const std::ptrdiff_t rows = static_cast<std::ptrdiff_t>(n_own);
  int flipped = 0;   // a pair changed its answer
#pragma omp parallel for schedule(dynamic, 4) reduction(max : flipped)
  for (std::ptrdiff_t k = 0; k < rows; ++k) {
    const std::size_t row = static_cast<std::size_t>(k);
    const std::uint32_t a = g_begin + static_cast<std::uint32_t>(row);
    unsigned char* near = near_.data() + row * n_groups;
    std::uint32_t* by_rank = near_ranks_.data() + row * ranks;
    const auto test = [&](std::uint32_t b) {
      KeptSink sink;
      const std::uint32_t x = std::min(a, b), y = std::max(a, b);
      walk_pair(static_cast<std::int32_t>(x), static_cast<std::int32_t>(y), nodes[x], nodes[y], params, sink);
      const unsigned char now = sink.kept ? 1 : 0;
      if (now == near[b]) return;
      near[b] = now;
      flipped = 1;
      const std::uint32_t step = now ? 1u : ~0u;   // +1 or -1 (modulo 2^32)
      by_rank[owner[b]] += step;
#pragma omp atomic
      near_own_[b] += step;
    };
    if (full || moved[a]) {
      // The pairs near before (those now out of the index's reach flip to far), then the
      // index's candidates (a pair tested twice keeps its answer); every other pair was far
      // and stays far.
      const auto remote = [&](std::uint32_t b) {
        if (b < g_begin || b >= g_end) test(b);
      };
      if (!full)
        for (std::uint32_t b = 0; b < n_groups; ++b)
          if (near[b]) remote(b);
      index.near(nodes[a], reach, remote);
    } else {
      for (std::uint32_t b : moved_remote) test(b);
    }
  }
  report_.times.ghost_tests = tests_watch.seconds();
  // No pair changed on any rank: the routes stand (their rebuild, about a million sent
  // indices at 256^3 on 2 ranks, and its collective check cost more than the tests).
  if (!full && comm_.max<std::uint64_t>(static_cast<std::uint64_t>(flipped)) == 0) return false;
  Stopwatch routes_watch;
  std::vector<std::uint32_t> groups_before, sent_before;
  groups_before.swap(groups_);
  sent_before.swap(routes_.sent);
  routes_from_near();
  const bool changed = groups_ != groups_before || routes_.sent != sent_before;
  report_.times.ghost_routes = routes_watch.seconds();
  return changed;
}

// The routes, groups_ and group_offsets_ from the counts of near pairs.
void RankDomains::routes_from_near() {
  const int me = comm_.rank();
  const std::size_t ranks = static_cast<std::size_t>(comm_.size());
  const std::uint32_t g_begin = domains_.begin(me), g_end = domains_.end(me), n_groups = domains_.groups();
  const std::size_t n_own = g_end - g_begin;
  // Sent: for each other rank, in rank order, the own groups near one of its groups, whole
  // (their runs listed first, then filled in parallel: ~2M indices at 256^3 on 2 ranks).
  routes_.counts.assign(ranks, 0);
  routes_.recv_counts.assign(ranks, 0);
  std::vector<std::uint32_t> runs;            // own groups, in the order they are sent
  std::vector<std::size_t> run_at{0};         // where each run starts in routes_.sent
  for (std::size_t r = 0; r < ranks; ++r) {
    if (static_cast<int>(r) == me) continue;
    for (std::size_t a = 0; a < n_own; ++a) {
      if (near_ranks_[a * ranks + r] == 0) continue;
      const std::uint32_t size = own_offsets_[a + 1] - own_offsets_[a];
      runs.push_back(static_cast<std::uint32_t>(a));
      run_at.push_back(run_at.back() + size);
      routes_.counts[r] += size;
    }
  }
  routes_.sent.resize(run_at.back());
#pragma omp parallel for schedule(dynamic, 16)
  for (std::ptrdiff_t k = 0; k < static_cast<std::ptrdiff_t>(runs.size()); ++k) {
    const std::size_t j = static_cast<std::size_t>(k);
    std::iota(routes_.sent.begin() + static_cast<std::ptrdiff_t>(run_at[j]),
              routes_.sent.begin() + static_cast<std::ptrdiff_t>(run_at[j + 1]), own_offsets_[runs[j]]);
  }
  // Received: the other ranks' groups near one of the own, by rank and group.
  groups_.resize(n_own);
  for (std::size_t a = 0; a < n_own; ++a) groups_[a] = g_begin + static_cast<std::uint32_t>(a);
  group_offsets_ = own_offsets_;
  for (std::uint32_t b = 0; b < n_groups; ++b) {
    if ((b >= g_begin && b < g_end) || near_own_[b] == 0) continue;
    groups_.push_back(b);
    group_offsets_.push_back(group_offsets_.back() + group_count_[b]);
    routes_.recv_counts[static_cast<std::size_t>(domains_.owner(b))] += group_count_[b];
  }
  report_.ghost_groups = groups_.size() - n_own;
  // Each side found its routes alone: the counts the others send must be those expected (a
  // refresh trusts them, and writes what arrives after the own particles).
  if (comm_.alltoall_counts(routes_.counts, routes_.sent.size()) != routes_.recv_counts)
    fail("internal: rank {} expects other ghost counts than the ranks send it", me);
}

const std::vector<Vec3d>& RankDomains::with_ghosts(const std::vector<Vec3d>& pos, double r_cut, bool* same_set) {
  if (same_set) *same_set = false;
  report_.times.ghost_choice = report_.times.ghost_exchange = 0;
  Stopwatch watch;
  if (comm_.size() == 1) {
    report_.rechosen = false;
    with_ghosts_ = pos;
    group_offsets_ = {0, static_cast<std::uint32_t>(pos.size())};
    groups_ = {0};
    return with_ghosts_;
  }
  if (!updated_ || own_offsets_.back() != pos.size())
    fail("internal: ghosts asked for {} particles, the last domain update left {}", pos.size(),
         updated_ ? own_offsets_.back() : 0u);
  // One pass over the particles, group by group: copied to the front of the result (its
  // buffer is the last call's: between the sub-steps of a PM step the same size, no
  // allocation) and each own group's tight box at these positions (the box the forest's
  // refit gives its root).
  const std::size_t n = pos.size();
  if (with_ghosts_.size() < n) with_ghosts_.resize(n);
  const std::size_t n_own = own_offsets_.size() - 1;
  own_lo_.resize(n_own);
  own_hi_.resize(n_own);
#pragma omp parallel for schedule(dynamic, 16)
  for (std::ptrdiff_t k = 0; k < static_cast<std::ptrdiff_t>(n_own); ++k) {
    const std::size_t g = static_cast<std::size_t>(k);
    const std::uint32_t first = own_offsets_[g], end = own_offsets_[g + 1];
    Vec3d lo{HUGE_VAL, HUGE_VAL, HUGE_VAL}, hi{-HUGE_VAL, -HUGE_VAL, -HUGE_VAL};
    if (end > first) lo = hi = pos[first];
    for (std::uint32_t i = first; i < end; ++i) {
      const Vec3d& x = pos[i];
      with_ghosts_[i] = x;
      lo.x = std::min(lo.x, x.x); lo.y = std::min(lo.y, x.y); lo.z = std::min(lo.z, x.z);
      hi.x = std::max(hi.x, x.x); hi.y = std::max(hi.y, x.y); hi.z = std::max(hi.z, x.z);
    }
    own_lo_[g] = lo;
    own_hi_[g] = hi;
  }
  const double copied = watch.seconds();
  const GhostPlan plan = plan_ghosts(own_lo_, own_hi_, r_cut);
  watch.restart();
  refresh_ghosts(pos, *plan.routes, comm_, with_ghosts_, n, ghost_send_);
  report_.times.ghost_exchange = copied + watch.seconds();
  if (same_set) *same_set = plan.kept;
  return with_ghosts_;
}

RankDomains::GhostPlan RankDomains::plan_ghosts(const std::vector<Vec3d>& own_lo, const std::vector<Vec3d>& own_hi,
                                                double r_cut) {
  report_.rechosen = false;
  report_.times.ghost_choice = report_.times.ghost_tests = report_.times.ghost_routes = 0;
  if (comm_.size() == 1 || !updated_)
    fail("internal: ghosts planned {}", comm_.size() == 1 ? "on one rank" : "before a domain update");
  const std::size_t n_own = own_offsets_.size() - 1;
  if (own_lo.size() != n_own || own_hi.size() != n_own)
    fail("internal: ghosts planned from {} boxes for {} own groups", own_lo.size(), n_own);
  // How far a group's box sticks out of its reference box (a maximum: exact, the same
  // whatever computed the boxes).
  const std::uint32_t g_begin = domains_.begin(comm_.rank()), n_groups = domains_.groups();
  const bool chosen = ghosts_chosen_ && ref_lo_.size() == n_groups && chosen_r_cut_ == r_cut;
  const auto sticks_out = [](const Vec3d& ref_lo, const Vec3d& ref_hi, const Vec3d& lo, const Vec3d& hi) {
    double e = 0;
    for (int d = 0; d < 3; ++d) e = std::max({e, ref_lo[d] - lo[d], hi[d] - ref_hi[d]});
    return e;
  };
  double grown = chosen ? 0.0 : HUGE_VAL;
  if (chosen)
    for (std::size_t g = 0; g < n_own; ++g)
      if (own_offsets_[g + 1] > own_offsets_[g])
        grown = std::max(grown, sticks_out(ref_lo_[g_begin + g], ref_hi_[g_begin + g], own_lo[g], own_hi[g]));
  // The choice stands while it holds every group the walk's drop test keeps with an own
  // group at these positions (bitwise forces need the forest to: a kept pair's leaves make
  // P2P tasks, and the tiled kernel cuts its tiles by their sources). A pair not chosen was
  // more than reach = r_cut (1 + kGhostMargin) apart at the two groups' reference boxes
  // (walk_pair's gap: the nearest-image distance of the boxes, per axis); if no box sticks
  // out of its reference by more than e on any side, each axis' gap has shrunk by at most 2e
  // and the distance by at most 2e sqrt(3), so e <= r_cut kGhostMargin / (2 sqrt(3)) keeps
  // it beyond r_cut (with a 1e-6 relative margin for the rounding of the gaps). Measured on
  // the boxes, not on the particles' displacements: a particle that crosses a face of the
  // periodic box moves a little, but its group's box (the tree knows no periodicity) then
  // spans the whole box, and such a group is kept with every group near it on the other two
  // axes. A new choice keeps that invariant incrementally: the groups that stuck out by more
  // take their current box as reference and their pairs are tested again at the reference
  // boxes; every other pair's groups are still within e of the references it was tested at.
  const double allowed = kGhostMargin * r_cut / (2 * std::sqrt(3.0)) * (1 - 1e-6);
  bool kept = comm_.max(grown) <= allowed;
  if (!kept) {
    Stopwatch watch;
    const double reach = r_cut * (1 + kGhostMargin);
    std::vector<Vec3d> lo, hi;
    if (top_boxes_current_) {
      // Right after update(): the top tree's boxes, exact for these positions.
      lo = group_lo_;
      hi = group_hi_;
    } else {
      // Later: each rank's groups' current boxes (tight, as the refitted forest's), gathered
      // in group order (the runs ascend with the rank).
      std::vector<Vec3d> own_box(2 * n_own);
      for (std::size_t k = 0; k < n_own; ++k) {
        own_box[2 * k] = own_lo[k];
        own_box[2 * k + 1] = own_hi[k];
      }
      const std::vector<Vec3d> boxes = comm_.allgatherv(own_box);
      lo.resize(n_groups);
      hi.resize(n_groups);
      for (std::size_t g = 0; g < lo.size(); ++g) {
        lo[g] = boxes[2 * g];
        hi[g] = boxes[2 * g + 1];
      }
    }
    // The groups whose pairs are tested again (every rank marks the same: the same boxes and
    // references): all at the first choice after update() or for another r_cut, else those
    // that stuck out of their reference by more than allowed (empty groups never do), and
    // those that shrank inside it by more (not needed for the guarantee, but without them a
    // group whose particle crossed a face and back would keep its box-wide reference, and
    // every ghost it brought, until the next update).
    std::vector<unsigned char> moved(n_groups, chosen ? 0 : 1);
    if (chosen) {
      for (std::uint32_t g = 0; g < n_groups; ++g)
        if (group_count_[g] > 0 && (sticks_out(ref_lo_[g], ref_hi_[g], lo[g], hi[g]) > allowed ||
                                    sticks_out(lo[g], hi[g], ref_lo_[g], ref_hi_[g]) > allowed)) {
          moved[g] = 1;
          ref_lo_[g] = lo[g];
          ref_hi_[g] = hi[g];
        }
    } else {
      ref_lo_.swap(lo);
      ref_hi_.swap(hi);
    }
    // The same ghosts as before (same groups, same particles sent): the caller may keep its
    // send list and refit its forest.
    const bool changed = choose_ghosts(reach, !chosen, moved);
    kept = ghosts_chosen_ && !changed;
    top_boxes_current_ = false;
    chosen_r_cut_ = r_cut;
    ghosts_chosen_ = true;
    report_.rechosen = true;
    report_.times.ghost_choice = watch.seconds();
  }
  report_.ghosts = group_offsets_.back() - own_offsets_.back();
  report_.ghost_bytes_sent = routes_.sent.size() * sizeof(Vec3d);
  report_.ghost_bytes_received = report_.ghosts * sizeof(Vec3d);
  return GhostPlan{kept, &routes_};
}

}  // namespace orbis
