#include "integrate/host_engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.hpp"
#include "core/ordered_sum.hpp"
#include "core/exact_sum.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "core/units.hpp"
#include "integrate/kdk.hpp"
#if defined(ORBIS_HAVE_CUDA)
#include "gpu/pm_cuda_slabs.hpp"
#endif

namespace orbis {
namespace {

double sum_of(const PhaseTimes& times) {
  double total = 0;
  for (const auto& [phase, seconds] : times.all()) total += seconds;
  return total;
}

// The particle mass a parameter file implies: all matter in N^3 equal particles.
double nominal_particle_mass(const Params& params) {
  const double box = params.get_real("box.size_mpc_h");
  const double n = static_cast<double>(params.get_int("box.particles_per_side"));
  return params.get_real("cosmology.omega_m") * units::rho_crit0 * box * box * box / (n * n * n);
}

}  // namespace

void add_short_range_stats(const ShortRangeStats& s, ForceStats& stats) {
  stats.times.add("tree", s.tree_seconds + s.multipole_seconds);
  stats.times.add("walk", s.walk_seconds);
  stats.times.add("m2l", s.m2l_seconds);
  stats.times.add("p2p", s.p2p_seconds);
  stats.p2p_interactions += s.p2p_interactions;
  stats.m2l_interactions += s.m2l_interactions;
  stats.p2p_where = s.p2p_where;
}

HostStepEngine::HostStepEngine(const Params& params, const Comm& comm)
    : box_mpc_h_(params.get_real("box.size_mpc_h")),
      comm_(comm),
      pm_(PmSettings::from_params(params), comm),
      domains_(box_mpc_h_, 1, 0, comm) {
  const std::string backend = params.get_string("gpu.backend");
  if (params.get_string("gravity.solver") == "pm") {
    if (comm.size() > 1 && backend != "cpu")
      log::info("PM: host x slabs over {} ranks (the PM-only force's two interlaced meshes stay on the host)",
                comm.size());
    return;
  }
  // TreePM: PM long range (Gaussian-filtered at r_s) plus the FMM short range (erfc-truncated
  // at r_cut) with P2P on the [gpu] backend; they add up to 1/r^2.
  short_settings_ = short_range_settings(params, nominal_particle_mass(params));
  domains_ = RankDomains(box_mpc_h_, short_settings_.max_leaf, short_settings_.top_levels, comm);
  short_range_.emplace(short_settings_);
  const int device = gpu_device_for_rank(params.get_int("gpu.device"), comm);
  p2p_ = make_p2p_evaluator(backend, device);
  if (comm.size() > 1) {
    // Over ranks the long range's transforms and Fourier work run on each rank's GPU (cuFFT
    // slabs, gpu/pm_cuda_slabs.hpp) unless the backend is "cpu" or a rank has no usable GPU;
    // the host's x slabs otherwise (reproducible line-by-line FFTs; the CUDA step engine makes
    // the same choice). When every rank has
    // one, make_step_engine runs the CUDA step engine instead, on one rank or several.
    std::string why = "[gpu] backend = \"cpu\"";
#if defined(ORBIS_HAVE_CUDA)
    if (backend != "cpu") use_cuda_pm_slabs(pm_, comm, device, &why);
#else
    if (backend != "cpu") why = "this build has no CUDA";
#endif
    if (!pm_.slab_transform()) log::info("PM: host x slabs over {} ranks ({})", comm.size(), why);
  }
  if (std::abs(pm_.settings().r_s_mpc_h - short_settings_.r_s) > 1e-12 * short_settings_.r_s)
    fail("internal: PM and short-range split scales differ ({} vs {})", pm_.settings().r_s_mpc_h, short_settings_.r_s);
}

HostStepEngine::~HostStepEngine() = default;

std::string HostStepEngine::describe() const {
  const auto& pm = pm_.settings();
  if (!short_range_)
    return fmt::format("PM only, {}^3 mesh ({} window, cell {:.4g} Mpc/h), {:.1f} MiB", pm.grid_side,
                       window_name(pm.window), pm.box_mpc_h / pm.grid_side, pm_.bytes() / 1048576.0);
  const ShortRangeSettings& s = short_settings_;
  const std::string pm_where = pm_.slab_transform() ? " on " + pm_.slab_transform()->describe() : std::string();
  return fmt::format("TreePM: PM {}^3 mesh ({}{}), r_s = {:.4g} Mpc/h, r_cut = {:.4g} Mpc/h; FMM theta = {}, "
                     "p = {}, max_leaf = {}; P2P on {} (Taylor order {}, {} nodes), softening {:.4g} Mpc/h",
                     pm.grid_side, window_name(pm.window), pm_where, s.r_s, s.r_cut, s.theta, s.multipole_order, s.max_leaf,
                     p2p_->name(), s.taylor_order, s.taylor_table_size, s.softening);
}

double HostStepEngine::softening() const { return short_range_ ? short_settings_.softening : 0.0; }

void HostStepEngine::load(Particles particles) {
  const std::size_t n = particles.size();
  if (particles.time_bin.empty()) particles.time_bin.assign(n, 0);
  if (particles.time_bin.size() != n)
    fail("step engine: {} time bins for {} particles", particles.time_bin.size(), n);
  for (std::uint8_t bin : particles.time_bin)
    if (bin >= kMaxTimeBins) fail("step engine: time bin {} (bins are 0..{})", bin, kMaxTimeBins - 1);
  if (particles.has_individual_masses())
    fail("step engine: particles of individual masses in a periodic box; the PM, the tree and the outputs of "
         "comoving runs take one particle mass (individual masses are for [gravity] boundary = \"vacuum\")");
  particles_ = std::move(particles);
  acc_long_.assign(n, Vec3d{});
  acc_short_.assign(short_range_ ? n : 0, Vec3d{});
  if (short_range_ && std::abs(units::G * particles_.mass - short_settings_.g_mass) > 1e-12 * short_settings_.g_mass) {
    short_settings_.g_mass = units::G * particles_.mass;   // particles not from this file's grid ICs
    short_range_.emplace(short_settings_);
  }
}

void HostStepEngine::restore_domain_state(const std::string& state, const std::string& what) {
  if (comm_.size() == 1) return StepEngine::restore_domain_state(state, what);
  domains_.restore(state, what);
  work_since_update_ = 0;
}

const std::vector<Vec3d>& HostStepEngine::accelerations() {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(particles_.size());
  acc_total_.resize(acc_long_.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) acc_total_[i] = short_range_ ? acc_long_[i] + acc_short_[i] : acc_long_[i];
  return acc_total_;
}

void HostStepEngine::compute_forces(bool long_range, int min_active_bin, ForceStats& stats) {
  const double comm_before = comm_.stats().seconds;
  forces(long_range, min_active_bin, stats);
  if (comm_.size() > 1) stats.times.add("comm", comm_.stats().seconds - comm_before);
}

void HostStepEngine::forces(bool long_range, int min_active_bin, ForceStats& stats) {
  PhaseTimes pm_times;
  if (!short_range_) {
    if (long_range) pm_.accelerations(particles_.pos, particles_.mass, acc_long_, &pm_times);
    stats.times.add("pm", sum_of(pm_times));
    return;
  }
  // Tree, walk and the start of P2P first: with the CUDA backend the GPU computes P2P while
  // the CPU does the PM and then M2L/L2L/L2P (ShortRangeSolver::begin/end). Steps with all
  // particles active build a new tree; between them only the active particles' forces are
  // computed, on the last tree refitted (refit_tree_; on several ranks while the ghosts
  // are the same particles).
  const bool ranks = comm_.size() > 1;
  // A computation that builds the tree (every one with all particles active; the others
  // refit) wraps the positions into the box first, as drift() does not (see there). Over
  // ranks the same steps wrap (the domains update at PM steps, all particles active), so the
  // forest's positions are the one-rank tree's bit for bit.
  if (!(min_active_bin > 0 && refit_tree_)) wrap_positions(particles_.pos, box_mpc_h_);
  ShortRangeTargets targets;
  if (min_active_bin > 0) {
    targets.bins = &particles_.time_bin;
    targets.min_bin = min_active_bin;
    targets.refit_tree = refit_tree_ && !ranks;   // several ranks: below
  }
  if (ranks) {
    Stopwatch domain_watch;
    if (long_range) {
      domains_.update(particles_, work_since_update_);
      work_since_update_ = 0;
      // Zeroed for the particles in their new order (in parallel: 8.4M a rank at 256^3).
      const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(particles_.size());
      acc_long_.resize(particles_.size());
      acc_short_.resize(particles_.size());
#pragma omp parallel for schedule(static)
      for (std::ptrdiff_t i = 0; i < n; ++i) acc_long_[i] = acc_short_[i] = Vec3d{};
    }
    bool same_sources = false;
    const std::vector<Vec3d>& sources = domains_.with_ghosts(particles_.pos, short_settings_.r_cut, &same_sources);
    stats.times.add("domain", domain_watch.seconds());
    // The rank's tree is a forest of the global tree's depth-d subtrees, its own and the
    // ghosts' (rank_domains.hpp), so its forces are the one-rank run's: bit for bit with the
    // CPU backend, whose sums go in the global tree's order, which the groups' global numbers
    // give (own groups come first, so the forest's own order is not that). Between PM steps
    // the ghosts stay the same groups while they are near enough: refit the forest, as one
    // rank refits its tree; when they were chosen again, a forest of the new groups.
    targets.forest_groups = &domains_.group_offsets();
    targets.forest_group_ids = &domains_.groups();
    targets.refit_tree = min_active_bin > 0 && refit_tree_ && same_sources;
    // Ghosts are never targets (their owners compute their forces), on full steps either:
    // the mask is 1 for this rank's active particles, 0 for the rest and the ghosts.
    const std::ptrdiff_t n_sources = static_cast<std::ptrdiff_t>(sources.size());
    const std::ptrdiff_t n_own = static_cast<std::ptrdiff_t>(particles_.size());
    target_mask_.resize(sources.size());
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t i = 0; i < n_sources; ++i)
      target_mask_[i] = i < n_own && particles_.time_bin[i] >= min_active_bin ? 1 : 0;
    targets.bins = &target_mask_;
    targets.min_bin = 1;
    acc_with_ghosts_.resize(sources.size());
    // A rank that owns no top node (more ranks than nodes, or a heavy neighbour) has no
    // short-range work; it still takes part in the PM.
    if (!sources.empty()) short_range_->begin(sources, *p2p_, targets);
  } else {
    short_range_->begin(particles_.pos, *p2p_, targets);
  }
  if (long_range) {
    pm_.accelerations(particles_.pos, particles_.mass, acc_long_, &pm_times);
    stats.times.add("pm", sum_of(pm_times));
  }
  const bool short_here = !ranks || !acc_with_ghosts_.empty();
  const ShortRangeStats s = short_here ? short_range_->end(ranks ? acc_with_ghosts_ : acc_short_) : ShortRangeStats{};
  if (ranks) {   // the rank's own particles come first; only the targets' entries are new
    const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(particles_.size());
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t i = 0; i < n; ++i)
      if (particles_.time_bin[i] >= min_active_bin) acc_short_[i] = acc_with_ghosts_[i];
    work_since_update_ += s.p2p_interactions + s.m2l_interactions;
  }
  add_short_range_stats(s, stats);
}

