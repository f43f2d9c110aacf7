#include "integrate/gravity.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/error.hpp"
#include "core/params.hpp"
#include "core/units.hpp"
#include "fmm/p2p.hpp"
#include "fmm/short_range.hpp"
#include "pm/pm_solver.hpp"

namespace orbis {
namespace {

double sum_of(const PhaseTimes& times) {
  double total = 0;
  for (const auto& [phase, seconds] : times.all()) total += seconds;
  return total;
}

// PM only: the whole force from the mesh (gravity.solver = "pm").
class PmGravity : public GravitySolver {
 public:
  explicit PmGravity(const PmSettings& settings) : pm_(settings) {}
  void accelerations(const Particles& particles, std::vector<Vec3d>& acc, ForceStats& stats) override {
    PhaseTimes pm_times;
    pm_.accelerations(particles.pos, particles.mass, acc, &pm_times);
    stats.times.add("pm", sum_of(pm_times));
  }
  std::string describe() const override {
    const auto& s = pm_.settings();
    return fmt::format("PM only, {}^3 mesh ({} window, cell {:.4g} Mpc/h), {:.1f} MiB", s.grid_side,
                       window_name(s.window), s.box_mpc_h / s.grid_side, pm_.bytes() / 1048576.0);
  }

 private:
  PmSolver pm_;
};

// The particle mass a parameter file implies: all matter in N^3 equal particles.
double nominal_particle_mass(const Params& params) {
  const double box = params.get_real("box.size_mpc_h");
  const double n = static_cast<double>(params.get_int("box.particles_per_side"));
  return params.get_real("cosmology.omega_m") * units::rho_crit0 * box * box * box / (n * n * n);
}

// TreePM (gravity.solver = "treepm"): PM long range (Gaussian-filtered at r_s) plus the FMM
// short range (erfc-truncated at r_cut) with P2P on the [gpu] backend; they add up to 1/r^2.
class TreePmGravity : public GravitySolver {
 public:
  explicit TreePmGravity(const Params& params)
      : pm_(PmSettings::from_params(params)),
        settings_(short_range_settings(params, nominal_particle_mass(params))),
        short_range_(settings_),
        p2p_(make_p2p_evaluator(params.get_string("gpu.backend"), static_cast<int>(params.get_int("gpu.device")))) {
    if (std::abs(pm_.settings().r_s_mpc_h - settings_.r_s) > 1e-12 * settings_.r_s)
      fail("internal: PM and short-range split scales differ ({} vs {})", pm_.settings().r_s_mpc_h, settings_.r_s);
  }

  void accelerations(const Particles& particles, std::vector<Vec3d>& acc, ForceStats& stats) override {
    if (std::abs(units::G * particles.mass - settings_.g_mass) > 1e-12 * settings_.g_mass) {
      settings_.g_mass = units::G * particles.mass;   // particles not from this file's grid ICs
      short_range_ = ShortRangeSolver(settings_);
    }
    // Tree, walk and the start of P2P first: with the CUDA backend the GPU computes P2P
    // while the CPU does the PM and then M2L/L2L/L2P (ShortRangeSolver::begin/end).
    short_range_.begin(particles.pos, *p2p_);
    PhaseTimes pm_times;
    pm_.accelerations(particles.pos, particles.mass, acc, &pm_times);
    stats.times.add("pm", sum_of(pm_times));
    const ShortRangeStats s = short_range_.end(short_acc_);
    const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(acc.size());
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t i = 0; i < n; ++i) acc[i] += short_acc_[i];
    stats.times.add("tree", s.tree_seconds + s.multipole_seconds);
    stats.times.add("walk", s.walk_seconds);
    stats.times.add("m2l", s.m2l_seconds);
    stats.times.add("p2p", s.p2p_seconds);
    stats.p2p_interactions += s.p2p_interactions;
    stats.m2l_interactions += s.m2l_interactions;
    stats.p2p_where = s.p2p_where;
  }

  std::string describe() const override {
    const auto& pm = pm_.settings();
    return fmt::format("TreePM: PM {}^3 mesh ({}), r_s = {:.4g} Mpc/h, r_cut = {:.4g} Mpc/h; FMM theta = {}, "
                       "p = {}, max_leaf = {}; P2P on {} (Taylor order {}, {} nodes), softening {:.4g} Mpc/h",
                       pm.grid_side, window_name(pm.window), settings_.r_s, settings_.r_cut, settings_.theta,
                       settings_.multipole_order, settings_.max_leaf, p2p_->name(), settings_.taylor_order,
                       settings_.taylor_table_size, settings_.softening);
  }
  double softening() const override { return settings_.softening; }

 private:
  PmSolver pm_;
  ShortRangeSettings settings_;
  ShortRangeSolver short_range_;
  std::unique_ptr<P2PEvaluator> p2p_;
  std::vector<Vec3d> short_acc_;
};

}  // namespace

std::unique_ptr<GravitySolver> make_gravity_solver(const Params& params) {
  const std::string& solver = params.get_string("gravity.solver");
  if (solver == "pm") return std::make_unique<PmGravity>(PmSettings::from_params(params));
  return std::make_unique<TreePmGravity>(params);
}

}  // namespace orbis
