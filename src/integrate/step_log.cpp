#include "integrate/step_log.hpp"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "core/log.hpp"
#include "io/output_guard.hpp"

namespace orbis {
namespace {
std::string duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "?";
  const int s = static_cast<int>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}
}  // namespace

std::string step_line(const StepReport& r) {
  std::string phases;
  if (r.force) {
    for (const auto& [phase, seconds] : r.force->times.all())
      phases += fmt::format(" {} {:.3f}", phase, seconds);
  }
  phases += fmt::format(" io {:.3f}", r.io_seconds);
  std::string interactions;
  if (r.force && r.force->p2p_interactions > 0)
    interactions = fmt::format(" | p2p {:.3g} m2l {:.3g} on {}", r.force->p2p_interactions,
                               r.force->m2l_interactions, r.force->p2p_where);
  int lowest = kMaxTimeBins, deepest = 0;
  for (int k = 0; k < kMaxTimeBins; ++k)
    if (r.bins[k] > 0) lowest = std::min(lowest, k), deepest = k;
  const std::string bins = lowest == deepest || lowest == kMaxTimeBins ? fmt::format("{}", deepest)
                                                                       : fmt::format("{}-{}", lowest, deepest);
  const double n = static_cast<double>(r.particles);
  std::string checks = " | peak host " + (r.host_peak_bytes > 0 ? format_bytes(static_cast<double>(r.host_peak_bytes)) : "?");
  if (r.force && r.force->device_bytes > 0) checks += " device " + format_bytes(static_cast<double>(r.force->device_bytes));
  if (r.momentum_ratio >= 0) checks += fmt::format(" | |sum p|/(N p_rms) {:.2e}", r.momentum_ratio);
  const std::string when = r.comoving ? fmt::format("a {:.6f} z {:8.4f} da {:.3e}", r.a, 1 / r.a - 1, r.da)
                                      : fmt::format("t {:.6g} dt {:.3e}", r.a, r.da);
  return checks.insert(0, fmt::format("step {:5d} {} | active {} bins {} | {:.3f} s:{}{} | {:.3g} part/s | "
                     "evals {:.4g} ({:.1f} full) | ETA {}",
                     r.step, when, r.active, bins, r.seconds, phases, interactions,
                     r.seconds > 0 ? static_cast<double>(r.active) / r.seconds : 0.0, r.particle_steps,
                     n > 0 ? r.particle_steps / n : 0.0, duration(r.eta_seconds)));
}

void print_progress_bar(double progress, double eta_seconds) {
  if (!log::stdout_is_terminal()) return;
  const int width = 40;
  const int filled = static_cast<int>(progress * width + 0.5);
  fmt::print("\r[{}{}] {:5.1f}%  ETA {}   ", std::string(filled, '#'), std::string(width - filled, '.'),
             100 * progress, duration(eta_seconds));
  if (progress >= 1) fmt::print("\n");
  std::fflush(stdout);
}

}  // namespace orbis
