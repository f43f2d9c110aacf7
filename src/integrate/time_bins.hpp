// The integer time line of block steps (step_engine.hpp): a PM step is kPmTicks ticks, bin k's
// step 2^-k of it (bin_ticks(k)), so every sync point is an exact integer and bins stay
// nested. The scale factor at a tick interpolates ln a linearly over the PM step.
#pragma once
#include <cstdint>

#include "integrate/step_engine.hpp"

namespace orbis {

constexpr int kTickBits = kMaxTimeBins - 1;
constexpr std::uint64_t kPmTicks = std::uint64_t{1} << kTickBits;
// The deepest bin: its half step is still a whole number of ticks.
constexpr int kDeepestBin = kTickBits - 1;

constexpr std::uint64_t bin_ticks(int bin) { return kPmTicks >> bin; }

// The coarsest bin whose steps end at `tick` (0 at the PM step's ends, 0 < tick <= kPmTicks):
// the particles active there are those with bin >= this.
int first_active_bin(std::uint64_t tick);
// The first tick after `tick` at which the step of a populated bin ends (kPmTicks at most).
std::uint64_t next_sync_tick(std::uint64_t tick, const BinCounts& counts);
// Particles active at `tick` (bin >= first_active_bin(tick)).
std::uint64_t active_particles(std::uint64_t tick, const BinCounts& counts);
// The deepest populated bin (0 when none).
int deepest_bin(const BinCounts& counts);

// The scale factor at `tick` of the PM step from a_begin to a_end: a_begin (a_end /
// a_begin)^(tick / kPmTicks), by repeated geometric midpoints, so that it is exactly a_begin,
// a_end at the ends and sqrt(a_begin a_end) half way (a global step's half kick).
double scale_factor_at(double a_begin, double a_end, std::uint64_t tick);

}  // namespace orbis
