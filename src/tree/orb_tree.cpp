#include "tree/orb_tree.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>

#include <omp.h>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "tree/split_axis.hpp"

namespace orbis {
namespace {

// The sampled median split (median_split): a sorted sample brackets the rank-k item between
// two sample items with a margin of 4 sigma of the sample rank (sigma = sqrt(m)/2), so the
// middle class holds ~4/sqrt(m) of the items and misses rank k about once in 1e4 splits
// (then nth_element over the whole node). It pays only with several threads on one node:
// one thread, or a node below kSampledMin, uses nth_element (faster serially: measured
// 0.63 s vs 0.97 s for the whole 128^3 clustered tree).
constexpr std::size_t kMaxSample = 4096;
constexpr std::size_t kSampledMin = 4096;
// Items per block of the parallel passes (fixed, so block boundaries never depend on threads).
constexpr std::size_t kBlock = 8192;

// Total order on positions, starting with axis A: ties on one coordinate are broken by
// the others, so the median split never depends on the input order of the particles. The
// axis is a template argument (with_axis picks it) so the comparisons are plain loads;
// operator() branches (std::sort and nth_element use it), less() does not (the sampled
// split's classification, where half the comparisons would mispredict).
template <int D> double coord(const Vec3d& v) {
  if constexpr (D == 0) return v.x;
  else if constexpr (D == 1) return v.y;
  else return v.z;
}
template <int A>
struct PositionLess {
  static constexpr int B = (A + 1) % 3, C = (A + 2) % 3;
  template <typename Item> bool operator()(const Item& a, const Item& b) const {
    if (coord<A>(a.x) != coord<A>(b.x)) return coord<A>(a.x) < coord<A>(b.x);
    if (coord<B>(a.x) != coord<B>(b.x)) return coord<B>(a.x) < coord<B>(b.x);
    return coord<C>(a.x) < coord<C>(b.x);
  }
  template <typename Item> static int less(const Item& a, const Item& b) {
    const double a0 = coord<A>(a.x), b0 = coord<A>(b.x), a1 = coord<B>(a.x), b1 = coord<B>(b.x);
    return (a0 < b0) | ((a0 == b0) & ((a1 < b1) | ((a1 == b1) & (coord<C>(a.x) < coord<C>(b.x)))));
  }
};
template <typename F>
void with_axis(int axis, F&& f) {
  switch (axis) {
    case 0: f(PositionLess<0>{}); break;
    case 1: f(PositionLess<1>{}); break;
    default: f(PositionLess<2>{}); break;
  }
}

// Tight bounding box of [begin, begin + n); all threads when `parallel` (min/max are exact,
// so any combination order gives the same box).
template <typename Item>
void bounding_box(const Item* begin, std::size_t n, bool parallel, Vec3d& lo, Vec3d& hi) {
  auto scan = [begin](std::size_t a, std::size_t e, Vec3d& l, Vec3d& h) {
    for (std::size_t i = a; i < e; ++i) {
      const Vec3d& x = begin[i].x;
      l.x = std::min(l.x, x.x); l.y = std::min(l.y, x.y); l.z = std::min(l.z, x.z);
      h.x = std::max(h.x, x.x); h.y = std::max(h.y, x.y); h.z = std::max(h.z, x.z);
    }
  };
  lo = begin->x;
  hi = begin->x;
  if (!parallel) {   // no OpenMP construct at all: this runs once per node
    scan(0, n, lo, hi);
    return;
  }
#pragma omp parallel
  {
    Vec3d l = begin->x, h = begin->x;
    const auto t = static_cast<std::size_t>(omp_get_thread_num()), nt = static_cast<std::size_t>(omp_get_num_threads());
    scan(n * t / nt, n * (t + 1) / nt, l, h);
#pragma omp critical
    {
      lo.x = std::min(lo.x, l.x); lo.y = std::min(lo.y, l.y); lo.z = std::min(lo.z, l.z);
      hi.x = std::max(hi.x, h.x); hi.y = std::max(hi.y, h.y); hi.z = std::max(hi.z, h.z);
    }
  }
}

// The two sample items that bracket rank k of [src, src + n) (see median_split): classify()
// puts an item below them (0), between (1) or above (2), with no branch.
template <typename Item, typename Less>
struct SampledPivots {
  Item lo, hi;
  int use_lo, use_hi;   // 0 at the ends of the sample: that side has no bound
  int classify(const Item& it) const {
    return 1 - (use_lo & Less::less(it, lo)) + (use_hi & Less::less(hi, it));
  }
};
template <typename Item, typename Less>
SampledPivots<Item, Less> sample_pivots(const Item* src, std::size_t n, std::size_t k, Less order) {
  const std::size_t m = std::min(kMaxSample, n / 64);
  std::size_t band = 4;
  while (band * band < 4 * m) ++band;   // 2 sqrt(m) = 4 sigma
  std::vector<Item> sample(m);
  for (std::size_t i = 0; i < m; ++i) sample[i] = src[i * n / m];
  std::sort(sample.begin(), sample.end(), order);
  const std::size_t at = k * m / n;
  const int use_lo = at >= band, use_hi = at + band < m;
  return {sample[use_lo ? at - band : 0], sample[use_hi ? at + band : m - 1], use_lo, use_hi};
}

// cursor holds per block b the count of each class q at [3b + q]; turns it into each
// block's first slot per class (class-major, so the classes come out contiguous in block
// order) and returns the class totals.
std::array<std::size_t, 3> class_major_prefix(std::vector<std::size_t>& cursor) {
  const std::size_t n_blocks = cursor.size() / 3;
  std::array<std::size_t, 3> total{0, 0, 0};
  for (std::size_t b = 0; b < n_blocks; ++b)
    for (int q = 0; q < 3; ++q) total[q] += cursor[b * 3 + q];
  std::size_t run = 0;
  for (int q = 0; q < 3; ++q)
    for (std::size_t b = 0; b < n_blocks; ++b) {
      const std::size_t c = cursor[b * 3 + q];
      cursor[b * 3 + q] = run;
      run += c;
    }
  return total;
}

// Puts the k smallest items of [begin, begin + n) (total order on `axis`) first. Sampled
// three-way split (classify, scatter into tmp, copy back, nth_element inside the middle
// class), by all threads when `parallel`; tmp holds n items.
template <typename Item>
void median_split(Item* begin, std::size_t n, std::size_t k, int axis, Item* tmp, bool parallel) {
  with_axis(axis, [&](auto order) {
    if (!parallel || n < kSampledMin) {   // serially, introselect is faster (measured)
      std::nth_element(begin, begin + k, begin + n, order);
      return;
    }
    const auto piv = sample_pivots(begin, n, k, order);

    const auto n_blocks = static_cast<std::int64_t>((n + kBlock - 1) / kBlock);
    std::vector<std::size_t> cursor(static_cast<std::size_t>(n_blocks) * 3, 0);
#pragma omp parallel for schedule(static) if (parallel)
    for (std::int64_t b = 0; b < n_blocks; ++b) {
      std::size_t c[3] = {0, 0, 0};
      const std::size_t e = std::min(n, static_cast<std::size_t>(b + 1) * kBlock);
      const auto p = piv;   // a block-local copy: the stores below cannot alias it
      for (std::size_t i = static_cast<std::size_t>(b) * kBlock; i < e; ++i) ++c[p.classify(begin[i])];
      for (int q = 0; q < 3; ++q) cursor[static_cast<std::size_t>(b) * 3 + q] = c[q];
    }
    const auto total = class_major_prefix(cursor);
    // The sample missed, or bracketed everything (its lowest item the node's minimum and a
    // run of equal items up to the upper pivot: the middle class is the whole range again,
    // and recursing on it would repeat this forever): plain select.
    if (!(total[0] <= k && k < total[0] + total[1]) || total[1] == n) {
      std::nth_element(begin, begin + k, begin + n, order);
      return;
    }
#pragma omp parallel for schedule(static) if (parallel)
    for (std::int64_t b = 0; b < n_blocks; ++b) {
      std::size_t* c = cursor.data() + static_cast<std::size_t>(b) * 3;
      const std::size_t e = std::min(n, static_cast<std::size_t>(b + 1) * kBlock);
      const auto p = piv;
      for (std::size_t i = static_cast<std::size_t>(b) * kBlock; i < e; ++i) tmp[c[p.classify(begin[i])]++] = begin[i];
    }
#pragma omp parallel for schedule(static) if (parallel)
    for (std::int64_t b = 0; b < n_blocks; ++b) {
      const std::size_t a = static_cast<std::size_t>(b) * kBlock, e = std::min(n, a + kBlock);
      std::copy(tmp + a, tmp + e, begin + a);
    }
    // The middle class (~4/sqrt(m) of the node) by the same method, down to kSampledMin.
    median_split(begin + total[0], total[1], k - total[0], axis, tmp + total[0], parallel);
  });
}

}  // namespace

int top_levels_for(std::int64_t n_total, std::int64_t node_particles, int max_leaf) {
  if (node_particles < 1 || max_leaf < 1)
    fail("top_levels_for: node_particles = {} and max_leaf = {} must be >= 1", node_particles, max_leaf);
  // The smallest node of depth k holds floor(N / 2^k) (a node of n splits into n/2 and
  // n - n/2): depth d + 1 exists when that of depth d exceeds max_leaf.
  int d = 0;
  while (d < 30 && (n_total >> (d + 1)) >= node_particles && (n_total >> d) > max_leaf) ++d;
  return d;
}

// leaves(n) and leaves(n + 1) by one halving per level: a node of n splits into n/2 and
// n - n/2, so both counts only ever involve h = n/2 and h + 1.
std::pair<std::int64_t, std::int64_t> OrbTree::leaves_pair(std::int64_t n, int max_leaf) {
  if (n + 1 <= max_leaf) return {1, 1};
  if (n <= max_leaf) return {1, 2};   // n + 1 = max_leaf + 1 splits once
  const auto [a, b] = leaves_pair(n / 2, max_leaf);
  return n % 2 == 0 ? std::pair<std::int64_t, std::int64_t>{2 * a, a + b}
                    : std::pair<std::int64_t, std::int64_t>{a + b, 2 * b};
}
std::int64_t OrbTree::subtree_leaves(std::int64_t n, int max_leaf) { return leaves_pair(n, max_leaf).first; }
// Every internal node has two children: nodes = 2 leaves - 1.
std::int64_t OrbTree::subtree_nodes(std::int64_t n, int max_leaf) { return 2 * subtree_leaves(n, max_leaf) - 1; }

void OrbTree::shape_nodes(std::size_t n, int max_leaf, std::vector<ShapeNode>& nodes) {
  if (max_leaf < 1) fail("ORB tree: max_leaf = {} must be >= 1", max_leaf);
  if (n == 0) fail("ORB tree: no particles");
  if (n > static_cast<std::size_t>(kMaxParticles))
    fail("ORB tree: {} particles, more than its 32-bit indices hold ({})", n, kMaxParticles);
  nodes.resize(static_cast<std::size_t>(subtree_nodes(static_cast<std::int64_t>(n), max_leaf)));
  // The top levels here, one node at a time (a child's index and leaves before it follow from
  // its elder sibling's count), down to up to 2^kTopDepth subtrees, which the threads fill.
  constexpr int kTopDepth = 8;
  std::vector<SubtreeRoot> roots, stack{SubtreeRoot{0, -1, 0, 0, 0, static_cast<std::uint32_t>(n)}};
  while (!stack.empty()) {
    const SubtreeRoot r = stack.back();
    stack.pop_back();
    if (r.depth >= kTopDepth || r.count <= static_cast<std::uint32_t>(max_leaf)) {
      roots.push_back(r);
      continue;
    }
    const std::uint32_t n_left = r.count / 2;
    const auto right = r.index + 1 + static_cast<std::int32_t>(subtree_nodes(n_left, max_leaf));
    nodes[static_cast<std::size_t>(r.index)] = ShapeNode{r.first, r.count, r.index + 1, right, -1, r.depth, r.parent};
    stack.push_back(SubtreeRoot{right, r.index, r.depth + 1,
                                r.leaf_base + static_cast<std::int32_t>(subtree_leaves(n_left, max_leaf)),
                                r.first + n_left, r.count - n_left});
    stack.push_back(SubtreeRoot{r.index + 1, r.index, r.depth + 1, r.leaf_base, r.first, n_left});
  }
  const auto n_roots = static_cast<std::int64_t>(roots.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t q = 0; q < n_roots; ++q) fill_subtree(nodes.data(), roots[static_cast<std::size_t>(q)], max_leaf);
}

std::vector<TreeNode> OrbTree::shape(std::size_t n, int max_leaf) {
  std::vector<ShapeNode> nodes;
  shape_nodes(n, max_leaf, nodes);
  return tree_nodes(nodes);
}

std::vector<TreeNode> OrbTree::tree_nodes(const std::vector<ShapeNode>& shape) {
  std::vector<TreeNode> nodes(shape.size());
  const auto n_nodes = static_cast<std::int64_t>(shape.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n_nodes; ++i) {
    const ShapeNode& s = shape[static_cast<std::size_t>(i)];
    TreeNode& t = nodes[static_cast<std::size_t>(i)];
    t.first = s.first;
    t.count = s.count;
    t.left = s.left;
    t.right = s.right;
    t.leaf = s.leaf;
    t.depth = s.depth;
    t.parent = s.parent;
  }
  return nodes;
}

void OrbTree::fill_subtree(ShapeNode* nodes, const SubtreeRoot& root, int max_leaf) {
  // The nodes of a subtree of c particles: the nodes of one depth hold one of two counts
  // (a node of c splits into c/2 and c - c/2, so c and c + 1), one of each parity, so a slot
  // per depth and parity answers every lookup after the first.
  std::uint32_t known_count[32][2] = {};
  std::int32_t known_nodes[32][2] = {};
  const auto nodes_of = [&](std::uint32_t c, std::int32_t depth) {
    const auto d = static_cast<std::size_t>(depth & 31), parity = static_cast<std::size_t>(c & 1);
    if (known_count[d][parity] != c) {
      known_count[d][parity] = c;
      known_nodes[d][parity] = static_cast<std::int32_t>(subtree_nodes(c, max_leaf));
    }
    return known_nodes[d][parity];
  };
  const auto leaf_max = static_cast<std::uint32_t>(max_leaf);
  const std::int32_t end = root.index + nodes_of(root.count, 0);
  nodes[static_cast<std::size_t>(root.index)] = ShapeNode{root.first, root.count, -1, -1, -1, root.depth, root.parent};
  // Preorder: a node's children are its successor and the node after its left subtree, so
  // each node is written by its parent before the pass reaches it.
  std::int32_t next_leaf = root.leaf_base;
  for (std::int32_t i = root.index; i < end; ++i) {
    ShapeNode& node = nodes[static_cast<std::size_t>(i)];
    if (node.count <= leaf_max) {
      node.leaf = next_leaf++;   // leaves come in preorder = particle order
      continue;
    }
    const std::uint32_t n_left = node.count / 2;
    node.left = i + 1;
    node.right = i + 1 + nodes_of(n_left, node.depth - root.depth + 1);
    nodes[static_cast<std::size_t>(node.left)] = ShapeNode{node.first, n_left, -1, -1, -1, node.depth + 1, i};
    nodes[static_cast<std::size_t>(node.right)] =
        ShapeNode{node.first + n_left, node.count - n_left, -1, -1, -1, node.depth + 1, i};
  }
}

OrbTree::AdoptArrays OrbTree::begin_adopt(std::size_t n, std::size_t n_nodes, int max_leaf) {
  if (n == 0 || n_nodes == 0) fail("ORB tree: adopt of {} particles in {} nodes", n, n_nodes);
  max_leaf_ = max_leaf;
  nodes_.resize(n_nodes);
  order_.resize(n);
  pos_.resize(n);
  return AdoptArrays{nodes_.data(), order_.data(), pos_.data()};
}

void OrbTree::finish_adopt() {
  if (nodes_.empty() || nodes_[0].count != order_.size())
    fail("ORB tree: adopted root holds {} particles, not {}", nodes_.empty() ? 0 : nodes_[0].count, order_.size());
  std::size_t n_leaves = 0;
  for (const TreeNode& node : nodes_) n_leaves += node.is_leaf();
  leaves_.resize(n_leaves);
  leaf_node_.resize(n_leaves);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const TreeNode& node = nodes_[i];
    if (!node.is_leaf()) continue;
    const auto l = static_cast<std::size_t>(node.leaf);
    if (node.leaf < 0 || l >= n_leaves) fail("ORB tree: adopt: node {} has leaf index {}", i, node.leaf);
    leaves_[l] = Leaf{node.first, node.count, node.box_centre()};
    leaf_node_[l] = static_cast<std::int32_t>(i);
  }
  derive_levels();
}

