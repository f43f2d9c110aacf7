#include "integrate/time_bins.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "cosmology/cosmology.hpp"

namespace orbis {

int first_active_bin(std::uint64_t tick) {
  if (tick % kPmTicks == 0) return 0;
  return kTickBits - __builtin_ctzll(tick);
}

std::uint64_t next_sync_tick(std::uint64_t tick, const BinCounts& counts) {
  std::uint64_t next = kPmTicks;
  for (int k = 0; k <= kDeepestBin; ++k)
    if (counts[k] > 0) next = std::min(next, (tick / bin_ticks(k) + 1) * bin_ticks(k));
  return next;
}

std::uint64_t active_particles(std::uint64_t tick, const BinCounts& counts) {
  std::uint64_t n = 0;
  for (int k = first_active_bin(tick); k < kMaxTimeBins; ++k) n += counts[k];
  return n;
}

int deepest_bin(const BinCounts& counts) {
  for (int k = kMaxTimeBins - 1; k > 0; --k)
    if (counts[k] > 0) return k;
  return 0;
}

double scale_factor_at(double a_begin, double a_end, std::uint64_t tick) {
  if (tick > kPmTicks) fail("internal: tick {} beyond the PM step ({})", tick, kPmTicks);
  if (tick == 0) return a_begin;
  if (tick == kPmTicks) return a_end;
  double lo = a_begin, hi = a_end;
  std::uint64_t t_lo = 0, span = kPmTicks;
  for (;;) {
    span >>= 1;
    const double mid = std::sqrt(lo * hi);
    const std::uint64_t t_mid = t_lo + span;
    if (tick == t_mid) return mid;
    if (tick < t_mid) {
      hi = mid;
    } else {
      lo = mid;
      t_lo = t_mid;
    }
  }
}

KickPlan opening_kicks(const Cosmology& c, double a_begin, double a_end, std::uint64_t tick, int min_active_bin,
                       int deepest, bool long_range) {
  KickPlan plan;
  plan.min_active_bin = min_active_bin;
  const double a = scale_factor_at(a_begin, a_end, tick);
  for (int k = min_active_bin; k <= deepest; ++k)
    plan.short_range[k] = c.kick_factor(a, scale_factor_at(a_begin, a_end, tick + bin_ticks(k) / 2));
  if (long_range) plan.long_range = c.kick_factor(a_begin, scale_factor_at(a_begin, a_end, kPmTicks / 2));
  return plan;
}

KickPlan closing_kicks(const Cosmology& c, double a_begin, double a_end, std::uint64_t tick, int min_active_bin,
                       int deepest, bool long_range) {
  KickPlan plan;
  plan.min_active_bin = min_active_bin;
  const double a = scale_factor_at(a_begin, a_end, tick);
  for (int k = min_active_bin; k <= deepest; ++k)
    plan.short_range[k] = c.kick_factor(scale_factor_at(a_begin, a_end, tick - bin_ticks(k) / 2), a);
  if (long_range) plan.long_range = c.kick_factor(scale_factor_at(a_begin, a_end, kPmTicks / 2), a_end);
  return plan;
}

}  // namespace orbis