void HostStepEngine::kick(const KickPlan& plan) {
  orbis::kick(plan, particles_.time_bin, acc_long_, short_range_ ? &acc_short_ : nullptr, particles_.mom);
}

// With a short-range tree the positions are wrapped where the tree is built (forces()), not
// here: a refitted tree then bounds each leaf by where its particles went, also across a face
// of the box, and a particle that crosses one no longer makes its leaf's box (over ranks its
// top group's, which decides the ghosts) span the whole box. The walk takes images from node
// centres and the kernels positions relative to them, which stay within a few Mpc/h of the
// box; the PM's assignment wraps each position, and particles() hands out wrapped ones.
void HostStepEngine::drift(double drift_factor) {
  orbis::drift(particles_.pos, particles_.mom, drift_factor, short_range_ ? 0.0 : box_mpc_h_);
}

const Particles& HostStepEngine::particles() {
  if (positions_inside(particles_.pos, box_mpc_h_)) return particles_;
  wrapped_ = particles_;
  wrap_positions(wrapped_.pos, box_mpc_h_);
  return wrapped_;
}

double HostStepEngine::max_acceleration() {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(particles_.size());
  double max2 = 0;   // max is exact: the same for any thread count
#pragma omp parallel for schedule(static) reduction(max : max2)
  for (std::ptrdiff_t i = 0; i < n; ++i)
    max2 = std::max(max2, norm2(short_range_ ? acc_long_[i] + acc_short_[i] : acc_long_[i]));
  return std::sqrt(comm_.max(max2));
}