void OrbTree::derive_levels() {
  int max_depth = 0;
  for (const auto& node : nodes_) max_depth = std::max(max_depth, node.depth);
  levels_.assign(static_cast<std::size_t>(max_depth) + 1, {});
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    levels_[static_cast<std::size_t>(nodes_[i].depth)].push_back(static_cast<std::int32_t>(i));
  // refit()'s split: the first level of >= 64 nodes (or the last). The subtree roots are the
  // nodes at or below it whose parent is above it: that level's nodes in a built tree, and
  // also the subtrees hanging below empty levels in an assembled forest, whose depths jump.
  std::size_t split = 0;
  while (split + 1 < levels_.size() && levels_[split].size() < 64) ++split;
  const auto at_or_below = [&](std::int32_t i) {
    return static_cast<std::size_t>(nodes_[static_cast<std::size_t>(i)].depth) >= split;
  };
  refit_roots_.clear();
  refit_above_.clear();
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const auto index = static_cast<std::int32_t>(i);
    if (at_or_below(index) && (nodes_[i].parent < 0 || !at_or_below(nodes_[i].parent))) refit_roots_.push_back(index);
  }
  for (std::size_t lev = split; lev-- > 0;)
    refit_above_.insert(refit_above_.end(), levels_[lev].begin(), levels_[lev].end());
}

