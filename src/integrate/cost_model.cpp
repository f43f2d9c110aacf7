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

// Growth rate with ln a of ln(count per unit ln a) over history[begin..], count being a
// record's evaluations or sync points: the least-squares slope, never below 0 (the cost per
// unit ln a is not predicted to fall).
template <typename Count>
double growth_rate(const std::vector<CostRecord>& history, std::size_t begin, Count count) {
  const std::size_t n = history.size() - begin;
  if (n < 2) return 0;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t j = begin; j < history.size(); ++j) {
    const CostRecord& r = history[j];
    const double x = r.ln_a + 0.5 * r.dln_a, y = std::log(count(r) / r.dln_a);
    sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  const double den = n * sxx - sx * sx;
  return den > 0 ? std::max(0.0, (n * sxy - sx * sy) / den) : 0.0;
}

// rate * integral over the remaining span of exp(beta (ln a - ln a_0)).
double grown(double rate, double beta, double span) {
  return rate * (beta * span > 1e-9 ? std::expm1(beta * span) / beta : span);
}

struct Prices {
  double per_evaluation = 0, per_sync_point = 0;
};

// seconds = alpha * evaluations + beta * sync points over the records (least squares); when
// that is degenerate (every step the same shape: one global step) or gives a negative price,
// all of the cost per evaluation.
Prices fit_prices(const std::vector<const CostRecord*>& records) {
  double a11 = 0, a12 = 0, a22 = 0, b1 = 0, b2 = 0, seconds = 0, evaluations = 0;
  for (const CostRecord* r : records) {
    a11 += r->particle_steps * r->particle_steps;
    a12 += r->particle_steps * r->sync_points;
    a22 += r->sync_points * r->sync_points;
    b1 += r->particle_steps * r->seconds;
    b2 += r->sync_points * r->seconds;
    seconds += r->seconds;
    evaluations += r->particle_steps;
  }
  Prices p;
  const double det = a11 * a22 - a12 * a12;
  if (det > 1e-6 * a11 * a22) {
    p.per_evaluation = (b1 * a22 - b2 * a12) / det;
    p.per_sync_point = (a11 * b2 - a12 * b1) / det;
    if (p.per_evaluation >= 0 && p.per_sync_point >= 0) return p;
  }
  return Prices{evaluations > 0 ? seconds / evaluations : 0, 0};
}

}  // namespace

double predicted_remaining_seconds(const RunState& s, double ln_a_end) {
  // The PM step in progress, from the bins: evaluations and sync points left, and per step.
  double evaluations_left = 0, evaluations_per_step = 0;
  int deepest = 0;
  const std::uint64_t tick = std::min(s.tick, kPmTicks);
  for (int k = 0; k < kMaxTimeBins; ++k) {
    if (s.bins[k] == 0) continue;
    const int bin = std::min(k, kTickBits);
    deepest = std::max(deepest, bin);
    const double n = static_cast<double>(s.bins[k]);
    const double ends = static_cast<double>(std::uint64_t{1} << bin);
    evaluations_left += n * (ends - static_cast<double>(tick / bin_ticks(bin)));
    evaluations_per_step += n * ends;
  }
  const double syncs_per_step = static_cast<double>(std::uint64_t{1} << deepest);
  const double syncs_left = syncs_per_step - static_cast<double>(tick / bin_ticks(deepest));
  const double dln_pm = std::log(s.pm_a_end / s.pm_a_begin);
  if (!(dln_pm > 0)) return -1;

  // The later PM steps: the current rates per unit ln a, grown as over the recent steps.
  const double ln_a_now = std::log(s.a);
  const std::size_t begin = recent_begin(s.cost_history, ln_a_now);
  const double span = std::max(0.0, ln_a_end - std::log(s.pm_a_end));
  evaluations_left += grown(evaluations_per_step / dln_pm,
                            growth_rate(s.cost_history, begin, [](const CostRecord& r) { return r.particle_steps; }),
                            span);
  const double syncs_later = grown(syncs_per_step / dln_pm,
                                   growth_rate(s.cost_history, begin, [](const CostRecord& r) { return r.sync_points; }),
                                   span);

  // Prices from the recent PM steps (and the one in progress, once it has a sync point).
  std::vector<const CostRecord*> records;
  for (std::size_t j = begin; j < s.cost_history.size(); ++j) records.push_back(&s.cost_history[j]);
  if (s.pm_cost.sync_points > 0) records.push_back(&s.pm_cost);
  if (records.empty()) return -1;
  const Prices p = fit_prices(records);
  return p.per_evaluation * evaluations_left + p.per_sync_point * (syncs_left + syncs_later);
}

}  // namespace orbis