// The PM step's size depends on it (integrate/timestep.hpp, pm_step_dln_a): an exact sum
// (core/exact_sum.hpp), the same bits for any rank and thread count, and the CUDA engine's.
double HostStepEngine::rms_momentum() {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(particles_.size());
  const std::uint64_t total = comm_.sum<std::uint64_t>(static_cast<std::uint64_t>(n));
  double largest = 0;   // max is exact: the same for any thread count
#pragma omp parallel for schedule(static) reduction(max : largest)
  for (std::ptrdiff_t i = 0; i < n; ++i) largest = std::max(largest, norm2(particles_.mom[i]));
  largest = comm_.max(largest);
  if (total == 0 || largest == 0) return 0.0;
  const ExactSumScale scale = exact_sum_scale(largest, total);
  std::uint64_t sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
  for (std::ptrdiff_t i = 0; i < n; ++i) sum += exact_sum_term(norm2(particles_.mom[i]), scale);
  return std::sqrt(exact_sum_value(comm_.sum<std::uint64_t>(sum), scale) / static_cast<double>(total));
}

Vec3d HostStepEngine::total_momentum() {
  Vec3d total;
  for (int d = 0; d < 3; ++d)
    total[d] = comm_.sum(ordered_sum(particles_.size(), [&](std::size_t i) { return particles_.mom[i][d]; }));
  return total;
}

BinCounts HostStepEngine::assign_bins(const BinRule& rule) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(particles_.size());
  std::vector<std::uint8_t>& bins = particles_.time_bin;
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    if (bins[i] < rule.min_active_bin) continue;
    const double g2 = norm2(short_range_ ? acc_long_[i] + acc_short_[i] : acc_long_[i]);
    bins[i] = static_cast<std::uint8_t>(bin_for_acceleration(g2, rule));
  }
  BinCounts counts{};
  for (std::uint8_t bin : bins) ++counts[bin];
  comm_.reduce(counts.data(), counts.size(), Comm::Op::sum);
  return counts;
}

}  // namespace orbis
