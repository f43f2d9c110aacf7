// One log line per step (sync point): step, a, z, Delta a, time per phase, interactions, the
// active particles and the populated time bins, the force evaluations so far, particles per
// second and the ETA; at the end of a PM step the total momentum relative to N p_rms (gravity
// conserves it: it stays at the level of rounding and of the forces' asymmetry); the peak
// host memory of the step (and the engine's device memory where it reports it); plus a
// progress bar on a terminal.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "integrate/step_engine.hpp"

namespace orbis {

struct StepReport {
  std::int64_t step = 0;
  double a = 0, da = 0;          // the run clock's variable and its step (comoving: a; else the time t)
  bool comoving = true;
  double seconds = 0;            // wall time of the whole step
  std::size_t particles = 0;
  std::uint64_t active = 0;      // particles whose forces this step computed
  BinCounts bins{};              // particles per time bin after the step
  double particle_steps = 0;     // force evaluations since the start
  double elapsed = 0;            // wall seconds since the run started
  double eta_seconds = -1;       // predicted remaining wall time (negative: unknown)
  const ForceStats* force = nullptr;
  double io_seconds = 0;
  double momentum_ratio = -1;        // |sum p| / (N p_rms) at a PM step's end; negative: not measured
  std::uint64_t host_peak_bytes = 0; // peak resident set during the step (0: unknown)
};

std::string step_line(const StepReport& report);
void print_progress_bar(double progress, double eta_seconds);   // only on a terminal

}  // namespace orbis
