#include "fmm/short_range.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.hpp"
#include "core/params.hpp"
#include "core/timer.hpp"
#include "core/units.hpp"
#include "fmm/tasks.hpp"
#include "fmm/truncation.hpp"

namespace orbis {

ShortRangeSettings short_range_settings(const Params& params, double particle_mass) {
  ShortRangeSettings s;
  s.box_mpc_h = params.get_real("box.size_mpc_h");
  const auto n_side = params.get_int("box.particles_per_side");
  const auto pm_side = params.get_int("gravity.pm_grid_side");
  const double n_pm = static_cast<double>(pm_side > 0 ? pm_side : 2 * n_side);   // as PmSettings
  s.r_s = params.get_real("gravity.rs_over_cell") * s.box_mpc_h / n_pm;
  s.r_cut = params.get_real("gravity.r_cut_over_rs") * s.r_s;
  s.theta = params.get_real("gravity.theta");
  s.multipole_order = static_cast<int>(params.get_int("gravity.multipole_order"));
  s.max_leaf = static_cast<int>(params.get_int("gravity.max_leaf"));
  s.mean_spacing = s.box_mpc_h / static_cast<double>(n_side);
  s.softening = params.get_real("gravity.softening_over_spacing") * s.box_mpc_h / static_cast<double>(n_side);
  s.g_mass = units::G * particle_mass;
  s.taylor_order = static_cast<int>(params.get_int("gravity.taylor_order"));
  s.taylor_table_size = static_cast<int>(params.get_int("gravity.taylor_table_size"));
  s.p2p_double = params.get_string("gpu.p2p_precision") == "double";
  s.top_levels = top_levels_for(n_side * n_side * n_side, params.get_int("gravity.top_node_particles"), s.max_leaf);
  s.shifted_cut = params.get_string("gravity.short_range_cut") == "shifted";
  if (!(s.r_cut < 0.5 * s.box_mpc_h))
    fail("{}: r_cut = r_cut_over_rs * r_s = {} Mpc/h must be < BoxSize/2 = {} Mpc/h",
         params.describe("gravity.r_cut_over_rs"), s.r_cut, 0.5 * s.box_mpc_h);
  return s;
}

ShortRangeSettings vacuum_short_range_settings(const Params& params) {
  ShortRangeSettings s;
  s.boundary = Boundary::vacuum;
  s.theta = params.get_string("gravity.solver") == "direct" ? 0.0 : params.get_real("gravity.theta");
  s.multipole_order = static_cast<int>(params.get_int("gravity.multipole_order"));
  s.max_leaf = static_cast<int>(params.get_int("gravity.max_leaf"));
  s.softening = params.get_real("gravity.softening");
  s.p2p_double = params.get_string("gpu.p2p_precision") == "double";
  s.leaf_cell = params.get_bool("gravity.leaf_cell_pairs");
  s.g_mass = 0;
  return s;
}

void check_short_range_counts(std::size_t particles, int max_leaf_setting, ShortRangeGpu gpu) {
  const auto n = static_cast<std::int64_t>(particles);
  if (n > OrbTree::kMaxParticles)
    fail("{} particles in one process, but the ORB tree indexes particles in 32 bits (at most {}): a smaller "
         "[box] particles_per_side (at most 1290 on one process)", particles, OrbTree::kMaxParticles);
  if (gpu == ShortRangeGpu::none || n == 0) return;
  const int max_leaf = std::max(max_leaf_setting, 1);
  const bool walk = gpu == ShortRangeGpu::walk_and_p2p;
  const auto entries_of = [](std::int64_t leaves) { return kPlannedP2PEntriesPerLeaf * static_cast<double>(leaves); };
  const auto fits = [&](int m) {
    const std::int64_t l = OrbTree::subtree_leaves(n, m);
    return l <= static_cast<std::int64_t>(kMaxPackedLeaves) &&
           (!walk || entries_of(l) <= static_cast<double>(kMaxWalkLaunchEntries));
  };
  if (fits(max_leaf)) return;
  int enough = max_leaf;   // the smallest power-of-two multiple of max_leaf that would do
  while (!fits(enough) && enough < (1 << 20)) enough *= 2;
  const std::int64_t leaves = OrbTree::subtree_leaves(n, max_leaf);
  if (leaves > static_cast<std::int64_t>(kMaxPackedLeaves))
    fail("{} particles in leaves of at most [gravity] max_leaf = {} make {} tree leaves, but the GPU's packed P2P "
         "tasks hold at most {} leaves: a larger [gravity] max_leaf ({} would do), fewer particles per GPU, or "
         "[gpu] backend = \"cpu\"",
         particles, max_leaf_setting, leaves, kMaxPackedLeaves, enough);
  fail("{} tree leaves ({} particles, [gravity] max_leaf = {}) make about {:.3g} P2P entries for the GPU walk "
       "({} per leaf), but one launch of the walk places at most {} with its 32-bit offsets: a larger "
       "[gravity] max_leaf ({} would do), a smaller [gravity] r_cut_over_rs, fewer particles per GPU, or "
       "[gpu] backend = \"cpu\"",
       leaves, particles, max_leaf_setting, entries_of(leaves), kPlannedP2PEntriesPerLeaf, kMaxWalkLaunchEntries,
       enough);
}

P2PSettings p2p_settings_of(const ShortRangeSettings& s, double extent) {
  P2PSettings ps;
  if (s.boundary == Boundary::vacuum) {
    if (!(extent >= 0)) fail("internal: the P2P settings of vacuum boundaries need the particles' extent");
    ps.kernel = KernelKind::newtonian;
    ps.r_cut = extent > 0 ? 2 * extent : 1.0;   // beyond every pair (a single point: any length)
    ps.softening = s.softening;
    ps.g_mass = s.g_mass;
    ps.double_precision = s.p2p_double;
    return ps;
  }
  ps.box_mpc_h = s.box_mpc_h;
  ps.r_s = s.r_s;
  // The tabulated P2P cuts at min(r_cut, 6 r_s) (the table ends at x = 3, p2p_kernel.hpp);
  // the walk uses the same cut, so M2L never adds pairs that P2P would drop.
  ps.r_cut = s.taylor_order >= 0 ? std::min(s.r_cut, 2.0 * s.r_s * kTruncationTableXMax) : s.r_cut;
  ps.softening = s.softening;
  ps.g_mass = s.g_mass;
  ps.taylor_order = s.taylor_order;
  ps.table_size = s.taylor_table_size;
  ps.double_precision = s.p2p_double;
  ps.cut_shift = cut_shift_of(s);
  return ps;
}

double cut_shift_of(const ShortRangeSettings& s) {
  if (s.boundary != Boundary::periodic || !s.shifted_cut) return 0.0;
  const double cut = s.taylor_order >= 0 ? std::min(s.r_cut, 2.0 * s.r_s * kTruncationTableXMax) : s.r_cut;
  return truncation_exact(cut / (2 * s.r_s)) / (cut * cut);
}

WalkSettings walk_settings_of(const ShortRangeSettings& s, const P2PSettings& p2p) {
  WalkSettings ws{s.box_mpc_h, p2p.r_cut, s.theta, s.top_levels};
  ws.periodic = s.boundary == Boundary::periodic;
  ws.leaf_cell = s.leaf_cell;
  return ws;
}

namespace {
ShortRangeSettings checked(const ShortRangeSettings& s) {
  const bool periodic = s.boundary == Boundary::periodic;
  WalkSettings ws{s.box_mpc_h, s.r_cut, s.theta, s.top_levels};
  ws.periodic = periodic;
  check_walk_settings(ws);
  if (periodic && !(s.r_s > 0)) fail("short-range solver: r_s = {} Mpc/h must be > 0", s.r_s);
  if (s.multipole_order < 1 || s.multipole_order > 6)
    fail("short-range solver: multipole_order = {} outside [1, 6]", s.multipole_order);
  if (s.max_leaf < 1) fail("short-range solver: max_leaf = {} must be >= 1", s.max_leaf);
  if (!(s.softening >= 0)) fail("short-range solver: softening = {} must be >= 0", s.softening);
  return s;
}
}  // namespace

void forest_source_keys(const OrbTree& forest, int top_levels, const std::vector<std::uint32_t>& group_offsets,
                        const std::vector<std::uint32_t>& group_ids, std::vector<std::uint64_t>& keys) {
  if (group_offsets.empty() || group_ids.size() != group_offsets.size() - 1)
    fail("short-range solver: {} forest group ids for {} groups", group_ids.size(),
         group_offsets.empty() ? 0 : group_offsets.size() - 1);
  std::vector<std::uint32_t> sorted(group_ids);
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t g = 1; g < sorted.size(); ++g)
    if (sorted[g] == sorted[g - 1]) fail("short-range solver: forest group id {} given twice", sorted[g]);
  // The non-empty groups' roots (depth top_levels: the artificial top lies above it, the
  // subtrees below) come in preorder in the groups' order, each followed by its subtree.
  const auto& nodes = forest.nodes();
  keys.resize(nodes.size());
  std::size_t g = 0;
  std::uint64_t group_key = 0;
  std::size_t root = 0;
  bool in_group = false;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].depth == top_levels) {
      while (g + 1 < group_offsets.size() && group_offsets[g + 1] == group_offsets[g]) ++g;   // empty
      if (g + 1 >= group_offsets.size())
        fail("internal: forest_source_keys found more subtree roots than the {} groups", group_ids.size());
      group_key = std::uint64_t{group_ids[g]} << 32;
      root = i;
      in_group = true;
      ++g;
    }
    keys[i] = nodes[i].depth < top_levels || !in_group ? (~std::uint64_t{0} << 32) | i : group_key | (i - root);
  }
  while (g + 1 < group_offsets.size() && group_offsets[g + 1] == group_offsets[g]) ++g;
  if (g + 1 != group_offsets.size())
    fail("internal: forest_source_keys found {} subtree roots for more non-empty groups", g);
}

