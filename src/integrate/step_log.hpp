// One log line per step (DESIGN.md "Parameters and CLI"): step, a, z, Delta a, time per
// phase, interactions, particles per second, ETA; plus a progress bar on a terminal.
#pragma once
#include <cstddef>
#include <string>

#include "integrate/gravity.hpp"

namespace orbis {

struct StepReport {
  int step = 0;
  double a = 0, da = 0;
  double seconds = 0;            // wall time of the whole step
  std::size_t particles = 0;
  double progress = 0;           // fraction of ln(a_end / a_begin) done
  double elapsed = 0;            // wall seconds since the first step
  const ForceStats* force = nullptr;
  double io_seconds = 0;
};

std::string step_line(const StepReport& report);
void print_progress_bar(double progress, double eta_seconds);   // only on a terminal

}  // namespace orbis
