#include "domain/global_top_tree.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/error.hpp"
#include "tree/orb_tree.hpp"
#include "tree/split_axis.hpp"

namespace orbis {
namespace {

// An order-preserving map of doubles (not NaN) to uint64: flip all bits of negatives, the
// sign bit of the rest. -0.0 maps as +0.0, since PositionLess (operator<, ==) does not tell
// them apart.
std::uint64_t ordered_bits(double x) {
  if (x == 0.0) x = 0.0;
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return (u >> 63) != 0 ? ~u : (u | (std::uint64_t{1} << 63));
}

// The inverse of ordered_bits (-0.0 comes back as +0.0).
double from_ordered(std::uint64_t u) {
  const std::uint64_t v = (u >> 63) != 0 ? (u & ~(std::uint64_t{1} << 63)) : ~u;
  double x;
  std::memcpy(&x, &v, sizeof x);
  return x;
}

// A round's digit: 8 bits, wider while the round's histograms stay small (few nodes, the
// top levels, where the first bits after the box's common prefix are mostly the exponent
// and an 8-bit digit leaves about half the members undecided).
constexpr int kDigitBits = 8;
constexpr int kMaxDigitBits = 16;
constexpr std::size_t kMaxRoundBins = std::size_t{1} << 18;   // over all nodes of a round
int digit_bits(std::size_t n_active) {
  int bits = kDigitBits;
  while (bits < kMaxDigitBits && (n_active << (bits + 1)) <= kMaxRoundBins) ++bits;
  return bits;
}
constexpr int kKeyBits = 192;   // (A, A+1, A+2), 64 bits each

// The bits every member's key shares, from the node's box: the keys' word w lies between
// those of lo and hi on its coordinate, and once lo and hi differ there the later words are
// unbounded. 192: all members sit at one position.
int common_prefix_bits(const Vec3d& lo, const Vec3d& hi, int axis) {
  for (int w = 0; w < 3; ++w) {
    const int c = (axis + w) % 3;
    const std::uint64_t a = ordered_bits(lo[c]), b = ordered_bits(hi[c]);
    if (a != b) return 64 * w + __builtin_clzll(a ^ b);
  }
  return kKeyBits;
}

// What a pass reads of a splitting node in a round, in one record: its histogram row (-1:
// not counted this round), the bin its rank fell in (after the reduction), whether that
// settled it, and where its digit lies in a member's key (words hw and lw of the key, the
// digit the top 8 bits of (key[hw] << off) | (key[lw] & lw_mask) >> (64 - off)).
struct RoundNode {
  std::int32_t row = -1, cut = 0;
  std::uint8_t hw = 0, lw = 0, off = 0, done = 0, width = kDigitBits;
  std::uint64_t lw_mask = 0;
};
RoundNode round_node(int axis, int p, int width) {
  RoundNode r;
  r.width = static_cast<std::uint8_t>(width);
  const int w = p >> 6;
  r.off = static_cast<std::uint8_t>(p & 63);
  r.hw = static_cast<std::uint8_t>((axis + w) % 3);
  r.lw = static_cast<std::uint8_t>((axis + w + 1) % 3);
  r.lw_mask = w < 2 ? ~std::uint64_t{0} : 0;   // past the key's end: 0
  return r;
}
// The 8 bits at bit p (0 the most significant) of a member's key under the node's axis
// (bits past the key's end read 0), branch-free from the node's record ((x >> 1) >> (63 -
// off) is x >> (64 - off), also for off = 0).
inline int round_digit(const std::uint64_t* key3, const RoundNode& r) {
  const std::uint64_t window = (key3[r.hw] << r.off) | (((key3[r.lw] & r.lw_mask) >> 1) >> (63 - r.off));
  return static_cast<int>(window >> (64 - r.width));
}

// The 192-bit word (words 0, 1, 2 of `t`, most significant first) with the 8 bits at bit p
// (p < 192) set to `value`, the inverse of round_digit on a key already rotated to its axis
// (bits past the end dropped: every member reads 0 there, so the cut has 0 there too).
void put_digit(std::uint64_t* t, int p, int width, int value) {
  const int w = p >> 6, off = p & 63;
  const auto v = static_cast<std::uint64_t>(value);
  if (off + width <= 64) {
    t[w] |= v << (64 - width - off);
    return;
  }
  t[w] |= v >> (off + width - 64);
  if (w < 2) t[w + 1] |= v << (128 - width - off);
}

// Compares a particle's key under `axis` with the 192-bit threshold t: -1, 0 or 1.
inline int compare_key(const std::uint64_t* key3, int axis, const std::uint64_t* t) {
  for (int w = 0; w < 3; ++w) {
    const std::uint64_t k = key3[(axis + w) % 3];
    if (k != t[w]) return k < t[w] ? -1 : 1;
  }
  return 0;
}

// Per-particle passes run over fixed blocks of their index lists, one block per task; the
// lists they make are concatenated in block order and what they count or bound are integer
// sums and minima: the serial pass's result for any thread count.
constexpr std::size_t kBlock = std::size_t{1} << 15;

std::size_t blocks_of(std::size_t n) { return (n + kBlock - 1) / kBlock; }

// parts[b] (one per block) concatenated into out, in order, in parallel.
void concatenate(const std::vector<std::vector<std::uint32_t>>& parts, std::size_t n_parts,
                 std::vector<std::uint32_t>& out) {
  std::vector<std::size_t> at(n_parts + 1, 0);
  for (std::size_t b = 0; b < n_parts; ++b) at[b + 1] = at[b] + parts[b].size();
  out.resize(at[n_parts]);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t b = 0; b < static_cast<std::ptrdiff_t>(n_parts); ++b)
    std::copy(parts[static_cast<std::size_t>(b)].begin(), parts[static_cast<std::size_t>(b)].end(),
              out.begin() + static_cast<std::ptrdiff_t>(at[static_cast<std::size_t>(b)]));
}

// Per-thread scratch arrays of one size, summed or min-combined element-wise afterwards
// (exact in any order). team: the threads that ran (a smaller team leaves the rest unused).
template <typename T>
struct PerThread {
  std::vector<std::vector<T>> data;
  int team = 1;
  PerThread() : data(static_cast<std::size_t>(std::max(1, omp_get_max_threads()))) {}
};

}  // namespace