namespace {
KernelKind kernel_of(const ShortRangeSettings& s) {
  return s.boundary == Boundary::vacuum ? KernelKind::newtonian : KernelKind::truncated;
}

// Vacuum: checks that every position is finite and returns the diagonal of their bounding
// box (the P2P cut goes beyond it, p2p_settings_of).
double vacuum_extent(const std::vector<Vec3d>& positions) {
  const auto n = static_cast<std::int64_t>(positions.size());
  double lo[3] = {HUGE_VAL, HUGE_VAL, HUGE_VAL}, hi[3] = {-HUGE_VAL, -HUGE_VAL, -HUGE_VAL};
  bool finite = true;
#pragma omp parallel for schedule(static) reduction(min : lo[:3]) reduction(max : hi[:3]) reduction(&& : finite)
  for (std::int64_t i = 0; i < n; ++i) {
    const Vec3d& x = positions[static_cast<std::size_t>(i)];
    finite = finite && std::isfinite(x.x) && std::isfinite(x.y) && std::isfinite(x.z);
    for (int d = 0; d < 3; ++d) {
      lo[d] = std::min(lo[d], x[d]);
      hi[d] = std::max(hi[d], x[d]);
    }
  }
  if (!finite)
    for (const Vec3d& x : positions)
      if (!(std::isfinite(x.x) && std::isfinite(x.y) && std::isfinite(x.z)))
        fail("tree gravity (vacuum): position ({}, {}, {}) is not finite", x.x, x.y, x.z);
  if (n == 0) return 0;
  return norm(Vec3d{hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]});
}
}  // namespace