void OrbTree::build(const std::vector<Vec3d>& positions, int max_leaf, double particle_mass,
                    std::uint32_t parallel_min, int top_levels) {
  if (max_leaf < 1) fail("ORB tree: max_leaf = {} must be >= 1", max_leaf);
  if (top_levels < 0) fail("ORB tree: top_levels = {} must be >= 0", top_levels);
  if (positions.empty()) fail("ORB tree: no particles");
  if (positions.size() > static_cast<std::size_t>(kMaxParticles))
    fail("ORB tree: {} particles, more than its 32-bit indices hold ({})", positions.size(), kMaxParticles);
  max_leaf_ = max_leaf;
  top_levels_ = top_levels;
  particle_mass_ = particle_mass;
  const std::size_t n = positions.size();
  const auto ni = static_cast<std::int64_t>(n);
  Stopwatch watch;

  items_.resize(n);
  scratch_.resize(n);
  // Copy in, and the root's box in the same pass. With as many particles as last time the
  // items start in the last tree order: in a run they moved little since, so every split
  // finds its node nearly partitioned already (predictable branches, little data moved).
  // The tree is the same either way: it depends on the set of positions alone.
  const bool reuse = order_.size() == n;
  Vec3d root_lo = positions[0], root_hi = positions[0];
#pragma omp parallel
  {
    Vec3d l = positions[0], h = positions[0];
#pragma omp for schedule(static) nowait
    for (std::int64_t i = 0; i < ni; ++i) {
      const std::uint32_t from = reuse ? order_[static_cast<std::size_t>(i)] : static_cast<std::uint32_t>(i);
      const Vec3d& x = positions[from];
      items_[static_cast<std::size_t>(i)] = {x, from};
      l.x = std::min(l.x, x.x); l.y = std::min(l.y, x.y); l.z = std::min(l.z, x.z);
      h.x = std::max(h.x, x.x); h.y = std::max(h.y, x.y); h.z = std::max(h.z, x.z);
    }
#pragma omp critical
    {
      root_lo.x = std::min(root_lo.x, l.x); root_lo.y = std::min(root_lo.y, l.y); root_lo.z = std::min(root_lo.z, l.z);
      root_hi.x = std::max(root_hi.x, h.x); root_hi.y = std::max(root_hi.y, h.y); root_hi.z = std::max(root_hi.z, h.z);
    }
  }
  const std::int64_t n_nodes = subtree_nodes(static_cast<std::int64_t>(n), max_leaf_);
  const std::int64_t n_leaves = subtree_leaves(static_cast<std::int64_t>(n), max_leaf_);
  nodes_.assign(static_cast<std::size_t>(n_nodes), TreeNode{});
  leaves_.assign(static_cast<std::size_t>(n_leaves), Leaf{});
  leaf_node_.assign(static_cast<std::size_t>(n_leaves), -1);

  times_.fill = watch.seconds();
  watch.restart();
  // Top levels: while a level has fewer nodes than threads, each node is split by every
  // thread together, from one buffer into the other (items_ <-> scratch_: two passes over
  // the items per level, which also give the children's boxes); once a level has as many
  // nodes as threads, its nodes are split in place, one per thread; below parallel_min
  // particles, whole subtrees are built serially, one per thread. The node layout is fixed
  // by N alone and the splits by the total order, so this changes who computes what,
  // never the result (1 thread: plain serial recursion).
  const auto threads = static_cast<std::size_t>(std::max(1, omp_get_max_threads()));
  const std::uint32_t split_min =
      std::max<std::uint32_t>(parallel_min, static_cast<std::uint32_t>(max_leaf_) + 1);
  Pending root{0, -1, 0, static_cast<std::uint32_t>(n), 0, 0};
  root.lo = root_lo;
  root.hi = root_hi;
  root.has_box = true;
  std::vector<Pending> level{root}, next, splits, subtrees;
  std::vector<std::pair<std::vector<std::int32_t>, bool>> top;   // per level: nodes, data-parallel
  int cur = 0;   // the buffer holding the current level's items: 0 items_, 1 scratch_
  while (!level.empty()) {
    splits.clear();
    for (Pending p : level) {
      if (p.count < split_min) {
        p.buffer = cur;
        subtrees.push_back(p);
      } else {
        splits.push_back(p);
      }
    }
    if (splits.empty()) break;
    const bool data_parallel = threads > 1 && splits.size() < threads;
    next.assign(2 * splits.size(), Pending{});
    if (data_parallel) {
      Item* src = cur == 0 ? items_.data() : scratch_.data();
      Item* dst = cur == 0 ? scratch_.data() : items_.data();
      for (std::size_t q = 0; q < splits.size(); ++q) split_parallel(splits[q], src, dst, &next[2 * q]);
      cur = 1 - cur;
    } else {
      Item* base = cur == 0 ? items_.data() : scratch_.data();
#pragma omp parallel for schedule(dynamic, 1)
      for (std::int64_t q = 0; q < static_cast<std::int64_t>(splits.size()); ++q)
        split_node(splits[static_cast<std::size_t>(q)], base, &next[2 * static_cast<std::size_t>(q)]);
    }
    top.emplace_back(std::vector<std::int32_t>(), data_parallel);
    for (const Pending& p : splits) top.back().first.push_back(p.index);
    level.swap(next);
  }
  // Subtrees left behind in the other buffer (a level whose nodes did not all split) join
  // the rest; then items_ is the buffer that holds everything.
  for (const Pending& p : subtrees)
    if (p.buffer != cur) {
      const Item* from = (p.buffer == 0 ? items_.data() : scratch_.data()) + p.first;
      Item* to = (cur == 0 ? items_.data() : scratch_.data()) + p.first;
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < static_cast<std::int64_t>(p.count); ++i) to[i] = from[i];
    }
  if (cur == 1) items_.swap(scratch_);
  times_.top = watch.seconds();
  watch.restart();
  const auto n_sub = static_cast<std::int64_t>(subtrees.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t q = 0; q < n_sub; ++q) {
    const Pending& p = subtrees[static_cast<std::size_t>(q)];
    build_node(p.index, p.parent, p.first, p.count, p.depth, p.leaf_base);
  }
  times_.subtrees = watch.seconds();
  watch.restart();
  for (auto it = top.rbegin(); it != top.rend(); ++it) {   // deepest level first
    const std::vector<std::int32_t>& list = it->first;
    if (it->second) {
      for (std::int32_t index : list) finish_node(index, true);
    } else {
#pragma omp parallel for schedule(dynamic, 1)
      for (std::int64_t q = 0; q < static_cast<std::int64_t>(list.size()); ++q)
        finish_node(list[static_cast<std::size_t>(q)], false);
    }
  }

  times_.finish = watch.seconds();
  watch.restart();
  order_.resize(n);
  pos_.resize(n);
