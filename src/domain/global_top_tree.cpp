#include "domain/global_top_tree.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.hpp"
#include "domain/top_tree_host_passes.hpp"
#include "domain/top_tree_passes.hpp"
#include "tree/orb_tree.hpp"
#include "tree/split_axis.hpp"

namespace orbis {
namespace {

using top_tree::kDigitBits;
using top_tree::kKeyBits;
using top_tree::kMaxDigitBits;
using top_tree::ordered_bits;
using top_tree::RoundNode;

// A round's digit: 8 bits, wider while the round's histograms stay small (few nodes, the
// top levels, where the first bits after the box's common prefix are mostly the exponent
// and an 8-bit digit leaves about half the members undecided). Counts of 4 bytes (< 2^31
// particles): a round moves at most 1 MiB a rank through the allreduce (and down from the
// device). Narrower digits sized by the candidates left moved 8 times fewer bytes but took
// a third more rounds (~50 against 36 at 256^3 on 2 ranks), and on two H200s a round's
// latency (~0.9 ms) outweighs its bytes (~0.3 ms a MB).
constexpr std::size_t kMaxRoundBins = std::size_t{1} << 18;   // over all nodes of a round
int digit_bits(std::size_t n_active) {
  int bits = kDigitBits;
  while (bits < kMaxDigitBits && (n_active << (bits + 1)) <= kMaxRoundBins) ++bits;
  return bits;
}

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

// A node's round record (top_tree::RoundNode) for its digit at bit p of its key under `axis`.
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

// The 192-bit word (words 0, 1, 2 of `t`, most significant first) with the `width` bits at
// bit p (p < 192) set to `value`, the inverse of round_digit on a key already rotated to its
// axis (bits past the end dropped: every member reads 0 there, so the cut has 0 there too).
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

}  // namespace

GlobalTopTree GlobalTopTree::build(const std::vector<Vec3d>& positions, int max_leaf, int depth, const Comm& comm) {
  const std::unique_ptr<TopTreePasses> passes = host_top_tree_passes(positions);
  return build(*passes, positions.size(), max_leaf, depth, comm);
}

// One level at a time: the nodes' boxes (one min reduction), then the rank-count/2 key of
// every splitting node by radix selection (rounds of histogram reductions over the members
// still matching the digits found), which gives each node a 192-bit threshold t: members
// below go left, above right, equal ones (all at one position) by the tie rule. A last pass
// over the members gives each its child, the children's boxes and the next level's members.
// Every decision is taken here from what the passes return; the passes only read and move
// the members.
GlobalTopTree GlobalTopTree::build(TopTreePasses& passes, std::size_t n, int max_leaf, int depth, const Comm& comm) {
  if (max_leaf < 1) fail("global top tree: max_leaf = {} must be >= 1", max_leaf);
  if (depth < 0) fail("global top tree: depth = {} must be >= 0", depth);
  GlobalTopTree tree;
  tree.n_total_ = comm.sum(static_cast<std::int64_t>(n));
  if (tree.n_total_ == 0) fail("global top tree: no particles on any of the {} ranks", comm.size());
  if (tree.n_total_ > OrbTree::kMaxParticles)
    fail("global top tree: {} particles, more than the ORB tree's 32-bit indices hold ({})", tree.n_total_,
         OrbTree::kMaxParticles);

  GlobalTopNode root;
  root.count = static_cast<std::uint32_t>(tree.n_total_);
  root.split = depth > 0 && root.count > static_cast<std::uint32_t>(max_leaf);
  tree.nodes_.push_back(root);
  std::size_t level_begin = 0;
  // This rank's part of each node's box at the current level: lo and -hi (so that one min
  // reduction, exact in any order, gives both).
  std::vector<double> box(6, HUGE_VAL);
  passes.start(root.split, box.data());

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
    std::vector<int> bit(s), axis(s), active(s, 1), settled(s, 0);
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
    passes.begin_level(child_row, child_index);

    // The first round reads the members themselves and sends every member it decides (digit
    // below or above the cut) to its child; the later rounds read the few left.
    bool any_round = false;
    for (;;) {
      std::size_t n_active = 0;
      for (std::size_t q = 0; q < s; ++q) n_active += static_cast<std::size_t>(active[q]);
      if (n_active == 0) break;
      const int width = digit_bits(n_active);
      std::size_t bins = 0;   // the round's histograms: each active node's 2^width bins in turn
      for (std::size_t q = 0; q < s; ++q) {
        rn[q] = round_node(axis[q], std::min(bit[q], kKeyBits - 1), width);
        rn[q].first_bin = active[q] ? static_cast<std::int32_t>(bins) : -1;
        if (active[q]) bins += std::size_t{1} << width;
      }
      const bool first = !any_round;
      any_round = true;
      // Counts < 2^31 (OrbTree::kMaxParticles), also summed.
      std::uint32_t* const hist = passes.histogram(first, rn, bins);
      comm.reduce(hist, bins, Comm::Op::sum);
      ++tree.rounds_;
      for (std::size_t q = 0; q < s; ++q) {
        if (!active[q]) continue;
        const std::uint32_t* h = hist + rn[q].first_bin;
        std::uint64_t below = 0;
        int b = 0;
        while (below + h[b] <= want[q]) below += h[b++];   // b: the bin holding rank want[q]
        want[q] -= below;
        put_digit(&cut_key[3 * q], bit[q], width, b);
        const bool done = want[q] == 0;   // the rank falls on the bin's lower edge
        if (done) settled[q] = 1, active[q] = 0;
        rn[q].cut = b;
        rn[q].done = static_cast<std::uint8_t>(done);
      }
      passes.filter(first, rn);
      for (std::size_t q = 0; q < s; ++q)
        if (active[q] && (bit[q] += width) >= kKeyBits) active[q] = 0;
    }
    // Candidates left: of nodes whose rank want[q] falls among members at one position (all
    // 192 bits equal to the threshold). The first want[q] of them in rank order (by rank,
    // then ascending index on each) go left (which ones is the one thing not promised; the
    // boxes are the same whichever). Rare: one scan per node.
    std::vector<std::uint32_t> tied;
    std::vector<std::int32_t> tied_slot;
    passes.candidates(any_round, tied, tied_slot);
    std::vector<std::uint64_t> n_tied(s, 0);
    for (std::int32_t q : tied_slot) ++n_tied[static_cast<std::size_t>(q)];
    std::vector<std::uint8_t> tie_side(tied.size(), 0);
    for (std::size_t q = 0; q < s; ++q) {
      if (settled[q]) continue;   // the same on every rank: decided by the reduced histograms
      std::uint64_t ordinal = comm.exclusive_sum(n_tied[q]);
      for (std::size_t k = 0; k < tied.size(); ++k)
        if (static_cast<std::size_t>(tied_slot[k]) == q) tie_side[k] = ordinal++ < want[q] ? 0 : 1;
    }
    // The members the first round left (all of them if no round ran): below the threshold
    // left, above right, equal: right if the rank fell on a bin's edge, else the tie rule.
    passes.finish_level(any_round, axis, cut_key, settled, tied, tie_side, box);
    level_begin = next_begin;
  }
  tree.particle_node_ = passes.take_particle_node();
  return tree;
}

}  // namespace orbis