double expansion_softening_of(const ShortRangeSettings& settings) {
  return settings.boundary == Boundary::vacuum ? settings.softening : 0.0;
}

ShortRangeSolver::ShortRangeSolver(const ShortRangeSettings& settings)
    : settings_(checked(settings)),
      ops_(settings.multipole_order, settings.r_s, kernel_of(settings), cut_shift_of(settings),
           expansion_softening_of(settings)),
      m2l_batch_(settings.multipole_order, settings.r_s, kernel_of(settings), cut_shift_of(settings),
                 expansion_softening_of(settings)),
      leaf_cell_batch_(settings.multipole_order, expansion_softening_of(settings)) {}

ShortRangeStats ShortRangeSolver::compute(const std::vector<Vec3d>& positions, P2PEvaluator& p2p,
                                          std::vector<Vec3d>& acc, const std::vector<double>* weights) {
  begin(positions, p2p, {}, weights);
  return end(acc);
}

void ShortRangeSolver::begin(const std::vector<Vec3d>& positions, P2PEvaluator& p2p,
                             const ShortRangeTargets& targets, const std::vector<double>* weights) {
  if (p2p_) fail("short-range solver: begin() called twice without end()");
  if (weights) {
    if (settings_.boundary == Boundary::periodic)
      fail("short-range solver: individual masses (weights) are for vacuum boundaries only");
    if (weights->size() != positions.size())
      fail("short-range solver: {} weights for {} particles", weights->size(), positions.size());
    if (!p2p.accepts_weights())
      fail("short-range solver: the P2P evaluator '{}' does not take individual masses", p2p.name());
  }
  weighted_ = weights != nullptr;
  if (targets.bins && targets.bins->size() != positions.size())
    fail("short-range solver: {} time bins for {} particles", targets.bins->size(), positions.size());
  targets_ = targets;
  subset_ = targets.bins && targets.min_bin > 0;
  const ShortRangeSettings& s = settings_;
  const bool periodic = s.boundary == Boundary::periodic;
  if (!periodic && targets.forest_groups)
    fail("tree gravity (vacuum): a forest of subtrees (over ranks) is not supported with vacuum boundaries");
  const double box = s.box_mpc_h;
  const auto n = static_cast<std::int64_t>(positions.size());
  // A tree built here takes positions wrapped into the box. A refitted tree, or a forest of
  // groups over ranks, takes them as they drifted since the build (the step engines wrap
  // only where they build): within a quarter box of it, so that node centres stay within
  // the walk's reach of nearest images (walk_pair.hpp).
  const bool built = !targets.refit_tree && !targets.forest_groups;
  const double lo = built ? 0.0 : -0.25 * box, hi = built ? box : 1.25 * box;
  const auto in_reach = [lo, hi](const Vec3d& x) {
    return x.x >= lo && x.x < hi && x.y >= lo && x.y < hi && x.z >= lo && x.z < hi;
  };
  bool inside = true;
  if (periodic) {
#pragma omp parallel for schedule(static) reduction(&& : inside)
    for (std::int64_t i = 0; i < n; ++i) inside = inside && in_reach(positions[static_cast<std::size_t>(i)]);
  }
  if (!inside)
    for (const Vec3d& x : positions)
      if (!in_reach(x))
        fail("short-range solver: position ({}, {}, {}) outside [{}, {}) Mpc/h{}", x.x, x.y, x.z, lo, hi,
             built ? "" : " (a refit's reach around the periodic box)");
  const double extent = periodic ? 0.0 : vacuum_extent(positions);

  stats_ = ShortRangeStats{};
  total_.restart();
  const P2PSettings ps = p2p_settings_of(s, extent);
  p2p_ = &p2p;
  const WalkSettings ws = walk_settings_of(s, ps);

  // The device tree step returns M2L lists only: with leaf-cell pairs (vacuum) the host
  // builds and walks, and the evaluator runs the P2P of the host's tasks.
  device_step_ = s.tree_on_device && p2p.builds_tree() && !subset_ && !targets.refit_tree && !targets.forest_groups &&
                 !weighted_ && (periodic || !s.leaf_cell);
  if (device_step_) {
    // Tree, walk and P2P on the device; the host gets the tree and the M2L lists back for
    // the far field, which end() computes while the P2P runs. Those lists are not in the
    // host walk's canonical order (fmm/walk.hpp): the CUDA step engine's forces need not
    // be bitwise over rank counts.
    DeviceTreeResult out;
    out.tree = &tree_;
    out.m2l = &tasks_.m2l;
    out.m2l_offsets = &device_m2l_offsets_;
    tasks_.p2p.clear();
    tasks_.p2l.clear();   // none: the device step is never taken with leaf-cell pairs
    tasks_.m2p.clear();
    Stopwatch phase;
    p2p.start_tree_step(ps, DeviceTreeStep{&positions, s.max_leaf, ws}, out);
    stats_.tree_on_device = true;
    stats_.tree_seconds = out.tree_seconds;
    stats_.walk_seconds = out.walk_seconds;
    stats_.p2p_tasks = out.p2p_tasks;
    stats_.p2p_seconds = phase.seconds() - out.tree_seconds - out.walk_seconds;
    return;
  }

  Stopwatch phase;
  if (targets.refit_tree) {
    if (tree_.size() != positions.size())
      fail("short-range solver: a tree refit to {} particles, but the last tree holds {}", positions.size(),
           tree_.size());
    tree_.refit(positions);
  } else if (targets.forest_groups) {
    tree_.assemble_forest(positions, *targets.forest_groups, s.top_levels, s.max_leaf);
  } else {
    tree_.build(positions, s.max_leaf, 1.0, OrbTree::kParallelMin, s.top_levels);
  }
  if (subset_) mark_sinks();
  if (weighted_) {
    const auto& order = tree_.order();
    weights_tree_.resize(order.size());
#pragma omp parallel for schedule(static)
    for (std::int64_t t = 0; t < static_cast<std::int64_t>(order.size()); ++t)
      weights_tree_[static_cast<std::size_t>(t)] = (*weights)[order[static_cast<std::size_t>(t)]];
  }
  const bool keyed = targets.forest_groups && targets.forest_group_ids;
  if (keyed) forest_source_keys(tree_, s.top_levels, *targets.forest_groups, *targets.forest_group_ids, source_keys_);
  stats_.tree_seconds = phase.seconds();
  // A backend that expands and groups on its own and reads the walk's buffers in place
  // (the CUDA one) gets each mutual pair as one task, and no host grouping of the list.
  const bool spans = p2p.accepts_task_spans();
  phase.restart();
  walk_.run(tree_, ws, tasks_, spans ? DualTreeWalk::P2POutput::kHalfSpans : DualTreeWalk::P2POutput::kGrouped,
            subset_ ? &sinks_ : nullptr, keyed ? &source_keys_ : nullptr);
  stats_.walk_seconds = phase.seconds();
  stats_.p2p_tasks = walk_.p2p_count();

  P2PInput in{&tree_.positions(), &tree_.leaves(), spans ? nullptr : &tasks_.p2p,
              spans ? &walk_.p2p_spans() : nullptr, subset_ ? &targets_tree_ : nullptr,
              weighted_ ? &weights_tree_ : nullptr};
  if (s.overlap_p2p) {
    // The CUDA backend queues its work and returns; the CPU one only records the call.
    phase.restart();
    p2p.start(ps, in);
    stats_.p2p_seconds = phase.seconds();
  } else {
    phase.restart();
    p2p_stats_ = p2p.evaluate(ps, in, acc_tree_);
    stats_.p2p_seconds = phase.seconds();
  }
}

