#include "domain/global_top_tree.hpp"

#include <algorithm>
#include <cmath>
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

constexpr int kDigitBits = 8;
constexpr int kBins = 1 << kDigitBits;
constexpr int kKeyBits = 192;   // (A, A+1, A+2), 64 bits each

// The 8 bits at bit p (0 the most significant, p < 192) of the key of a particle under axis A
// (bits past the key's end read 0).
inline int digit(const std::uint64_t* key3, int axis, int p) {
  const int w = p >> 6, off = p & 63;
  const std::uint64_t high = key3[(axis + w) % 3];
  if (off <= 64 - kDigitBits) return static_cast<int>((high >> (64 - kDigitBits - off)) & (kBins - 1));
  const std::uint64_t low = w < 2 ? key3[(axis + w + 1) % 3] : 0;
  return static_cast<int>(((high << (off - (64 - kDigitBits))) | (low >> (128 - kDigitBits - off))) & (kBins - 1));
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

}  // namespace

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
  for (std::size_t i = 0; i < n; ++i)
    for (int d = 0; d < 3; ++d) keys[3 * i + static_cast<std::size_t>(d)] = ordered_bits(positions[i][d]);

  tree.particle_node_.assign(n, -1);
  std::vector<std::int32_t> slot(n, 0);   // the particle's node within the current level; -1: placed
  GlobalTopNode root;
  root.count = static_cast<std::uint32_t>(tree.n_total_);
  tree.nodes_.push_back(root);
  std::size_t level_begin = 0;
  std::vector<int> side(n, 0);            // selection: 0 left, 1 right
  std::vector<std::uint32_t> candidates;
  std::vector<std::uint64_t> hist;
  // This rank's part of each node's box at the current level: lo and -hi (so that one min
  // reduction, exact in any order, gives both). The pass that assigns the children fills
  // the next level's.
  std::vector<double> box(6, HUGE_VAL);
  auto add = [&](double* b, const Vec3d& x) {
    for (int d = 0; d < 3; ++d) b[d] = std::min(b[d], x[d]), b[3 + d] = std::min(b[3 + d], -x[d]);
  };
  for (std::size_t i = 0; i < n; ++i) add(box.data(), positions[i]);

  for (int level = 0;; ++level) {
    const std::size_t m = tree.nodes_.size() - level_begin;
    GlobalTopNode* nodes = tree.nodes_.data() + level_begin;
    comm.reduce(box, Comm::Op::min);
    std::vector<std::size_t> splitting;   // level positions of the nodes that split
    std::vector<int> row(m, -1);          // their index in `splitting`
    for (std::size_t j = 0; j < m; ++j) {
      GlobalTopNode& node = nodes[j];
      for (int d = 0; d < 3; ++d) {
        node.lo[d] = box[6 * j + static_cast<std::size_t>(d)];
        node.hi[d] = -box[6 * j + 3 + static_cast<std::size_t>(d)];
      }
      node.axis = split_axis(node.lo, node.hi, level, depth);   // OrbTree::build's with top_levels = depth
      node.split = level < depth && node.count > static_cast<std::uint32_t>(max_leaf);
      if (node.split) {
        row[j] = static_cast<int>(splitting.size());
        splitting.push_back(j);
      }
    }
    // Particles of the nodes that stop here are placed; the rest are the candidates.
    candidates.clear();
    for (std::size_t i = 0; i < n; ++i) {
      if (slot[i] < 0) continue;
      const auto j = static_cast<std::size_t>(slot[i]);
      if (!nodes[j].split) {
        tree.particle_node_[i] = nodes[j].index;
        slot[i] = -1;
      } else {
        slot[i] = row[j];   // from here on: the node's index among the splitting ones
        candidates.push_back(static_cast<std::uint32_t>(i));
      }
    }
    if (splitting.empty()) break;

    // Radix selection of the rank-(count/2) key of every splitting node at once, each from
    // the first bit its members' keys do not all share.
    const std::size_t s = splitting.size();
    std::vector<std::uint64_t> want(s);   // rank still sought among the node's candidates
    std::vector<int> bit(s), axis(s), cut(s, 0), active(s, 1), done_now(s, 0), settled(s, 0);
    std::vector<int> compact(s, -1);      // histogram row of an active node this round
    for (std::size_t q = 0; q < s; ++q) {
      const GlobalTopNode& node = nodes[splitting[q]];
      want[q] = node.count / 2;
      axis[q] = node.axis;
      bit[q] = common_prefix_bits(node.lo, node.hi, node.axis);
      active[q] = bit[q] < kKeyBits;
    }
    for (;;) {
      std::size_t n_active = 0;
      for (std::size_t q = 0; q < s; ++q) compact[q] = active[q] ? static_cast<int>(n_active++) : -1;
      if (n_active == 0) break;
      hist.assign(n_active * kBins, 0);
      for (std::uint32_t i : candidates) {
        const auto q = static_cast<std::size_t>(slot[i]);
        if (compact[q] < 0) continue;   // a node at one position: settled below
        ++hist[static_cast<std::size_t>(compact[q]) * kBins + static_cast<std::size_t>(digit(&keys[3 * i], axis[q], bit[q]))];
      }
      comm.reduce(hist, Comm::Op::sum);
      ++tree.rounds_;
      for (std::size_t q = 0; q < s; ++q) {
        done_now[q] = 0;
        if (!active[q]) continue;
        const std::uint64_t* h = hist.data() + static_cast<std::size_t>(compact[q]) * kBins;
        std::uint64_t below = 0;
        int b = 0;
        while (below + h[b] <= want[q]) below += h[b++];   // b: the bin holding rank want[q]
        cut[q] = b;
        want[q] -= below;
        if (want[q] == 0) done_now[q] = settled[q] = 1, active[q] = 0;   // rank falls on the bin's lower edge
      }
      std::size_t kept = 0;
      for (std::uint32_t i : candidates) {
        const auto q = static_cast<std::size_t>(slot[i]);
        if (compact[q] < 0) {
          candidates[kept++] = i;
          continue;
        }
        const int dg = digit(&keys[3 * i], axis[q], bit[q]);
        if (dg < cut[q]) side[i] = 0;
        else if (dg > cut[q] || done_now[q]) side[i] = 1;
        else candidates[kept++] = i;
      }
      candidates.resize(kept);
      for (std::size_t q = 0; q < s; ++q)
        if (active[q] && (bit[q] += kDigitBits) >= kKeyBits) active[q] = 0;
    }
    // Candidates left: of nodes whose rank want[q] falls among members at one position (all
    // 192 bits equal). The first want[q] of them in rank order go left (which ones is the
    // one thing not promised; the boxes are the same whichever). Rare: one scan per node.
    std::vector<std::uint64_t> tied(s, 0);
    for (std::uint32_t i : candidates) ++tied[static_cast<std::size_t>(slot[i])];
    for (std::size_t q = 0; q < s; ++q) {
      if (settled[q]) continue;   // the same on every rank: decided by the reduced histograms
      std::uint64_t ordinal = comm.exclusive_sum(tied[q]);
      for (std::uint32_t i : candidates)
        if (static_cast<std::size_t>(slot[i]) == q) side[i] = ordinal++ < want[q] ? 0 : 1;
    }

    // The children, in index order (a left child precedes its sibling, and children of
    // lower-index parents precede those of higher ones: preorder subtrees are disjoint).
    const std::size_t next_begin = tree.nodes_.size();
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
      tree.nodes_.push_back(a);
      tree.nodes_.push_back(b);
    }
    box.assign(12 * s, HUGE_VAL);
    for (std::size_t i = 0; i < n; ++i)
      if (slot[i] >= 0) {
        slot[i] = 2 * slot[i] + side[i];
        add(box.data() + 6 * static_cast<std::size_t>(slot[i]), positions[i]);
      }
    level_begin = next_begin;
  }
  return tree;
}

}  // namespace orbis