#pragma omp parallel for schedule(static)
  for (std::int64_t t = 0; t < ni; ++t) {
    order_[t] = items_[t].index;
    pos_[t] = items_[t].x;
  }
  derive_levels();
  times_.output = watch.seconds();
}

void OrbTree::refit(const std::vector<Vec3d>& positions) {
  const std::size_t n = pos_.size();
  if (positions.size() != n || nodes_.empty())
    fail("ORB tree: refit to {} positions of a tree of {} particles", positions.size(), n);
  const auto ni = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static)
  for (std::int64_t t = 0; t < ni; ++t) pos_[t] = positions[order_[t]];
  // The subtrees under the first level of at least 64 nodes, one per thread; the nodes
  // above them serially, deepest first (one parallel region: refits come at every sync
  // point of block steps, often with little else to do).
  const auto& roots = refit_roots_;
#pragma omp parallel for schedule(dynamic, 4)
  for (std::int64_t q = 0; q < static_cast<std::int64_t>(roots.size()); ++q)
    refit_subtree(roots[static_cast<std::size_t>(q)]);
  for (std::int32_t index : refit_above_) refit_node(index);
}

void OrbTree::refit_subtree(std::int32_t index) {
  const TreeNode& node = nodes_[static_cast<std::size_t>(index)];
  if (!node.is_leaf()) {
    refit_subtree(node.left);
    refit_subtree(node.right);
  }
  refit_node(index);
}

