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

}  // namespace

double predicted_remaining_seconds(const RunState& s, double ln_a_end, const OutputCost& outputs) {
  const std::vector<CostRecord>& h = s.cost_history;
  const std::size_t begin = recent_begin(h, std::log(s.a));
  double seconds = 0, span = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t j = begin; j < h.size(); ++j) {
    if (!(h[j].dln_a > 0 && h[j].seconds > 0)) continue;
    seconds += h[j].seconds, span += h[j].dln_a;
    // ln(seconds per unit ln a) against ln a at the step's middle: the trend's least squares.
    const double x = h[j].ln_a + 0.5 * h[j].dln_a, y = std::log(h[j].seconds / h[j].dln_a);
    sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  if (!(span > 0)) return -1;
  const double n = static_cast<double>(h.size() - begin);
  const double den = n * sxx - sx * sx;
  const double beta = den > 0 ? std::clamp((n * sxy - sx * sy) / den, 0.0, kMaxCostGrowth) : 0.0;
  // The window's mean rate belongs to its mean ln a; grown from there to now.
  const double ln_a = std::log(s.a);
  const double rate = seconds / span * std::exp(beta * (ln_a - sx / n));
  const double left = std::max(0.0, ln_a_end - ln_a);
  const double steps = rate * (beta * left > 1e-9 ? std::expm1(beta * left) / beta : left);
  return steps + std::max(0, outputs.remaining) * std::max(0.0, outputs.seconds_each);
}

}  // namespace orbis
