// The dual-tree walk's pair test (walk.hpp, steps 1-4) in one host+device function, so
// that the CPU walk (walk.cpp) and the device walk (gpu/walk_cuda.cu) take the same
// decisions bit for bit: the same double operations in the same order (both translation
// units are compiled without FMA contraction), on the same node records (WalkNode).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/hostdevice.hpp"

namespace orbis {

// What the pair test reads of a node: 96 bytes instead of TreeNode's 120, with the box
// centre and half width computed once, not per pair. The same record in the CPU walk and,
// copied as it is, in the device walk.
struct WalkNode {
  double box_centre[3], half_width[3], centre[3], radius;
  std::int32_t left, right, leaf;   // children (-1 for a leaf), leaf index (-1 if none)
  // 1: a "top" node (not a leaf, above the walk's top depth d, WalkSettings::top_levels):
  // the walk only splits it (see walk_pair), so the pairs it reaches at depth d and the
  // decisions below them do not depend on the tree above depth d.
  std::int32_t top;
};
static_assert(sizeof(WalkNode) == 96, "WalkNode is copied to the GPU as it is");

// A node's record from its box, centre of mass and radius (Vec3d or double[3]): box centre
// 0.5 (lo + hi) and half width 0.5 (hi - lo), the arithmetic of TreeNode::box_centre and
// half_width, so every side that makes one gets the same bits. `top`: is_top_node.
template <typename V>
ORBIS_HD WalkNode make_walk_node(const V& lo, const V& hi, const V& centre, double radius, std::int32_t left,
                                 std::int32_t right, std::int32_t leaf, bool top) {
  WalkNode w;
  for (int d = 0; d < 3; ++d) {
    w.box_centre[d] = 0.5 * (lo[d] + hi[d]);
    w.half_width[d] = 0.5 * (hi[d] - lo[d]);
    w.centre[d] = centre[d];
  }
  w.radius = radius;
  w.left = left;
  w.right = right;
  w.leaf = leaf;
  w.top = top ? 1 : 0;
  return w;
}

// The walk's top nodes: not a leaf, depth < top_levels (0: none, the plain walk). In a tree
// assembled from subtrees (OrbTree::assemble_forest) the artificial nodes above the
// subtrees have depths < top_levels too, so one rule serves both.
ORBIS_HD bool is_top_node(std::int32_t depth, std::int32_t left, int top_levels) {
  return left >= 0 && depth < top_levels;
}

// Periodic: the box, the cut and theta^2. Vacuum boundaries (walk_pair_params) use the same
// test with a period no pair comes near (box = 2^1000, r_cut = box/4: every image 0 and
// unique, raw + 0 * box = raw exactly) and r_cut2 = +inf (nothing dropped, every pair
// inside the cut): what decides is the opening angle alone, on the CPU and the device.
// leaf_cell (vacuum only, WalkSettings::leaf_cell): a leaf facing a compact node takes one
// P2L/M2P pair (walk_pair) instead of splitting the node down to its leaves, by the opening
// angle leaf_cell_theta (and its square). Off (the periodic walk) the test is the one
// without it, bit for bit.
struct WalkPairParams {
  double box, half_box, r_cut, r_cut2, theta2;
  double leaf_cell_theta = 0, leaf_cell_theta2 = 0;
  bool leaf_cell = false;
};

// Always inlined on the host too: the CPU walk runs the test per pair in its innermost
// loop, with its emitters inlined into it.
#if defined(__CUDACC__)
#define ORBIS_WALK_PAIR_HD __host__ __device__ __forceinline__
#else
#define ORBIS_WALK_PAIR_HD inline __attribute__((always_inline))
#endif

// The child pairs of (t, s) when T splits (split_t) and/or S does, to sink.child.
template <typename Sink>
ORBIS_WALK_PAIR_HD void split_pair(std::int32_t t, std::int32_t s, const WalkNode& T, const WalkNode& S,
                                   bool split_t, bool split_s, Sink& sink) {
  const std::int32_t tk[2] = {split_t ? T.left : t, split_t ? T.right : t};
  const std::int32_t sk[2] = {split_s ? S.left : s, split_s ? S.right : s};
  for (int a = 0; a < (split_t ? 2 : 1); ++a)
    for (int b = 0; b < (split_s ? 2 : 1); ++b) {
      // A node with itself (both split): (left, right) is mutual, so (right, left) is not
      // visited. Distinct nodes lie in disjoint subtrees, so their children pairs do too.
      if (t == s && a > b) continue;
      sink.child(tk[a], sk[b]);
    }
}

// The test of pair (t, s) (nodes T, S). What it becomes goes to `sink`, in the walk's order:
//   sink.m2l(image): one M2L pair (the tasks (t, s, image) and, when t != s, (s, t, -image));
//   sink.p2p(image): one P2P task per image (mutual when t != s);
//   sink.p2l_m2p(leaf_is_target): (vacuum, params.leaf_cell) one mutual leaf-cell pair of
//     leaf L and node C, L = T when leaf_is_target, else S: the P2L task (L's particles
//     into C's local expansion) and the M2P task (C's multipoles at L's particles);
//   sink.child(t', s'): each child pair.
// Nothing is called for a dropped pair. Each walk supplies its sink (emit, count or write).
// A pair that is not dropped and holds a top node (WalkNode::top) emits nothing: its top
// node(s) split (both when both are; a node with itself into (l, l), (l, r), (r, r)). A
// pair of nodes within r_cut has ancestors within r_cut (the gap test is the minimum over
// images, and a child's box lies in its parent's), so every walk reaches exactly the
// non-dropped pairs of the first non-top nodes (depth d, or leaves above it) whatever the
// tree above them, and each decision below depends on the two subtrees alone.
template <typename Sink>
ORBIS_WALK_PAIR_HD void walk_pair(std::int32_t t, std::int32_t s, const WalkNode& T, const WalkNode& S,
                                  const WalkPairParams& p, Sink& sink) {
  double raw[3], half[3], gap2 = 0, far2 = 0;
  std::int8_t image[3];
  bool unique = true;
  for (int d = 0; d < 3; ++d) {
    // Swapping T and S negates every quantity exactly: the decision is symmetric.
    raw[d] = S.box_centre[d] - T.box_centre[d];
    // Centres lie in [0, L), or a little outside it in a tree refitted to particles that
    // drifted across a face (the engines wrap positions only where they build): |raw| < 1.5 L,
    // so the nearest image is -1, 0 or +1 (a tie at exactly L/2 keeps 0, as nearbyint's
    // round-half-even would).
    const double e = raw[d] > p.half_box ? -1.0 : (raw[d] < -p.half_box ? 1.0 : 0.0);
    const double dc = std::fabs(raw[d] + e * p.box);
    half[d] = T.half_width[d] + S.half_width[d];
    if (dc > half[d]) gap2 += (dc - half[d]) * (dc - half[d]);
    far2 += (dc + half[d]) * (dc + half[d]);
    // Another image moves this axis' separation by L: it stays beyond r_cut if so.
    if (dc + half[d] + p.r_cut >= p.box) unique = false;
    image[d] = static_cast<std::int8_t>(e);
  }
  if (gap2 > p.r_cut2) return;

  if (T.top || S.top) {
    split_pair(t, s, T, S, T.top != 0, S.top != 0, sink);
    return;
  }

  if (unique && far2 <= p.r_cut2) {
    double r2 = 0;
    for (int d = 0; d < 3; ++d) {
      const double r = (T.centre[d] - S.centre[d]) - image[d] * p.box;
      r2 += r * r;   // (x x + y y) + z z, as norm2
    }
    const double reach = T.radius + S.radius;
    if (reach * reach < p.theta2 * r2) {
      sink.m2l(image);
      return;
    }
  }

  const bool t_leaf = T.left < 0, s_leaf = S.left < 0;
  if (p.leaf_cell && t_leaf != s_leaf) {
    // A leaf L cannot split, so a node C that fails the opening angle against it would be
    // split all the way down to its leaves, each then summing L directly (vacuum: the long
    // outer leaves of an ORB tree against a compact core). When C is compact against the
    // distance d_min from its centre to L's particles, C.radius < theta' d_min (theta' =
    // leaf_cell_theta), C's
    // multipoles converge at L's particles and L's particles' expansion about z_C converges
    // over C (errors ~ (R_C / d_min)^(p+1), as M2L's): one P2L/M2P pair instead. d_min is
    // bounded below by the distance from z_C to L's sphere, |z_C - z_L| - L.radius, and to
    // L's tight box (the better bound for a long leaf, whose sphere may hold z_C): the test
    // passes when either does. Squared (radii >= 0: theta > 0 and a positive distance are
    // implied; theta = 0 never passes), no square root, and the same bits whichever side
    // of the pair the leaf is on.
    const WalkNode& L = t_leaf ? T : S;
    const WalkNode& C = t_leaf ? S : T;
    double d2 = 0, box2 = 0;
    for (int d = 0; d < 3; ++d) {
      const double r = C.centre[d] - L.centre[d];
      d2 += r * r;
      const double gap = std::fabs(C.centre[d] - L.box_centre[d]) - L.half_width[d];
      if (gap > 0) box2 += gap * gap;
    }
    const double reach = C.radius + p.leaf_cell_theta * L.radius;
    if (C.radius * C.radius < p.leaf_cell_theta2 * box2 || reach * reach < p.leaf_cell_theta2 * d2) {
      sink.p2l_m2p(t_leaf);
      return;
    }
  }
  if (t_leaf && s_leaf) {
    if (unique) {
      sink.p2p(image);
      return;
    }
    // Several images can come within r_cut (a leaf comparable to L/2 - r_cut): one task
    // per image whose boxes do; the P2P cut keeps each particle pair in one at most. For a
    // leaf with itself this visits every image and its negation.
    double gap_axis[3][3];
    for (int d = 0; d < 3; ++d)
      for (int e = -1; e <= 1; ++e) {
        const double dc = std::fabs(raw[d] + e * p.box);
        gap_axis[d][e + 1] = dc > half[d] ? dc - half[d] : 0.0;
      }
    for (int ex = -1; ex <= 1; ++ex)
      for (int ey = -1; ey <= 1; ++ey)
        for (int ez = -1; ez <= 1; ++ez) {
          const double g2 = gap_axis[0][ex + 1] * gap_axis[0][ex + 1] + gap_axis[1][ey + 1] * gap_axis[1][ey + 1] +
                            gap_axis[2][ez + 1] * gap_axis[2][ez + 1];
          if (g2 > p.r_cut2) continue;
          const std::int8_t e[3] = {static_cast<std::int8_t>(ex), static_cast<std::int8_t>(ey),
                                    static_cast<std::int8_t>(ez)};
          sink.p2p(e);
        }
    return;
  }

  // Split the node of larger radius (both when equal; a leaf never).
  const bool split_t = !t_leaf && (s_leaf || T.radius >= S.radius);
  const bool split_s = !s_leaf && (t_leaf || S.radius >= T.radius);
  split_pair(t, s, T, S, split_t, split_s, sink);
}

}  // namespace orbis
