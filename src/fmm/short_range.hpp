// The short-range part of the PM-FMM force split on the CPU: ORB tree + multipoles, the
// dual-tree walk, M2L/L2L/L2P with the truncated kernel (OpenMP), P2P through a
// P2PEvaluator supplied by the caller (CPU or CUDA backend).
//
// It returns, for each particle, the comoving short-range acceleration
//   g_i = G m sum_{j: |x_j - x_i| < r_cut} (x_j - x_i)/|x_j - x_i|^3 T(|x_j - x_i| / 2r_s),
// T(x) = erfc(x) + (2x/sqrt(pi)) e^(-x^2), minimal periodic image, softened in P2P only.
// With the tabulated P2P (taylor_order >= 0) the cut is min(r_cut, 6 r_s), where the table
// ends (T(3) = 4e-4); with the exact P2P (taylor_order = -1) it is r_cut.
// Far pairs inside r_cut are approximated by the multipole expansion of
// psi = erfc(r/2r_s)/r (fmm/expansions.hpp); pairs are never counted beyond r_cut.
//
// With an evaluator that builds the tree itself (P2PEvaluator::builds_tree: the CUDA one),
// the tree build, the walk and P2P run on its device from the positions alone; the host
// gets the same tree and M2L lists back and computes multipoles and M2L/L2L/L2P while the
// device does P2P. The trees and task sets are the CPU's, so both paths give the same sums.
//
// Vacuum boundaries (ShortRangeSettings::boundary): the same tree, walk and kernels give
// the WHOLE force of an isolated system, g_i = G m sum_j (x_j - x_i)/s^3 (s^2 = r^2 + eps^2
// in P2P, and the expansions of the same softened 1/s in M2L, P2L and M2P,
// fmm/kernel_kind.hpp, fmm/kernel_derivatives.hpp): no images and no cut, every pair
// of nodes tested by the opening angle alone (fmm/walk.hpp), positions anywhere (any unit
// of length, g_mass in unit length x velocity^2). theta = 0 makes it direct summation.
//
// The solver owns its buffers and reuses them from one call to the next.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/gravity_mode.hpp"
#include "core/timer.hpp"
#include "core/vec3.hpp"
#include "fmm/expansions.hpp"
#include "fmm/leaf_cell_batch.hpp"
#include "fmm/m2l_batch.hpp"
#include "fmm/p2p.hpp"
#include "fmm/walk.hpp"
#include "tree/multipoles.hpp"
#include "tree/orb_tree.hpp"