// One node from its members' positions (pos_) and, if internal, its refitted children: the
// box as build() finds it (min and max are exact, so the children's union is the members'
// box), a leaf's centre summed in tree order and an internal node's from its children, the
// exact radius.
void OrbTree::refit_node(std::int32_t index) {
  TreeNode& node = nodes_[static_cast<std::size_t>(index)];
  const Vec3d* begin = pos_.data() + node.first;
  const Vec3d* end = begin + node.count;
  if (node.is_leaf()) {
    node.lo = node.hi = *begin;
    Vec3d sum{0, 0, 0};
    for (const Vec3d* x = begin; x != end; ++x) {
      for (int d = 0; d < 3; ++d) node.lo[d] = std::min(node.lo[d], (*x)[d]), node.hi[d] = std::max(node.hi[d], (*x)[d]);
      sum += *x;
    }
    node.centre = sum * (1.0 / node.count);
    leaves_[static_cast<std::size_t>(node.leaf)].centre = node.box_centre();
  } else {
    const TreeNode& a = nodes_[static_cast<std::size_t>(node.left)];
    const TreeNode& b = nodes_[static_cast<std::size_t>(node.right)];
    for (int d = 0; d < 3; ++d) node.lo[d] = std::min(a.lo[d], b.lo[d]), node.hi[d] = std::max(a.hi[d], b.hi[d]);
    node.centre = (static_cast<double>(a.count) * a.centre + static_cast<double>(b.count) * b.centre) *
                  (1.0 / node.count);
    // The exact radius from the refitted children: only the members that might lie
    // farther than the farthest found so far are looked at (farthest2).
    const double reach_a = std::sqrt(norm2(a.centre - node.centre)) + a.radius;
    const double reach_b = std::sqrt(norm2(b.centre - node.centre)) + b.radius;
    const bool a_first = reach_a >= reach_b;
    double r2 = farthest2(a_first ? node.left : node.right, node.centre, 0.0);
    r2 = farthest2(a_first ? node.right : node.left, node.centre, r2);
    node.radius = std::sqrt(r2);
    return;
  }
  double r2 = 0;
  for (const Vec3d* x = begin; x != end; ++x) r2 = std::max(r2, norm2(*x - node.centre));
  node.radius = std::sqrt(r2);
}