ShortRangeStats ShortRangeSolver::end(std::vector<Vec3d>& acc) {
  if (!p2p_) fail("short-range solver: end() without begin()");
  P2PEvaluator& p2p = *p2p_;
  p2p_ = nullptr;
  // The walk needs no multipoles (only boxes, centres and radii), so they are computed
  // here, while the GPU works on P2P. P2P writes every particle of every target leaf; the
  // far field goes to its own buffer and is added afterwards (the same sum either way).
  // Only the M2L sources' moments are needed (and their subtrees', for M2M): in a smooth
  // field, where r_cut keeps every pair within a few leaves, there are none at all.
  Stopwatch phase;
  const auto& m2l = tasks_.m2l;
  const auto& m2p = tasks_.m2p;
  // No M2L task (every pair within r_cut reached P2P; early times, or small active sets)
  // and no leaf-cell task: no multipoles, no far field (the zeros it would add).
  const bool far_field = !m2l.empty() || !tasks_.p2l.empty() || !m2p.empty();
  needed_.assign(tree_.nodes().size(), 0);
  const auto n_m2l = static_cast<std::int64_t>(m2l.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t q = 0; q < n_m2l; ++q)   // the same byte from several threads: atomic
    __atomic_store_n(&needed_[m2l[static_cast<std::size_t>(q)].source], static_cast<unsigned char>(1),
                     __ATOMIC_RELAXED);
  const auto n_m2p = static_cast<std::int64_t>(m2p.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t q = 0; q < n_m2p; ++q)
    __atomic_store_n(&needed_[m2p[static_cast<std::size_t>(q)].source], static_cast<unsigned char>(1),
                     __ATOMIC_RELAXED);
  if (far_field) multipoles_.compute(tree_, settings_.multipole_order, &needed_, weighted_ ? &weights_tree_ : nullptr);
  stats_.multipole_seconds = phase.seconds();
  phase.restart();
  if (far_field) evaluate_far_field(far_);
  stats_.m2l_seconds = phase.seconds();
  if (settings_.overlap_p2p || device_step_) {
    phase.restart();
    p2p_stats_ = p2p.finish(acc_tree_);
    stats_.p2p_seconds += phase.seconds();
  }
  const std::size_t n = tree_.size();
  if (acc_tree_.size() != n)
    fail("short-range solver: the P2P evaluator '{}' returned {} accelerations for {} particles",
         p2p.name(), acc_tree_.size(), n);
  const auto& order = tree_.order();
  const auto ni = static_cast<std::int64_t>(n);
  if (subset_) {
    if (acc.size() != n) fail("short-range solver: {} accelerations to update for {} particles", acc.size(), n);
    const std::vector<std::uint8_t>& bins = *targets_.bins;
    const int min_bin = targets_.min_bin;
#pragma omp parallel for schedule(static)
    for (std::int64_t t = 0; t < ni; ++t)
      if (bins[order[t]] >= min_bin) acc[order[t]] = acc_tree_[t] + (far_field ? far_[t] : Vec3d{0, 0, 0});
  } else {
    acc.resize(n);
#pragma omp parallel for schedule(static)
    for (std::int64_t t = 0; t < ni; ++t) acc[order[t]] = acc_tree_[t] + (far_field ? far_[t] : Vec3d{0, 0, 0});
  }

  ShortRangeStats stats = stats_;
  stats.total_seconds = total_.seconds();
  stats.p2p_interactions = p2p_stats_.interactions;
  stats.m2l_interactions = static_cast<double>(tasks_.m2l.size());
  stats.p2l_interactions = 0;
  for (const InteractionTask& task : tasks_.p2l) stats.p2l_interactions += tree_.leaves()[task.source].count;
  stats.m2p_interactions = 0;
  for (const InteractionTask& task : m2p)
    for (std::uint32_t i = tree_.leaves()[task.target].first, e = i + tree_.leaves()[task.target].count; i < e; ++i)
      stats.m2p_interactions += subset_ ? targets_tree_[i] : 1;
  stats.nodes = tree_.nodes().size();
  stats.leaves = tree_.leaves().size();
  stats.p2p_where = p2p_stats_.where;
  return stats;
}