namespace orbis {

class Params;

struct ShortRangeSettings {
  double box_mpc_h = 0;        // periodic box side, Mpc/h
  double r_s = 0;              // force-split scale, Mpc/h
  double r_cut = 0;            // short-range cut-off, Mpc/h; must be < box/2
  double theta = 0.5;          // opening angle of the walk; 0: every pair (within r_cut) in P2P
  double mean_spacing = 0;     // box / particles_per_side, Mpc/h: the memory plan's walk (0: unknown)
  int multipole_order = 4;     // p: multipoles to p, local expansions to p + 1
  int max_leaf = 32;           // most particles per tree leaf
  double softening = 0;        // Plummer-equivalent softening length, Mpc/h (P2P only)
  double g_mass = 0;           // G * particle mass, (km/s)^2 Mpc/h
  int taylor_order = 3;        // P2P T(x) table order (-1: exact erfc)
  int taylor_table_size = 512;
  bool p2p_double = false;     // P2P arithmetic in double
  // Start the P2P evaluator before M2L/L2L/L2P and finish it after (P2PEvaluator::start/
  // finish): the CUDA backend then computes while the CPU does the far field (and whatever
  // the caller does between begin() and end()); the CPU backend evaluates in finish().
  // Off: evaluate() in begin(). Results are bitwise the same.
  bool overlap_p2p = true;
  // With an evaluator that builds the tree and walks on its own device (the CUDA one:
  // P2PEvaluator::builds_tree), let it: the same tree and task sets as the CPU's, so the
  // same sums; off (a test and benchmark hook) builds and walks on the CPU as for any other.
  bool tree_on_device = true;
  // The walk's top depth d (WalkSettings::top_levels): it starts from the pairs of depth-d
  // nodes within r_cut. A run sets it from N alone (top_levels_for, [gravity]
  // top_node_particles), so over ranks every rank's walk meets the same pairs as the serial
  // one. 0: the plain walk from the root.
  int top_levels = 0;
  // The short-range force goes to zero continuously at the cut ([gravity] short_range_cut =
  // "shifted"): T'(x) = T(x) - T(x_c) (x / x_c)^2 in P2P (x_c: the P2P cut's, p2p_settings_of)
  // and psi' = erfc(r/2r_s)/r + a r in M2L, a = T(x_c)/r_c^2 (cut_shift_of). false: T up to
  // the cut, a step of T(x_c) there ("sharp").
  bool shifted_cut = false;
  // vacuum: an isolated system (see the top of this file). box_mpc_h, r_s, r_cut,
  // taylor_order and taylor_table_size are not read; softening and the positions in any
  // unit of length. Not with a forest (ShortRangeTargets::forest_groups).
  Boundary boundary = Boundary::periodic;
  // Vacuum only: leaf-cell pairs (P2L/M2P, WalkSettings::leaf_cell) where a leaf faces a
  // compact node; off: M2L and P2P only (the walk of phase A).
  bool leaf_cell = true;
};

// The settings a run uses: r_s = rs_over_cell * L / N_pm (N_pm = pm_grid_side, or
// 2 x particles_per_side when 0, as PmSettings), r_cut = r_cut_over_rs * r_s, softening =
// softening_over_spacing * L / particles_per_side, g_mass = G * particle_mass (1e10 Msun/h),
// mean_spacing = L / particles_per_side,
// top_levels = top_levels_for(particles_per_side^3, top_node_particles, max_leaf).
ShortRangeSettings short_range_settings(const Params& params, double particle_mass);

// The settings of an isolated system ([gravity] boundary = "vacuum"): the tree gravity of
// vacuum boundaries with [gravity] theta (0 for solver = "direct": every pair in P2P),
// multipole_order, max_leaf, softening (in the [units] length), leaf_cell_pairs and [gpu]
// p2p_precision;
// g_mass = 0 (the engine sets G m for the particles it loads).
ShortRangeSettings vacuum_short_range_settings(const Params& params);

// The P2P evaluators' settings for these, with the walk's and P2P's common cut: r_cut, or
// min(r_cut, 6 r_s) with the tabulated T(x), whose table ends there. Vacuum: the Newtonian
// kernel, its cut at twice `extent` (the diagonal of the particles' bounding box, which no
// pair exceeds; ShortRangeSolver::begin measures it; required), so that nothing is cut.
P2PSettings p2p_settings_of(const ShortRangeSettings& settings, double extent = -1);

// The softening of the far field's expansions: vacuum boundaries expand the softened
// Newtonian potential 1/sqrt(r^2 + eps^2) of their P2P (eps = softening), so that the force is
// one softened field near and far and the energy W of its pairs is conserved; the truncated
// kernel of periodic boxes expands erfc(r/2r_s)/r, unsoftened (its cells are far apart
// against eps ~ 0.02 r_s).
double expansion_softening_of(const ShortRangeSettings& settings);

// The shifted cut's a = T(x_c)/r_c^2 (1/(Mpc/h)^2) at the P2P's cut r_c (min(r_cut, 6 r_s) with
// the table), 0 for a sharp cut or vacuum boundaries: the force of a pair is then G m (T(x)/r^2
// - a) r-hat inside the cut, zero at it.
double cut_shift_of(const ShortRangeSettings& settings);

// The walk's settings for these (periodic: box, the P2P cut, theta, top_levels; vacuum: no
// images, no cut).
WalkSettings walk_settings_of(const ShortRangeSettings& settings, const P2PSettings& p2p);

// Whose forces a computation needs (block time steps: the active particles) and how the
// tree is made. The default is every particle on a new tree.
struct ShortRangeTargets {
  const std::vector<std::uint8_t>* bins = nullptr;   // caller order; null: every particle
  int min_bin = 0;                                   // the targets: bins[i] >= min_bin
  // Refit the last tree to the positions (OrbTree::refit) instead of building a new one;
  // the last begin() must have had as many particles.
  bool refit_tree = false;
  // A forest: the positions are groups, [(*forest_groups)[g], (*forest_groups)[g+1]), each
  // already in its subtree order (OrbTree::subtree_order), and the tree is assembled from
  // them (OrbTree::assemble_forest, top depth = ShortRangeSettings::top_levels) instead of
  // built; the tree order is the caller's order. With refit_tree, the last forest is refitted
  // (the same groups in the same order). Over ranks: a rank's own depth-d nodes and the
  // remote ones within r_cut, targets = its own particles (bins); with the CPU backend their
  // forces are then bitwise the serial tree's (the walk's canonical order, fmm/walk.hpp),
  // provided the sources are compared in the global tree's order: give forest_group_ids, or
  // else list the groups in increasing global order (then the forest's node order is the
  // serial tree's restricted to them; it cannot be checked without the ids). Host tree and
  // walk (P2P on the backend).
  const std::vector<std::uint32_t>* forest_groups = nullptr;
  // Optional, with forest_groups: each group's number in the global tree (its depth-d
  // nodes in tree order; distinct, any order), forest_groups->size() - 1 of them. The walk
  // then orders every target's sources by (group number, place in the group's subtree),
  // the serial tree's order, whatever the order of the groups here.
  const std::vector<std::uint32_t>* forest_group_ids = nullptr;
};

// The walk's source keys (DualTreeWalk::run) of a forest (OrbTree::assemble_forest with
// top depth top_levels of the groups delimited by group_offsets): node i of group g's
// subtree, rooted at node r, gets (group_ids[g] << 32) | (i - r), so that sources compare as
// in the serial tree (preorder: its depth-d subtrees in global order, each contiguous); the
// artificial top gets keys above all of these (never a source). Fails on ids that are not
// one per group or not distinct.
void forest_source_keys(const OrbTree& forest, int top_levels, const std::vector<std::uint32_t>& group_offsets,
                        const std::vector<std::uint32_t>& group_ids, std::vector<std::uint64_t>& keys);

// P2P entries (a mutual pair is one) per tree leaf that the device memory plan reserves and
// the count check below assumes: measured 79 (512^3, z = 99) and 84 (256^3 in 1 Gpc/h, z = 0).
inline constexpr double kPlannedP2PEntriesPerLeaf = 96;
// The most P2P entries one launch of the GPU walk places (its offsets are 32-bit; the same
// number as gpu::DeviceWalk::kMaxLaunchEntries, which the walk checks as it runs).
inline constexpr std::uint64_t kMaxWalkLaunchEntries = 4294967295u;

// Where the short-range step runs: all on the CPU, P2P alone on the GPU (the host engine
// with a GPU backend), or the tree walk and P2P on the GPU (the CUDA step engine).
enum class ShortRangeGpu { none, p2p, walk_and_p2p };

// The counts of the short-range step that stay 32-bit, checked before any work for a process
// holding `particles` particles in leaves of at most max_leaf: the tree's particle indices
// (fewer than 2^31 particles); with P2P on the GPU its packed source leaf (at most
// kMaxPackedLeaves leaves, fmm/tasks.hpp); with the walk on the GPU too, its 32-bit offsets
// (all P2P entries, estimated at kPlannedP2PEntriesPerLeaf per leaf, within one launch's
// kMaxWalkLaunchEntries: a sufficient bound). Fails (orbis::Error) naming the count, its
// limit and the parameters that lower it (the max_leaf that would do).
void check_short_range_counts(std::size_t particles, int max_leaf, ShortRangeGpu gpu);

struct ShortRangeStats {
  double tree_seconds = 0;        // ORB build
  double multipole_seconds = 0;   // P2M + M2M
  double walk_seconds = 0;        // dual-tree walk + grouping of the task lists
  double m2l_seconds = 0;         // M2L + L2L + L2P
  bool tree_on_device = false;    // tree and walk built by the P2P evaluator's device
  double p2p_seconds = 0;         // time in the evaluator's calls on this thread (start +
                                  // finish: for the CUDA backend, host preparation and the
                                  // wait for the device after the far field)
  double total_seconds = 0;
  double p2p_interactions = 0;    // particle pairs evaluated in P2P (both directions)
  double m2l_interactions = 0;    // M2L tasks (node pairs, one direction each)
  // Vacuum leaf-cell pairs: source particles expanded into a node's local expansion (P2L,
  // one per particle and task) and node multipoles evaluated at a particle (M2P, one per
  // target particle and task).
  double p2l_interactions = 0, m2p_interactions = 0;
  std::size_t nodes = 0, leaves = 0, p2p_tasks = 0;
  std::string p2p_where;
};

class ShortRangeSolver {
 public:
  // Checks the settings (r_cut < box/2, orders, theta) before any work.
  explicit ShortRangeSolver(const ShortRangeSettings& settings);

