#include "integrate/cost_model.hpp"

#include <algorithm>
#include <cmath>

namespace orbis {
namespace {

// The recent PM steps: those of the last half of the ln a run so far (at least the last 3).
std::size_t recent_begin(const std::vector<CostRecord>& history, double ln_a_now) {
  if (history.empty()) return 0;
  const double cut = ln_a_now - 0.5 * (ln_a_now - history.front().ln_a);
  std::size_t begin = history.size();
  while (begin > 0 && history[begin - 1].ln_a >= cut) --begin;
  return std::min(begin, history.size() >= 3 ? history.size() - 3 : std::size_t{0});
}

// Growth rate of ln(evaluations per unit ln a) with ln a over history[begin..]: the
// least-squares slope, never below 0 (the cost per unit ln a is not predicted to fall).
double growth_rate(const std::vector<CostRecord>& history, std::size_t begin) {
  const std::size_t n = history.size() - begin;
  if (n < 2) return 0;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t j = begin; j < history.size(); ++j) {
    const CostRecord& r = history[j];
    const double x = r.ln_a + 0.5 * r.dln_a, y = std::log(r.particle_steps / r.dln_a);
    sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  const double den = n * sxx - sx * sx;
  return den > 0 ? std::max(0.0, (n * sxy - sx * sy) / den) : 0.0;
}

}  // namespace

double predicted_remaining_seconds(const RunState& s, double ln_a_end) {
  // Evaluations left in the PM step in progress, and its rate per unit ln a, from the bins.
  double left_now = 0, per_pm_step = 0;
  for (int k = 0; k < kMaxTimeBins; ++k) {
    const double n = static_cast<double>(s.bins[k]);
    const double ends = static_cast<double>(std::uint64_t{1} << std::min(k, kTickBits));
    left_now += n * (ends - static_cast<double>(std::min(s.tick, kPmTicks) / bin_ticks(std::min(k, kTickBits))));
    per_pm_step += n * ends;
  }
  const double dln_pm = std::log(s.pm_a_end / s.pm_a_begin);
  if (!(dln_pm > 0)) return -1;
  const double rate = per_pm_step / dln_pm;
  const double ln_a_now = std::log(s.a);
  const std::size_t begin = recent_begin(s.cost_history, ln_a_now);
  const double beta = growth_rate(s.cost_history, begin);
  const double span = std::max(0.0, ln_a_end - std::log(s.pm_a_end));
  const double left_later = rate * (beta * span > 1e-9 ? std::expm1(beta * span) / beta : span);

  // Seconds per evaluation: the recent PM steps and the one in progress.
  double seconds = s.pm_cost.seconds, evaluations = s.pm_cost.particle_steps;
  for (std::size_t j = begin; j < s.cost_history.size(); ++j)
    seconds += s.cost_history[j].seconds, evaluations += s.cost_history[j].particle_steps;
  if (!(evaluations > 0)) return -1;
  return seconds / evaluations * (left_now + left_later);
}

}  // namespace orbis