// One level at a time: the nodes' boxes (one min reduction), then the rank-count/2 key of
// every splitting node by radix selection (rounds of histogram reductions over the members
// still matching the digits found), which gives each node a 192-bit threshold t: members
// below go left, above right, equal ones (all at one position) by the tie rule. A last pass
// over the members gives each its child, the children's boxes and the next level's members.
// Three passes over the rank's members a level (histogram, filter, children), each over
// fixed blocks in parallel.
GlobalTopTree GlobalTopTree::build(const std::vector<Vec3d>& positions, int max_leaf, int depth, const Comm& comm) {
  if (max_leaf < 1) fail("global top tree: max_leaf = {} must be >= 1", max_leaf);
  if (depth < 0) fail("global top tree: depth = {} must be >= 0", depth);
  GlobalTopTree tree;
  const std::size_t n = positions.size();
  tree.n_total_ = comm.sum(static_cast<std::int64_t>(n));
  if (tree.n_total_ == 0) fail("global top tree: no particles on any of the {} ranks", comm.size());
  if (tree.n_total_ > OrbTree::kMaxParticles)
    fail("global top tree: {} particles, more than the ORB tree's 32-bit indices hold ({})", tree.n_total_,
         OrbTree::kMaxParticles);

  std::vector<std::uint64_t> keys(3 * n);
  tree.particle_node_.assign(n, -1);
  std::vector<std::int32_t> slot(n, 0);   // a member's node: its index among its level's splitting nodes
  std::vector<std::uint8_t> tie_side(n, 0);   // written for the tied members only
  GlobalTopNode root;
  root.count = static_cast<std::uint32_t>(tree.n_total_);
  root.split = depth > 0 && root.count > static_cast<std::uint32_t>(max_leaf);
  tree.nodes_.push_back(root);
  std::size_t level_begin = 0;
  // members: this rank's particles of the level's splitting nodes, ascending; cand: those the
  // radix selection has not decided yet.
  std::vector<std::uint32_t> members, cand;
  // Per block of a pass: the next level's members it found (parts) and the undecided
  // candidates of the first round (left_parts).
  std::vector<std::vector<std::uint32_t>> parts, left_parts;
  std::size_t next_parts_used = 0;
  std::vector<std::uint64_t> hist;
  PerThread<std::uint32_t> local_hist;
  PerThread<double> local_box;
  // This rank's part of each node's box at the current level: lo and -hi (so that one min
  // reduction, exact in any order, gives both). The pass that assigns the children fills
  // the next level's.
  std::vector<double> box(6, HUGE_VAL);
  const auto add = [](double* b, const Vec3d& x) {
    for (int d = 0; d < 3; ++d) b[d] = std::min(b[d], x[d]), b[3 + d] = std::min(b[3 + d], -x[d]);
  };
  // Combines the per-thread boxes (local_box, `size` doubles each) into box.
  const auto combine_boxes = [&](std::size_t size) {
    box.assign(size, HUGE_VAL);
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t k = 0; k < static_cast<std::ptrdiff_t>(size); ++k)
      for (int t = 0; t < local_box.team; ++t)
        box[static_cast<std::size_t>(k)] =
            std::min(box[static_cast<std::size_t>(k)], local_box.data[static_cast<std::size_t>(t)][static_cast<std::size_t>(k)]);
  };
  {
    const std::size_t nb = blocks_of(n);
#pragma omp parallel
    {
#pragma omp single
      local_box.team = omp_get_num_threads();
      std::vector<double>& b = local_box.data[static_cast<std::size_t>(omp_get_thread_num())];
      b.assign(6, HUGE_VAL);
#pragma omp for schedule(static)
      for (std::ptrdiff_t blk = 0; blk < static_cast<std::ptrdiff_t>(nb); ++blk) {
        const std::size_t end = std::min(n, (static_cast<std::size_t>(blk) + 1) * kBlock);
        for (std::size_t i = static_cast<std::size_t>(blk) * kBlock; i < end; ++i) {
          for (int d = 0; d < 3; ++d) keys[3 * i + static_cast<std::size_t>(d)] = ordered_bits(positions[i][d]);
          add(b.data(), positions[i]);
        }
      }
    }
    combine_boxes(6);
  }
  if (root.split) {
    members.resize(n);
    for (std::size_t i = 0; i < n; ++i) members[i] = static_cast<std::uint32_t>(i);
  } else {
    std::fill(tree.particle_node_.begin(), tree.particle_node_.end(), 0);
  }

  for (int level = 0;; ++level) {
    const std::size_t m = tree.nodes_.size() - level_begin;
    GlobalTopNode* nodes = tree.nodes_.data() + level_begin;
    comm.reduce(box, Comm::Op::min);
    std::vector<std::size_t> splitting;   // level positions of the nodes that split
    for (std::size_t j = 0; j < m; ++j) {
      GlobalTopNode& node = nodes[j];
      for (int d = 0; d < 3; ++d) {
        node.lo[d] = box[6 * j + static_cast<std::size_t>(d)];
        node.hi[d] = -box[6 * j + 3 + static_cast<std::size_t>(d)];
      }
      node.axis = split_axis(node.lo, node.hi, level, depth);   // OrbTree::build's with top_levels = depth
      if (node.split) splitting.push_back(j);
    }
    if (splitting.empty()) break;

    // Radix selection of the rank-(count/2) key of every splitting node at once, each from
    // the first bit its members' keys do not all share (those bits: the threshold's start).
    const std::size_t s = splitting.size();
    std::vector<std::uint64_t> want(s);   // rank still sought among the node's candidates
    std::vector<std::uint64_t> cut_key(3 * s, 0);   // per node: the threshold, rotated to its axis
    std::vector<int> bit(s), axis(s), cut(s, 0), active(s, 1), done_now(s, 0), settled(s, 0);
    std::vector<int> compact(s, -1);      // histogram row of an active node this round
    std::vector<RoundNode> rn(s);         // the same per node, as the passes read it
    for (std::size_t q = 0; q < s; ++q) {
      const GlobalTopNode& node = nodes[splitting[q]];
      want[q] = node.count / 2;
      axis[q] = node.axis;
      bit[q] = common_prefix_bits(node.lo, node.hi, node.axis);
      active[q] = bit[q] < kKeyBits;
      for (int w = 0; w < 3; ++w) {
        const int shared = std::clamp(bit[q] - 64 * w, 0, 64);
        const std::uint64_t word = ordered_bits(node.lo[(node.axis + w) % 3]);
        cut_key[3 * q + static_cast<std::size_t>(w)] =
            shared == 0 ? 0 : (shared == 64 ? word : word & ~(~std::uint64_t{0} >> shared));
      }
    }

    // The children, in index order (a left child precedes its sibling, and children of
    // lower-index parents precede those of higher ones: preorder subtrees are disjoint);
    // child_row: a child's index among the next level's splitting nodes, -1 if it stops.
    // (`nodes` is not used past here: the vector grows.)
    const std::size_t next_begin = tree.nodes_.size();
    std::vector<std::int32_t> child_row(2 * s, -1), child_index(2 * s);
    std::int32_t next_splitting = 0;
    for (std::size_t q = 0; q < s; ++q) {
      const GlobalTopNode parent = tree.nodes_[level_begin + splitting[q]];
      const std::uint32_t n_left = parent.count / 2;
      GlobalTopNode a, b;
      a.parent = b.parent = parent.index;
      a.depth = b.depth = parent.depth + 1;
      a.index = parent.index + 1;
      b.index = parent.index + 2 * static_cast<std::int32_t>(OrbTree::subtree_leaves(n_left, max_leaf));
      a.first = parent.first;
      a.count = n_left;
      b.first = parent.first + n_left;
      b.count = parent.count - n_left;
      for (GlobalTopNode* c : {&a, &b}) {
        c->split = c->depth < depth && c->count > static_cast<std::uint32_t>(max_leaf);
        const std::size_t k = 2 * q + (c == &a ? 0 : 1);
        child_index[k] = c->index;
        if (c->split) child_row[k] = next_splitting++;
      }
      tree.nodes_.push_back(a);
      tree.nodes_.push_back(b);
    }
    // A member's side decided: its child's box (from its key: the exact coordinates, -0.0
    // read as +0.0) and node, or its place among the next level's members.
    const auto place = [&](std::uint32_t i, std::size_t child, std::vector<std::uint32_t>& next) {
      if (child_row[child] < 0) {
        tree.particle_node_[i] = child_index[child];
      } else {
        slot[i] = child_row[child];
        next.push_back(i);
      }
    };
    const auto assign = [&](std::uint32_t i, std::size_t q, int side, double* bx, std::vector<std::uint32_t>& next) {
      const std::size_t child = 2 * q + static_cast<std::size_t>(side);
      double* b = bx + 6 * child;
      for (int d = 0; d < 3; ++d) {
        const double x = from_ordered(keys[3 * i + static_cast<std::size_t>(d)]);
        b[d] = std::min(b[d], x);
        b[3 + d] = std::min(b[3 + d], -x);
      }
      place(i, child, next);
    };
    for (std::vector<double>& bx : local_box.data) bx.assign(12 * s, HUGE_VAL);

    // The first round reads the members themselves and assigns every member its round
    // decides (digit below or above the cut); the later rounds read the few left (first_left).
    const std::vector<std::uint32_t>* from = &members;
    std::vector<std::uint32_t> first_left;
    bool any_round = false;
    for (;;) {
      std::size_t n_active = 0;
      for (std::size_t q = 0; q < s; ++q) {
        compact[q] = active[q] ? static_cast<int>(n_active++) : -1;
        rn[q] = round_node(axis[q], std::min(bit[q], kKeyBits - 1), kDigitBits);
        rn[q].row = compact[q];
      }
      if (n_active == 0) break;
      const bool first = !any_round;
      any_round = true;
      const int width = digit_bits(n_active);
      const std::size_t node_bins = std::size_t{1} << width;
      for (std::size_t q = 0; q < s; ++q) rn[q].width = static_cast<std::uint8_t>(width);
      const std::size_t bins = n_active * node_bins;
      hist.assign(bins, 0);
      const std::vector<std::uint32_t>& list = *from;
      const std::size_t nb = blocks_of(list.size());
      // Counted by runs of one bin (members come in tree order, so neighbours mostly share
      // a node and a digit): one add per run, not a chain of increments of one counter.
      const auto count = [&](std::uint32_t* h, std::size_t begin, std::size_t end) {
        std::size_t last = 0;
        std::uint32_t run = 0;
        for (std::size_t k = begin; k < end; ++k) {
          const std::uint32_t i = list[k];
          const auto q = static_cast<std::size_t>(slot[i]);
          const RoundNode& r = rn[q];
          if (r.row < 0) continue;   // a node at one position: settled below
          const std::size_t at = static_cast<std::size_t>(r.row) * node_bins + static_cast<std::size_t>(round_digit(&keys[3 * i], r));
          if (at == last) {
            ++run;
          } else {
            if (run > 0) h[last] += run;
            last = at;
            run = 1;
          }
        }
        if (run > 0) h[last] += run;
      };
      if (nb <= 1) {
        std::vector<std::uint32_t>& h = local_hist.data[0];
        h.assign(bins, 0);
        count(h.data(), 0, list.size());
        for (std::size_t k = 0; k < bins; ++k) hist[k] = h[k];
      } else {
#pragma omp parallel
        {
#pragma omp single
          local_hist.team = omp_get_num_threads();
          std::vector<std::uint32_t>& h = local_hist.data[static_cast<std::size_t>(omp_get_thread_num())];
          h.assign(bins, 0);
#pragma omp for schedule(dynamic, 1)
          for (std::ptrdiff_t blk = 0; blk < static_cast<std::ptrdiff_t>(nb); ++blk)
            count(h.data(), static_cast<std::size_t>(blk) * kBlock,
                  std::min(list.size(), (static_cast<std::size_t>(blk) + 1) * kBlock));
        }
#pragma omp parallel for schedule(static)
        for (std::ptrdiff_t k = 0; k < static_cast<std::ptrdiff_t>(bins); ++k) {
          std::uint64_t sum = 0;
          for (int t = 0; t < local_hist.team; ++t) sum += local_hist.data[static_cast<std::size_t>(t)][static_cast<std::size_t>(k)];
          hist[static_cast<std::size_t>(k)] = sum;
        }
      }
      comm.reduce(hist, Comm::Op::sum);
      ++tree.rounds_;
      for (std::size_t q = 0; q < s; ++q) {
        done_now[q] = 0;
        if (!active[q]) continue;
        const std::uint64_t* h = hist.data() + static_cast<std::size_t>(compact[q]) * node_bins;
        std::uint64_t below = 0;
        int b = 0;
        while (below + h[b] <= want[q]) below += h[b++];   // b: the bin holding rank want[q]
        cut[q] = b;
        want[q] -= below;
        put_digit(&cut_key[3 * q], bit[q], width, b);
        if (want[q] == 0) done_now[q] = settled[q] = 1, active[q] = 0;   // rank falls on the bin's lower edge
        rn[q].cut = b;
        rn[q].done = static_cast<std::uint8_t>(done_now[q]);
      }
      // The candidates still undecided: in the bin holding the rank (or of a node at one
      // position). The first round also assigns the decided members their children (into
      // parts, block by block: the next level's members, ascending).
      if (first) {
        if (parts.size() < nb) parts.resize(nb);
        next_parts_used = nb;
      }
      if (left_parts.size() < nb) left_parts.resize(nb);
#pragma omp parallel
      {
#pragma omp single
        if (first) local_box.team = omp_get_num_threads();
        double* bx = local_box.data[static_cast<std::size_t>(omp_get_thread_num())].data();
#pragma omp for schedule(dynamic, 1)
        for (std::ptrdiff_t blk = 0; blk < static_cast<std::ptrdiff_t>(nb); ++blk) {
          std::vector<std::uint32_t>& out = left_parts[static_cast<std::size_t>(blk)];
          std::vector<std::uint32_t>* next = first ? &parts[static_cast<std::size_t>(blk)] : nullptr;
          out.clear();
          if (next) next->clear();
          const std::size_t end = std::min(list.size(), (static_cast<std::size_t>(blk) + 1) * kBlock);
          // The box of the child the last members went to, kept in registers while the
          // child stays the same (min is exact: the same box in any order).
          std::size_t child_at = SIZE_MAX;
          double run_box[6];
          const auto flush = [&] {
            if (child_at == SIZE_MAX) return;
            double* b = bx + 6 * child_at;
            for (int d = 0; d < 6; ++d) b[d] = std::min(b[d], run_box[d]);
          };
          for (std::size_t k = static_cast<std::size_t>(blk) * kBlock; k < end; ++k) {
            const std::uint32_t i = list[k];
            const auto q = static_cast<std::size_t>(slot[i]);
            const RoundNode& r = rn[q];
            if (r.row < 0) {
              out.push_back(i);
              continue;
            }
            const int dg = round_digit(&keys[3 * i], r);
            if (dg == r.cut && !r.done) {
              out.push_back(i);
            } else if (next) {
              const std::size_t child = 2 * q + (dg < r.cut ? 0 : 1);
              if (child != child_at) {
                flush();
                child_at = child;
                for (double& v : run_box) v = HUGE_VAL;
              }
              for (int d = 0; d < 3; ++d) {
                const double x = from_ordered(keys[3 * i + static_cast<std::size_t>(d)]);
                run_box[d] = std::min(run_box[d], x);
                run_box[3 + d] = std::min(run_box[3 + d], -x);
              }
              place(i, child, *next);
            }
          }
          flush();
        }
      }
      concatenate(left_parts, nb, cand);
      if (first) first_left = cand;
      from = &cand;
      for (std::size_t q = 0; q < s; ++q)
        if (active[q] && (bit[q] += width) >= kKeyBits) active[q] = 0;
    }
    // Candidates left: of nodes whose rank want[q] falls among members at one position (all
    // 192 bits equal to the threshold). The first want[q] of them in rank order go left (which
    // ones is the one thing not promised; the boxes are the same whichever). Rare: one scan
    // per node.
    if (!any_round) cand = members;   // every node at one position
    std::vector<std::uint64_t> tied(s, 0);
    for (std::uint32_t i : cand) ++tied[static_cast<std::size_t>(slot[i])];
    for (std::size_t q = 0; q < s; ++q) {
      if (settled[q]) continue;   // the same on every rank: decided by the reduced histograms
      std::uint64_t ordinal = comm.exclusive_sum(tied[q]);
      for (std::uint32_t i : cand)
        if (static_cast<std::size_t>(slot[i]) == q) tie_side[i] = ordinal++ < want[q] ? 0 : 1;
    }
    // The members the first round left (all of them if no round ran): below the threshold
    // left, above right, equal: right if the rank fell on a bin's edge, else the tie rule.
    // Many at the top levels (the first digit there is mostly the exponent), so over blocks
    // in parallel too. Then the next level's members: both ascending lists merged.
    const std::vector<std::uint32_t>& late = any_round ? first_left : members;
    if (!any_round) next_parts_used = 0;
    const std::size_t n_late_blocks = blocks_of(late.size());
    if (left_parts.size() < n_late_blocks) left_parts.resize(n_late_blocks);
    int late_team = 1;
#pragma omp parallel
    {
#pragma omp single
      late_team = omp_get_num_threads();
      double* bx = local_box.data[static_cast<std::size_t>(omp_get_thread_num())].data();
#pragma omp for schedule(dynamic, 1)
      for (std::ptrdiff_t blk = 0; blk < static_cast<std::ptrdiff_t>(n_late_blocks); ++blk) {
        std::vector<std::uint32_t>& next = left_parts[static_cast<std::size_t>(blk)];
        next.clear();
        const std::size_t end = std::min(late.size(), (static_cast<std::size_t>(blk) + 1) * kBlock);
        for (std::size_t k = static_cast<std::size_t>(blk) * kBlock; k < end; ++k) {
          const std::uint32_t i = late[k];
          const auto q = static_cast<std::size_t>(slot[i]);
          const int c = compare_key(&keys[3 * i], axis[q], &cut_key[3 * q]);
          assign(i, q, c < 0 ? 0 : (c > 0 || settled[q] ? 1 : tie_side[i]), bx, next);
        }
      }
    }
    // Every thread's boxes were reset at the level's start: combine all that may hold some.
    local_box.team = std::max(any_round ? local_box.team : 1, late_team);
    std::vector<std::uint32_t> late_next;
    concatenate(left_parts, n_late_blocks, late_next);
    combine_boxes(12 * s);
    concatenate(parts, next_parts_used, cand);
    members.resize(cand.size() + late_next.size());
    std::merge(cand.begin(), cand.end(), late_next.begin(), late_next.end(), members.begin());
    level_begin = next_begin;
  }
  return tree;
}

}  // namespace orbis