// max(r2, the largest norm2(x - c) over the members of node `index`), each member's norm2
// computed as the loop over all members computes it, so the result is that loop's bit for
// bit: a subtree is skipped only when its ball (centre and radius, already refitted) cannot
// reach beyond sqrt(r2), with a margin far above the rounding of the bound.
double OrbTree::farthest2(std::int32_t index, const Vec3d& c, double r2) const {
  const TreeNode& node = nodes_[static_cast<std::size_t>(index)];
  const double reach = std::sqrt(norm2(node.centre - c)) + node.radius;
  if (reach * reach * (1 + 1e-9) < r2) return r2;
  if (node.is_leaf()) {
    const Vec3d* begin = pos_.data() + node.first;
    for (const Vec3d* x = begin; x != begin + node.count; ++x) r2 = std::max(r2, norm2(*x - c));
    return r2;
  }
  const TreeNode& a = nodes_[static_cast<std::size_t>(node.left)];
  const TreeNode& b = nodes_[static_cast<std::size_t>(node.right)];
  const bool a_first = std::sqrt(norm2(a.centre - c)) + a.radius >= std::sqrt(norm2(b.centre - c)) + b.radius;
  r2 = farthest2(a_first ? node.left : node.right, c, r2);
  return farthest2(a_first ? node.right : node.left, c, r2);
}

// A node of a top level split by one thread, in place in `base`: box, nth_element, children.
void OrbTree::split_node(const Pending& p, Item* base, Pending* children) {
  Item* begin = base + p.first;
  const TreeNode& node = open_node(p, begin, false);
  const std::uint32_t n_left = p.count / 2;
  const int axis = split_axis(node.lo, node.hi, p.depth, top_levels_);
  with_axis(axis, [&](auto less) { std::nth_element(begin, begin + n_left, begin + p.count, less); });
  set_children(p, n_left, children);
}

