// The integer time line of block steps (integrate/time_bins.hpp) and the bin rule
// (integrate/step_engine.hpp), against values worked out by hand.
#include <doctest/doctest.h>

#include <cmath>

#include "integrate/step_engine.hpp"
#include "integrate/time_bins.hpp"

using namespace orbis;

TEST_CASE("sync points: the coarsest active bin and the next tick of the populated bins") {
  CHECK(first_active_bin(kPmTicks) == 0);
  CHECK(first_active_bin(kPmTicks / 2) == 1);
  CHECK(first_active_bin(kPmTicks / 4 * 3) == 2);
  CHECK(first_active_bin(1) == kTickBits);
  BinCounts counts{};
  counts[0] = 10;
  counts[3] = 5;
  CHECK(next_sync_tick(0, counts) == bin_ticks(3));
  CHECK(next_sync_tick(bin_ticks(3) * 7, counts) == kPmTicks);
  CHECK(active_particles(bin_ticks(3), counts) == 5);
  CHECK(active_particles(kPmTicks, counts) == 15);
  CHECK(deepest_bin(counts) == 3);
  counts[3] = 0;
  counts[1] = 2;   // from tick 3/8 the next end of bin 1 is at 1/2
  CHECK(next_sync_tick(bin_ticks(3) * 3, counts) == kPmTicks / 2);
}

TEST_CASE("scale factor at a tick: exact ends, geometric midpoints, ln a linear in the tick") {
  const double a0 = 0.02, a1 = 0.0213;
  CHECK(scale_factor_at(a0, a1, 0) == a0);
  CHECK(scale_factor_at(a0, a1, kPmTicks) == a1);
  CHECK(scale_factor_at(a0, a1, kPmTicks / 2) == std::sqrt(a0 * a1));
  for (std::uint64_t t : {std::uint64_t{1}, kPmTicks / 8 * 3, kPmTicks - 12345}) {
    const double expected = a0 * std::pow(a1 / a0, static_cast<double>(t) / static_cast<double>(kPmTicks));
    CHECK(std::abs(scale_factor_at(a0, a1, t) / expected - 1) < 1e-14);
  }
}

TEST_CASE("bin rule: bin k holds |g| <= acc_bin0 4^k, clamped to [min_active_bin, max_bin]") {
  BinRule rule;
  rule.acc_bin0 = 2.0;
  CHECK(bin_for_acceleration(4.0, rule) == 0);           // |g| = 2: bin 0 exactly
  CHECK(bin_for_acceleration(4.0001, rule) == 1);
  CHECK(bin_for_acceleration(64.0, rule) == 1);          // |g| = 8 = 2 * 4
  CHECK(bin_for_acceleration(64.01, rule) == 2);
  CHECK(bin_for_acceleration(1e300, rule) == rule.max_bin);
  rule.min_active_bin = 3;
  CHECK(bin_for_acceleration(1.0, rule) == 3);
  rule.max_bin = 4;
  CHECK(bin_for_acceleration(1e10, rule) == 4);
  BinRule none;   // no criterion: every particle to min_active_bin
  none.min_active_bin = 2;
  CHECK(bin_for_acceleration(1e10, none) == 2);
}
