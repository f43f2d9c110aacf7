// The ORB tree of the short-range FMM: recursive bisection of the longest axis of a node's
// tight bounding box at the median particle, until a node holds <= max_leaf particles
// (above the walk's top depth, the lowest axis within 2% of the longest: split_axis).
// Particles are reordered (order()) so that every node is one contiguous range.
//
// The shape depends only on N and max_leaf (a node of n particles has children of n/2 and
// n - n/2), so node and leaf indices are known before the particles are partitioned: the
// top levels are split by all threads per node (parallel bounding box, sampled median and
// three-way partition) or one node per thread, the subtrees below one per thread, with the
// same result as a serial build. Partitioning
// compares whole positions (split axis first, then the others), and leaves are sorted the
// same way, so the tree order is a function of the set of positions alone: a permuted input
// gives bitwise the same tree and the same forces per particle.
//
// Nodes are stored in depth-first preorder: node 0 is the root, a parent precedes its
// children, leaves appear in particle order. The tree knows no periodicity: positions are
// taken as given in [0, L) and nodes never wrap; the walk chooses periodic images.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "core/vec3.hpp"
#include "tree/leaf.hpp"
#include "tree/shape_node.hpp"

namespace orbis {

struct TreeNode {
  std::uint32_t first = 0;   // particles [first, first + count) in tree order
  std::uint32_t count = 0;
  std::int32_t left = -1;    // children (-1 for a leaf); left holds the lower half on `axis`
  std::int32_t right = -1;
  std::int32_t parent = -1;
  std::int32_t leaf = -1;    // index into OrbTree::leaves() for a leaf, else -1
  std::int32_t depth = 0;    // root: 0
  Vec3d lo, hi;              // tight bounding box of the members, Mpc/h
  Vec3d centre;              // expansion centre: the centre of mass, Mpc/h
  double radius = 0;         // max |x_j - centre| over members, Mpc/h
  double mass = 0;           // count * particle mass (mass units of the caller)

  bool is_leaf() const { return left < 0; }
  Vec3d box_centre() const { return 0.5 * (lo + hi); }
  Vec3d half_width() const { return 0.5 * (hi - lo); }
};

// The walk's top depth for N particles (WalkSettings::top_levels): the largest d with
// 2^d node_particles <= N whose depth-d nodes all exist in OrbTree::shape(N, max_leaf) (every
// node above depth d splits). A function of N alone, never of the rank count. 0 when N <
// 2 node_particles. node_particles >= 1, max_leaf >= 1.
int top_levels_for(std::int64_t n_total, std::int64_t node_particles, int max_leaf);

class OrbTree {
 public:
  // Builds the tree over `positions` (Mpc/h, any order). Reuses the buffers of a previous
  // build. max_leaf >= 1. Nodes of >= parallel_min particles are split by all threads
  // together (a tuning knob and a test hook: the tree is the same for any value).
  // top_levels >= 0: the walk's top depth d (WalkSettings::top_levels); nodes above it split
  // along split_axis' stable rule (tree/split_axis.hpp), the rest along the longest side, as
  // the device build and GlobalTopTree with the same d. 0: the longest side everywhere.
  void build(const std::vector<Vec3d>& positions, int max_leaf, double particle_mass = 1.0,
             std::uint32_t parallel_min = kParallelMin, int top_levels = 0);
  static constexpr std::uint32_t kParallelMin = 32768;
  // Particle indices and node ranges are 32-bit (node links signed): at most this many.
  static constexpr std::int64_t kMaxParticles = (std::int64_t{1} << 31) - 1;

  // Refits the last tree to new positions of the same particles (caller order, as given to
  // build): the same nodes, leaves and order, with every box, centre of mass, radius and
  // leaf centre recomputed from the members' new positions (the arithmetic of build(), so a
  // refit to unchanged positions gives back build()'s tree bit for bit). Between rebuilds in
  // block time steps: O(N) for the radii in practice (a branch and bound over the refitted
  // children, the same exact maximum) and no partitioning; the nodes still bound their members,
  // only less tightly than a new build's would as the particles move.
  void refit(const std::vector<Vec3d>& positions);