// sinks_[node]: the node holds a target (bins[i] >= min_bin); leaves from their particles,
// then every internal node from its children, deepest level first.
void ShortRangeSolver::mark_sinks() {
  const auto& nodes = tree_.nodes();
  const auto& order = tree_.order();
  const auto& leaf_node = tree_.leaf_node();
  const std::vector<std::uint8_t>& bins = *targets_.bins;
  const int min_bin = targets_.min_bin;
  sinks_.assign(nodes.size(), 0);
  targets_tree_.resize(order.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t l = 0; l < static_cast<std::int64_t>(leaf_node.size()); ++l) {
    const auto node = static_cast<std::size_t>(leaf_node[static_cast<std::size_t>(l)]);
    unsigned char any = 0;
    for (std::uint32_t t = nodes[node].first; t < nodes[node].first + nodes[node].count; ++t) {
      targets_tree_[t] = bins[order[t]] >= min_bin;
      any |= targets_tree_[t];
    }
    sinks_[node] = any;
  }
  // Preorder: children follow their parent, so a backward pass sees them first.
  for (std::size_t i = nodes.size(); i-- > 0;)
    if (!nodes[i].is_leaf())
      sinks_[i] = sinks_[static_cast<std::size_t>(nodes[i].left)] | sinks_[static_cast<std::size_t>(nodes[i].right)];
}