// A pending node's record: its range, parent, depth and box (the parent's split found the
// box, or a pass over its items does, by all threads when `parallel`).
TreeNode& OrbTree::open_node(const Pending& p, const Item* items, bool parallel) {
  TreeNode& node = nodes_[static_cast<std::size_t>(p.index)];
  node.first = p.first;
  node.count = p.count;
  node.parent = p.parent;
  node.depth = p.depth;
  if (p.has_box) {
    node.lo = p.lo;
    node.hi = p.hi;
  } else {
    bounding_box(items, p.count, parallel, node.lo, node.hi);
  }
  return node;
}

void OrbTree::set_children(const Pending& p, std::uint32_t n_left, Pending* children) {
  TreeNode& node = nodes_[static_cast<std::size_t>(p.index)];
  node.left = p.index + 1;
  node.right = p.index + 1 + static_cast<std::int32_t>(subtree_nodes(n_left, max_leaf_));
  children[0] = Pending{node.left, p.index, p.first, n_left, p.depth + 1, p.leaf_base};
  children[1] = Pending{node.right, p.index, p.first + n_left, p.count - n_left, p.depth + 1,
                        p.leaf_base + static_cast<std::int32_t>(subtree_leaves(n_left, max_leaf_))};
}

// A node split by all threads from src into dst (same positions in both). A sorted sample
// brackets the median between two sample items (as median_split); pass 1 classifies every
// item (below, between, above them) into codes_; pass 2 moves each item to its class's
// place in dst and keeps each class's box. The middle class is then split in place
// (median_split, src as its scratch), and the children's boxes are the class boxes joined
// with the boxes of the middle's two parts: exact, with no pass over the children.
void OrbTree::split_parallel(const Pending& p, Item* src_base, Item* dst_base, Pending* children) {
  Item* src = src_base + p.first;
  Item* dst = dst_base + p.first;
  const std::size_t n = p.count, k = n / 2;
  const TreeNode& node = open_node(p, src, true);
  const int axis = split_axis(node.lo, node.hi, p.depth, top_levels_);
  struct Box {
    Vec3d lo{HUGE_VAL, HUGE_VAL, HUGE_VAL}, hi{-HUGE_VAL, -HUGE_VAL, -HUGE_VAL};
    void add(const Vec3d& x) {
      lo.x = std::min(lo.x, x.x); lo.y = std::min(lo.y, x.y); lo.z = std::min(lo.z, x.z);
      hi.x = std::max(hi.x, x.x); hi.y = std::max(hi.y, x.y); hi.z = std::max(hi.z, x.z);
    }
    void add(const Box& b) {   // an empty b (lo > hi) changes nothing
      lo.x = std::min(lo.x, b.lo.x); lo.y = std::min(lo.y, b.lo.y); lo.z = std::min(lo.z, b.lo.z);
      hi.x = std::max(hi.x, b.hi.x); hi.y = std::max(hi.y, b.hi.y); hi.z = std::max(hi.z, b.hi.z);
    }
  };
  auto box_of = [&](const Item* b, std::size_t m) {
    Box out;
    if (m > 0) bounding_box(b, m, true, out.lo, out.hi);
    return out;
  };
  auto plain = [&](auto order) {   // small node, or the sample missed: copy and select
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(n); ++i) dst[i] = src[i];
    std::nth_element(dst, dst + k, dst + n, order);
  };
  Box left, right;
  with_axis(axis, [&](auto order) {
    if (n < kSampledMin) {
      plain(order);
      left = box_of(dst, k);
      right = box_of(dst + k, n - k);
      return;
    }
    const auto piv = sample_pivots(src, n, k, order);

    codes_.resize(std::max(codes_.size(), n));
    unsigned char* code = codes_.data();
    const auto n_blocks = static_cast<std::int64_t>((n + kBlock - 1) / kBlock);
    std::vector<std::size_t> cursor(static_cast<std::size_t>(n_blocks) * 3, 0);
#pragma omp parallel for schedule(static)
    for (std::int64_t b = 0; b < n_blocks; ++b) {
      std::size_t c[3] = {0, 0, 0};
      const std::size_t e = std::min(n, static_cast<std::size_t>(b + 1) * kBlock);
      const auto p = piv;   // a block-local copy: the byte stores to code cannot alias it
      for (std::size_t i = static_cast<std::size_t>(b) * kBlock; i < e; ++i) {
        const int q = p.classify(src[i]);
        code[i] = static_cast<unsigned char>(q);
        ++c[q];
      }
      for (int q = 0; q < 3; ++q) cursor[static_cast<std::size_t>(b) * 3 + q] = c[q];
    }
    const auto total = class_major_prefix(cursor);
    if (!(total[0] <= k && k < total[0] + total[1])) {
      plain(order);
      left = box_of(dst, k);
      right = box_of(dst + k, n - k);
      return;
    }
    std::vector<Box> class_box(static_cast<std::size_t>(n_blocks) * 3);
#pragma omp parallel for schedule(static)
    for (std::int64_t b = 0; b < n_blocks; ++b) {
      std::size_t* c = cursor.data() + static_cast<std::size_t>(b) * 3;
      Box* bx = class_box.data() + static_cast<std::size_t>(b) * 3;
      const std::size_t e = std::min(n, static_cast<std::size_t>(b + 1) * kBlock);
      for (std::size_t i = static_cast<std::size_t>(b) * kBlock; i < e; ++i) {
        const int q = code[i];
        dst[c[q]++] = src[i];
        bx[q].add(src[i].x);
      }
    }
    Box below, above;
    for (std::int64_t b = 0; b < n_blocks; ++b) {
      below.add(class_box[static_cast<std::size_t>(b) * 3]);
      above.add(class_box[static_cast<std::size_t>(b) * 3 + 2]);
    }
    // The middle class, in place in dst, with the same range of src as its scratch.
    median_split(dst + total[0], total[1], k - total[0], axis, src + total[0], true);
    left = box_of(dst + total[0], k - total[0]);
    right = box_of(dst + k, total[0] + total[1] - k);
    if (total[0] > 0) left.add(below);
    if (total[2] > 0) right.add(above);
  });
  set_children(p, static_cast<std::uint32_t>(k), children);
  children[0].lo = left.lo;
  children[0].hi = left.hi;
  children[1].lo = right.lo;
  children[1].hi = right.hi;
  children[0].has_box = children[1].has_box = true;
}

