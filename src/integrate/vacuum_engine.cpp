#include "integrate/vacuum_engine.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/ordered_sum.hpp"
#include "core/params.hpp"
#include "core/physical_units.hpp"
#include "integrate/conservation.hpp"
#include "integrate/time_bins.hpp"

namespace orbis {

VacuumStepEngine::VacuumStepEngine(const Params& params, const Comm& comm)
    : solver_(params.get_string("gravity.solver")), g_(physical_units(params).g) {
  if (comm.size() > 1)
    fail("{} = \"vacuum\" runs on one MPI rank (this run has {}): its particles are not spread over rank domains yet",
         params.describe("gravity.boundary"), comm.size());
  settings_ = vacuum_short_range_settings(params);   // load() sets G m
  p2p_ = make_p2p_evaluator(params.get_string("gpu.backend"), gpu_device_for_rank(params.get_int("gpu.device"), comm));
}

VacuumStepEngine::~VacuumStepEngine() = default;

std::string VacuumStepEngine::describe() const {
  return fmt::format("vacuum ({}): {}; P2P on {} ({}), Plummer softening {:.4g}, G = {:.6g}", solver_,
                     solver_ == "direct" ? "every pair in P2P (theta = 0)"
                                         : fmt::format("FMM theta = {}, p = {}, max_leaf = {}", settings_.theta,
                                                       settings_.multipole_order, settings_.max_leaf),
                     p2p_->name(), settings_.p2p_double ? "double" : "float", settings_.softening, g_);
}

void VacuumStepEngine::load(Particles particles) {
  const std::size_t n = particles.size();
  if (n == 0) fail("vacuum step engine: no particles");
  if (particles.time_bin.empty()) particles.time_bin.assign(n, 0);
  if (particles.time_bin.size() != n) fail("step engine: {} time bins for {} particles", particles.time_bin.size(), n);
  for (std::uint8_t bin : particles.time_bin)
    if (bin >= kMaxTimeBins) fail("step engine: time bin {} (bins are 0..{})", bin, kMaxTimeBins - 1);
  if (!particles.masses.empty() && particles.masses.size() != n)
    fail("vacuum step engine: {} masses for {} particles", particles.masses.size(), n);
  if (!particles.masses.empty() && !p2p_->accepts_weights())
    fail("vacuum step engine: particles of individual masses need P2P on the CPU here ([gpu] backend = \"cpu\"), "
         "or the CUDA step engine; the '{}' P2P evaluator takes one mass",
         p2p_->name());
  particles_ = std::move(particles);
  weights_ = mass_weights(particles_);
  acc_.assign(n, Vec3d{});
  settings_.g_mass = g_ * particles_.mass;
  tree_.emplace(settings_);
}

void VacuumStepEngine::compute_forces(bool, int min_active_bin, ForceStats& stats) {
  ShortRangeTargets targets;
  if (min_active_bin > 0) {
    targets.bins = &particles_.time_bin;
    targets.min_bin = min_active_bin;
    targets.refit_tree = true;   // between full steps, the last tree refitted (the host engine's choice)
  }
  tree_->begin(particles_.pos, *p2p_, targets, weights_.empty() ? nullptr : &weights_);
  const ShortRangeStats s = tree_->end(acc_);
  add_short_range_stats(s, stats);
}

// All of the force is kicked on the bins; the PM step's long-range factor has nothing to kick.
void VacuumStepEngine::kick(const KickPlan& plan) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(particles_.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    const int bin = particles_.time_bin[i];
    if (bin >= plan.min_active_bin) particles_.mom[i] += acc_[i] * plan.short_range[bin];
  }
}

void VacuumStepEngine::drift(double drift_factor) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(particles_.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) particles_.pos[i] += particles_.mom[i] * drift_factor;
}

double VacuumStepEngine::max_acceleration() {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(particles_.size());
  double max2 = 0;
#pragma omp parallel for schedule(static) reduction(max : max2)
  for (std::ptrdiff_t i = 0; i < n; ++i) max2 = std::max(max2, norm2(acc_[i]));
  return std::sqrt(max2);
}

double VacuumStepEngine::rms_momentum() {
  const std::size_t n = particles_.size();
  if (n == 0) return 0;
  return std::sqrt(ordered_sum(n, [&](std::size_t i) { return norm2(particles_.mom[i]); }) / static_cast<double>(n));
}

Vec3d VacuumStepEngine::total_momentum() {
  Vec3d total;
  for (int d = 0; d < 3; ++d)
    total[d] = ordered_sum(particles_.size(), [&](std::size_t i) {
      return weights_.empty() ? particles_.mom[i][d] : weights_[i] * particles_.mom[i][d];
    });
  return total;
}

BinCounts VacuumStepEngine::assign_bins(const BinRule& rule) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(particles_.size());
  std::vector<std::uint8_t>& bins = particles_.time_bin;
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    if (bins[i] < rule.min_active_bin) continue;
    bins[i] = static_cast<std::uint8_t>(bin_for_acceleration(norm2(acc_[i]), rule));
  }
  BinCounts counts{};
  for (std::uint8_t bin : bins) ++counts[bin];
  return counts;
}

}  // namespace orbis
