#include "integrate/time_bins.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

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

}  // namespace orbis