// Centre of mass from the children and the exact radius (a max over the members, by all
// threads when `parallel`: max is exact, so either way gives the same bits).
void OrbTree::finish_node(std::int32_t index, bool parallel) {
  TreeNode& done = nodes_[static_cast<std::size_t>(index)];
  const TreeNode& a = nodes_[static_cast<std::size_t>(done.left)];
  const TreeNode& b = nodes_[static_cast<std::size_t>(done.right)];
  done.centre = (static_cast<double>(a.count) * a.centre + static_cast<double>(b.count) * b.centre) *
                (1.0 / done.count);
  const Item* begin = items_.data() + done.first;
  const Vec3d c = done.centre;
  const auto count = static_cast<std::int64_t>(done.count);
  double r2 = 0;
#pragma omp parallel for schedule(static) reduction(max : r2) if (parallel)
  for (std::int64_t i = 0; i < count; ++i) r2 = std::max(r2, norm2(begin[i].x - c));
  done.radius = std::sqrt(r2);
  done.mass = done.count * particle_mass_;
}

// A whole subtree by one thread (recursive); scratch_ over the same range is its buffer.
void OrbTree::build_node(std::int32_t index, std::int32_t parent, std::uint32_t first,
                         std::uint32_t count, std::int32_t depth, std::int32_t leaf_base) {
  TreeNode& node = nodes_[static_cast<std::size_t>(index)];
  node.first = first;
  node.count = count;
  node.parent = parent;
  node.depth = depth;
  Item* begin = items_.data() + first;
  Item* end = begin + count;
  bounding_box(begin, count, false, node.lo, node.hi);
  const int axis = split_axis(node.lo, node.hi, depth, top_levels_);

  if (count <= static_cast<std::uint32_t>(max_leaf_)) {
    // Sorting the leaf makes the order inside it (hence P2P summation order) input-independent.
    with_axis(axis, [&](auto less) { std::sort(begin, end, less); });
    node.leaf = leaf_base;
    leaves_[static_cast<std::size_t>(leaf_base)] = Leaf{first, count, node.box_centre()};
    leaf_node_[static_cast<std::size_t>(leaf_base)] = index;
  } else {
    const std::uint32_t n_left = count / 2;
    median_split(begin, count, n_left, axis, scratch_.data() + first, false);
    node.left = index + 1;
    node.right = index + 1 + static_cast<std::int32_t>(subtree_nodes(n_left, max_leaf_));
    const std::int32_t right_leaf_base = leaf_base + static_cast<std::int32_t>(subtree_leaves(n_left, max_leaf_));
    build_node(node.left, index, first, n_left, depth + 1, leaf_base);
    build_node(node.right, index, first + n_left, count - n_left, depth + 1, right_leaf_base);
  }

  // Centre of mass (equal masses: the mean position, summed in tree order) and the exact
  // radius about it. Internal nodes loop over their members again: O(N log N) in all, and
  // a tight radius lets the opening criterion accept more pairs than a bound would.
  TreeNode& done = nodes_[static_cast<std::size_t>(index)];
  Vec3d sum{0, 0, 0};
  if (done.is_leaf()) {
    for (const Item* it = begin; it != end; ++it) sum += it->x;
    done.centre = sum * (1.0 / count);
  } else {
    const TreeNode& a = nodes_[static_cast<std::size_t>(done.left)];
    const TreeNode& b = nodes_[static_cast<std::size_t>(done.right)];
    done.centre = (static_cast<double>(a.count) * a.centre + static_cast<double>(b.count) * b.centre) *
                  (1.0 / count);
  }
  double r2 = 0;
  for (const Item* it = begin; it != end; ++it) r2 = std::max(r2, norm2(it->x - done.centre));
  done.radius = std::sqrt(r2);
  done.mass = count * particle_mass_;
}

}  // namespace orbis