  // A tree made of given subtrees, with no partitioning: a rank's piece of the one global
  // tree (issue #17, docs/design.md "Ranks"). Group g = positions [offsets[g], offsets[g+1])
  // (offsets: 0 .. positions.size(), non-decreasing; empty groups are skipped), its
  // particles ALREADY in the order OrbTree::build of that group alone puts them
  // (subtree_order). Each group becomes the subtree shape(count, max_leaf) with its root at
  // depth top_depth (the global tree's depth-d node it is); over the groups, in their
  // order, an artificial binary top (halves by group count, left = n/2 groups) whose nodes
  // have depths < top_depth, so the walk's top rule (WalkSettings::top_levels = top_depth)
  // only splits them: at most 2^top_depth non-empty groups. The geometry is refit()'s
  // arithmetic, so each subtree's nodes (boxes, centres, radii, leaves) are bit for bit
  // those of the depth-top_depth subtree of a serial build() of all groups together.
  // order() is the identity (the caller's order is the tree order); refit() works as after
  // build(). Depths jump from the top to top_depth: levels() has empty levels between.
  void assemble_forest(const std::vector<Vec3d>& positions, const std::vector<std::uint32_t>& group_offsets,
                       int top_depth, int max_leaf, double particle_mass = 1.0);

  // The nodes assemble_forest makes for n particles in these groups (first, count, left,
  // right, parent, leaf, depth; no geometry), checking its input: the forest's shape, a
  // function of the group sizes alone, shared with the device forest (gpu/orb_tree_cuda.cuh),
  // which takes the compact records (the groups filled in parallel).
  // `nodes` is resized to the shape and every node written (its storage reused from build to
  // build: no first touch of tens of MB each time).
  static void forest_shape_nodes(std::size_t n, const std::vector<std::uint32_t>& group_offsets, int top_depth,
                                 int max_leaf, std::vector<ShapeNode>& nodes);
  static std::vector<TreeNode> forest_shape(std::size_t n, const std::vector<std::uint32_t>& group_offsets,
                                            int top_depth, int max_leaf);

  // The permutation that puts each group in its subtree order (for assemble_forest): the
  // result's [offsets[g], offsets[g+1]) holds group g's indices into `positions` in the
  // order OrbTree::build(group g alone, max_leaf).order() gives, a function of the group's
  // set of positions alone. Groups over OpenMP threads.
  static std::vector<std::uint32_t> subtree_order(const std::vector<Vec3d>& positions,
                                                  const std::vector<std::uint32_t>& group_offsets, int max_leaf);
  // The same for particles in any order with a group per particle (group_of[i] in
  // [0, n_groups)): the result lists group 0's particles in subtree order, then group 1's,
  // ...; group_offsets (n_groups + 1) is where each group begins.
  static std::vector<std::uint32_t> subtree_order_by_group(const std::vector<Vec3d>& positions,
                                                           const std::vector<std::int32_t>& group_of,
                                                           std::int32_t n_groups, int max_leaf,
                                                           std::vector<std::uint32_t>& group_offsets);

  // The nodes build() would make for n particles (first, count, left, right, parent, leaf,
  // depth; no geometry): the shape depends on n and max_leaf alone, so a device build can
  // know every node's range before it sees a position. The compact records (the device
  // tree's; the subtrees below the top levels filled in parallel) or whole nodes.
  static void shape_nodes(std::size_t n, int max_leaf, std::vector<ShapeNode>& nodes);   // as forest_shape_nodes
  static std::vector<TreeNode> shape(std::size_t n, int max_leaf);
  // The leaves of that shape (counted, not built).
  static std::int64_t subtree_leaves(std::int64_t n, int max_leaf);
  // Takes a tree built elsewhere (the device build) as if build() had made it, filled into
  // this tree's own arrays: begin_adopt sizes them (a no-op from the second step of a run
  // on, so no allocation or first touch of tens of MB per step) and returns them; the
  // caller writes the nodes with their geometry and mass, order()[t] and the positions in
  // tree order; finish_adopt checks them and derives leaves(), leaf_node() and levels(), so
  // multipoles and the walk run on the tree unchanged.
  struct AdoptArrays {
    TreeNode* nodes;
    std::uint32_t* order;
    Vec3d* positions;
  };
  AdoptArrays begin_adopt(std::size_t n, std::size_t n_nodes, int max_leaf);
  void finish_adopt();