void ShortRangeSolver::evaluate_far_field(std::vector<Vec3d>& far) {
  const auto& nodes = tree_.nodes();
  // Vacuum: every image is 0 (the box is not read: the shift is 0).
  const double box = settings_.boundary == Boundary::periodic ? settings_.box_mpc_h : 0.0;
  const int nl = ops_.local_size();
  const std::size_t n_nodes = nodes.size();
  // Sized only; every entry is written below, by the thread that owns the node (a parallel
  // first touch instead of a serial memset of tens of MB).
  local_.resize(n_nodes * static_cast<std::size_t>(nl));
  active_.resize(n_nodes);
  const auto& offsets = device_step_ ? device_m2l_offsets_ : walk_.m2l_offsets();
  const auto& m2l = tasks_.m2l;

  // Leaf-cell tasks (vacuum): P2L grouped by target node, M2P by target leaf (the walk's).
  const auto& pos = tree_.positions();
  const auto& leaves = tree_.leaves();
  const auto& p2l = tasks_.p2l;
  const auto& m2p = tasks_.m2p;
  const auto& p2l_offsets = walk_.p2l_offsets();
  const auto& m2p_offsets = walk_.m2p_offsets();

  // M2L: one thread per target node sums its sources in list order, eight at a time
  // (fmm/m2l_batch.hpp), then its P2L sources' particles in list order, eight at a time
  // (fmm/leaf_cell_batch.hpp); no atomics, the same sums for any thread count.
#pragma omp parallel
  {
    std::vector<const double*> sources;
    std::vector<Vec3d> R;
    std::vector<double> W;
#pragma omp for schedule(dynamic, 64)
    for (long t = 0; t < static_cast<long>(n_nodes); ++t) {
      const auto ut = static_cast<std::size_t>(t);
      const auto begin = offsets[ut], end = offsets[ut + 1];
      const std::size_t p2l_begin = p2l.empty() ? 0 : p2l_offsets[ut], p2l_end = p2l.empty() ? 0 : p2l_offsets[ut + 1];
      if (subset_ && !sinks_[ut]) {   // no target below: never read
        active_[ut] = 0;
        continue;
      }
      double* local = local_.data() + ut * nl;
      std::fill_n(local, nl, 0.0);
      active_[ut] = begin < end || p2l_begin < p2l_end;
      const Vec3d& zt = nodes[ut].centre;
      if (begin < end) {
        sources.resize(end - begin);
        R.resize(end - begin);
        for (auto q = begin; q < end; ++q) {
          const InteractionTask& task = m2l[q];
          const Vec3d shift{task.image[0] * box, task.image[1] * box, task.image[2] * box};
          sources[q - begin] = multipoles_.of(static_cast<int>(task.source));
          R[q - begin] = (zt - nodes[task.source].centre) - shift;   // as in the walk
        }
        m2l_batch_.apply(sources.data(), R.data(), end - begin, local);
      }
      // P2L: each source leaf's particles as point masses (image 0), before L2L hands the
      // expansion to the node's subtree.
      if (p2l_begin < p2l_end) {
        R.clear();
        W.clear();
        for (std::size_t q = p2l_begin; q < p2l_end; ++q) {
          const Leaf& leaf = leaves[p2l[q].source];
          for (std::uint32_t j = leaf.first; j < leaf.first + leaf.count; ++j) {
            R.push_back(zt - pos[j]);
            if (weighted_) W.push_back(weights_tree_[j]);
          }
        }
        leaf_cell_batch_.p2l(R.data(), R.size(), local, weighted_ ? W.data() : nullptr);
      }
    }
  }

  // L2L, top level first: a child inherits its parent's expansion about its own centre.
  const auto& levels = tree_.levels();
  for (std::size_t lev = 1; lev < levels.size(); ++lev) {
    const auto& list = levels[lev];
#pragma omp parallel for schedule(static) if (list.size() >= Multipoles::kParallelLevel)
    for (long q = 0; q < static_cast<long>(list.size()); ++q) {
      const auto c = static_cast<std::size_t>(list[static_cast<std::size_t>(q)]);
      const auto parent = static_cast<std::size_t>(nodes[c].parent);
      if (!active_[parent] || (subset_ && !sinks_[c])) continue;
      ops_.l2l(local_.data() + parent * nl, nodes[c].centre - nodes[parent].centre, local_.data() + c * nl);
      active_[c] = 1;
    }
  }

  // L2P: the gradient of each leaf's expansion at its particles, plus (vacuum) the M2P of
  // its source nodes in list order, times G m.
  far.resize(pos.size());   // the leaves cover every particle: each target's is written below
  const auto& leaf_node = tree_.leaf_node();
  const double g_mass = settings_.g_mass;
#pragma omp parallel
  {
    std::vector<Vec3d> R, field;
#pragma omp for schedule(dynamic, 16)
    for (long l = 0; l < static_cast<long>(leaf_node.size()); ++l) {
      const auto ul = static_cast<std::size_t>(l);
      const auto n = static_cast<std::size_t>(leaf_node[ul]);
      if (subset_ && !sinks_[n]) continue;   // no target here: its far field is not read
      const double* local = local_.data() + n * nl;
      const std::uint32_t first = nodes[n].first, count = nodes[n].count;
      // M2P: each source node's field at the leaf's particles, eight at a time, the
      // sources in list order (every particle: a non-target's is not read).
      const std::size_t m2p_begin = m2p.empty() ? 0 : m2p_offsets[ul], m2p_end = m2p.empty() ? 0 : m2p_offsets[ul + 1];
      field.assign(count, Vec3d{0, 0, 0});
      for (std::size_t q = m2p_begin; q < m2p_end; ++q) {
        const auto c = static_cast<std::size_t>(m2p[q].source);
        R.resize(count);
        for (std::uint32_t i = 0; i < count; ++i) R[i] = pos[first + i] - nodes[c].centre;
        leaf_cell_batch_.m2p(multipoles_.of(static_cast<int>(c)), R.data(), count, field.data());
      }
      for (std::uint32_t i = 0; i < count; ++i) {
        const std::uint32_t t = first + i;
        const Vec3d g = active_[n] ? ops_.l2p(local, pos[t] - nodes[n].centre) : Vec3d{0, 0, 0};
        far[t] = g_mass * (m2p_begin < m2p_end ? g + field[i] : g);
      }
    }
  }
}

}  // namespace orbis