  // acc[i]: short-range acceleration of particle i ((km/s)^2/(Mpc/h) with g_mass in
  // (km/s)^2 Mpc/h), in the caller's order. positions in [0, box), Mpc/h (vacuum: finite,
  // anywhere; the whole acceleration).
  // weights (vacuum boundaries only, caller order, optional): each particle's mass over the
  // reference mass of g_mass (isolated systems of individual masses, Particles::masses); they
  // weigh the sources in P2P, the multipoles and P2L. Null: every particle weighs 1 (the
  // same bits as weights of 1). The P2P evaluator must accept them (accepts_weights()).
  ShortRangeStats compute(const std::vector<Vec3d>& positions, P2PEvaluator& p2p, std::vector<Vec3d>& acc,
                          const std::vector<double>* weights = nullptr);

  // compute() in two halves, so the caller can work while the P2P runs (the PM, in the run
  // loop): begin() builds the tree, walks, and starts the P2P; end() computes the
  // multipoles and M2L/L2L/L2P, finishes the P2P and returns what compute() returns.
  // positions, p2p and the targets' bins must stay alive and unchanged in between.
  //
  // With a subset of targets, the walk, M2L/L2L/L2P and P2P run only for the tree nodes
  // that hold a target (DualTreeWalk's sinks) and end() writes acc[i] of the targets only
  // (acc must hold one entry per particle; the others are left as they are). The targets'
  // forces are bitwise those of the whole computation on the same tree. Such a step always
  // takes the host tree and walk (the CUDA evaluator then runs the P2P of their tasks).
  void begin(const std::vector<Vec3d>& positions, P2PEvaluator& p2p, const ShortRangeTargets& targets = {},
             const std::vector<double>* weights = nullptr);
  ShortRangeStats end(std::vector<Vec3d>& acc);

