// One log line per step (sync point): step, a, z, Delta a, time per phase, interactions, the
// active particles and the populated time bins, the force evaluations so far, particles per
// second and the ETA; plus a progress bar on a terminal.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "integrate/step_engine.hpp"

namespace orbis {

struct StepReport {
  std::int64_t step = 0;
  double a = 0, da = 0;
  double seconds = 0;            // wall time of the whole step
  std::size_t particles = 0;
  std::uint64_t active = 0;      // particles whose forces this step computed
  BinCounts bins{};              // particles per time bin after the step
  double particle_steps = 0;     // force evaluations since the start
  double elapsed = 0;            // wall seconds since the run started
  double eta_seconds = -1;       // predicted remaining wall time (negative: unknown)
  const ForceStats* force = nullptr;
  double io_seconds = 0;
};

std::string step_line(const StepReport& report);
void print_progress_bar(double progress, double eta_seconds);   // only on a terminal

}  // namespace orbis