  const std::vector<TreeNode>& nodes() const { return nodes_; }
  const std::vector<Leaf>& leaves() const { return leaves_; }
  // leaf_node()[l]: the node index of leaf l.
  const std::vector<std::int32_t>& leaf_node() const { return leaf_node_; }
  // order()[t]: the caller's index of the particle at tree position t.
  const std::vector<std::uint32_t>& order() const { return order_; }
  // Positions in tree order.
  const std::vector<Vec3d>& positions() const { return pos_; }
  // levels()[d]: the nodes of depth d, in increasing index order (for level-parallel passes).
  const std::vector<std::vector<std::int32_t>>& levels() const { return levels_; }
  int max_leaf() const { return max_leaf_; }
  // Where the last build's time went (seconds): copy in, top levels (split by all threads
  // per node or one node per thread), subtrees, the top levels' centres and radii, copy out.
  struct BuildTimes {
    double fill = 0, top = 0, subtrees = 0, finish = 0, output = 0;
  };
  const BuildTimes& build_times() const { return times_; }
  std::size_t size() const { return pos_.size(); }

 private:
  struct Item {
    Vec3d x;
    std::uint32_t index;
  };
  struct Pending {
    Pending() = default;
    Pending(std::int32_t i, std::int32_t par, std::uint32_t f, std::uint32_t c, std::int32_t d, std::int32_t lb)
        : index(i), parent(par), first(f), count(c), depth(d), leaf_base(lb) {}
    std::int32_t index = 0, parent = -1;
    std::uint32_t first = 0, count = 0;
    std::int32_t depth = 0, leaf_base = 0;
    Vec3d lo, hi;            // the node's box, when has_box (its parent's split found it)
    bool has_box = false;
    int buffer = 0;          // subtrees: 0 items_, 1 scratch_ holds its items
  };
  void split_node(const Pending& p, Item* base, Pending* children);
  void split_parallel(const Pending& p, Item* src, Item* dst, Pending* children);
  TreeNode& open_node(const Pending& p, const Item* items, bool parallel);
  void set_children(const Pending& p, std::uint32_t n_left, Pending* children);
  void finish_node(std::int32_t index, bool parallel);
  static std::pair<std::int64_t, std::int64_t> leaves_pair(std::int64_t n, int max_leaf);
  static std::int64_t subtree_nodes(std::int64_t n, int max_leaf);
  // A subtree of the shape: its root's index, parent, depth, particles and the leaves before
  // it (preorder), all in the numbers of the whole tree.
  struct SubtreeRoot {
    std::int32_t index = 0, parent = -1, depth = 0, leaf_base = 0;
    std::uint32_t first = 0, count = 0;
  };
  // shape(root.count, max_leaf) written into nodes[root.index, root.index +
  // subtree_nodes(root.count)) with the whole tree's numbers: one pass in preorder, each node
  // from its parent (the range need not be initialised). Subtrees are filled in parallel.
  static void fill_subtree(ShapeNode* nodes, const SubtreeRoot& root, int max_leaf);
  static std::vector<TreeNode> tree_nodes(const std::vector<ShapeNode>& shape);
  void derive_levels();
  static void check_forest_input(std::size_t n, const std::vector<std::uint32_t>& group_offsets, int top_depth,
                                 int max_leaf);
  void refit_subtree(std::int32_t index);
  void refit_node(std::int32_t index);
  double farthest2(std::int32_t index, const Vec3d& c, double r2) const;
  void build_node(std::int32_t node, std::int32_t parent, std::uint32_t first, std::uint32_t count,
                  std::int32_t depth, std::int32_t leaf_base);

  int max_leaf_ = 32;
  int top_levels_ = 0;   // the last build's (split_axis)
  double particle_mass_ = 1.0;
  std::vector<Item> items_, scratch_;
  std::vector<unsigned char> codes_;   // split_parallel's per-item classes
  std::vector<TreeNode> nodes_;
  std::vector<Leaf> leaves_;
  std::vector<std::int32_t> leaf_node_;
  std::vector<std::uint32_t> order_;
  std::vector<Vec3d> pos_;
  std::vector<std::vector<std::int32_t>> levels_;
  // refit(): subtrees refitted one per thread (roots at or below the first level of >= 64
  // nodes), then the nodes above them, deepest first (from derive_levels).
  std::vector<std::int32_t> refit_roots_, refit_above_;
  BuildTimes times_;
};

}  // namespace orbis