  const ShortRangeSettings& settings() const { return settings_; }
  // The state of the last compute() (for tests and diagnostics).
  const OrbTree& tree() const { return tree_; }
  const Multipoles& multipoles() const { return multipoles_; }
  const TaskLists& tasks() const { return tasks_; }
  const DualTreeWalk& walk() const { return walk_; }

 private:
  void evaluate_far_field(std::vector<Vec3d>& far);
  void mark_sinks();

  ShortRangeSettings settings_;
  OrbTree tree_;
  Multipoles multipoles_;
  DualTreeWalk walk_;
  TaskLists tasks_;
  bool device_step_ = false;                  // the last begin() used start_tree_step
  std::vector<std::size_t> device_m2l_offsets_;   // its M2L offsets (else the walk's)
  FmmOperators ops_;
  M2LBatch m2l_batch_;
  LeafCellBatch leaf_cell_batch_;   // vacuum: P2L and M2P of the leaf-cell pairs
  std::vector<double> local_;          // local expansions, node-major
  std::vector<unsigned char> active_;  // node has a non-zero local expansion
  std::vector<unsigned char> needed_;  // node is an M2L source (its moments are needed)
  std::vector<unsigned char> sinks_;   // node holds a target (a subset of targets only)
  std::vector<std::uint64_t> source_keys_;   // a forest with group ids: forest_source_keys
  std::vector<std::uint8_t> targets_tree_;   // particle is a target, tree order (likewise)
  std::vector<double> weights_tree_;         // the begin()'s weights in tree order
  bool weighted_ = false;                    // the last begin() had weights
  ShortRangeTargets targets_;          // of the last begin()
  bool subset_ = false;                // it named a subset of the particles
  std::vector<Vec3d> acc_tree_, far_;  // P2P and far-field accelerations, tree order
  // Between begin() and end().
  P2PEvaluator* p2p_ = nullptr;
  ShortRangeStats stats_;
  P2PStats p2p_stats_;
  Stopwatch total_;
};

}  // namespace orbis
