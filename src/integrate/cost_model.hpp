// The ETA of the step log from the run's measured cost: the wall seconds of the steps per
// unit ln a, measured over the recent PM steps (the last half of the ln a run so far, at least
// the last 3) and grown as they grew there (a least-squares exponential trend in ln a, at most
// e^kMaxCostGrowth per unit ln a, never falling), integrated to the end; plus the outputs still
// to come times the measured seconds of one output (before the first one, an estimate).
// Measuring seconds rather than counting force evaluations keeps what evaluations miss: the
// fixed cost of each sync point, which grows as the bins deepen, and the PM steps.
#pragma once
#include <cstddef>

#include "integrate/run_state.hpp"

namespace orbis {

// The cost per unit ln a grows at most e^kMaxCostGrowth per unit ln a in the prediction:
// measured on a 256^3 run (the cost per ln a grew 5x between z = 8 and z = 0.5 and then
// flattened), an unbounded trend from the growth phase over-predicts the flat end by ~40%.
constexpr double kMaxCostGrowth = 0.5;

struct OutputCost {
  int remaining = 0;          // outputs still to be written
  double seconds_each = 0;    // measured mean of those written, or an estimate
};

// Predicted wall seconds from the state's sync point to ln a = ln_a_end; negative while no
// PM step has been measured.
double predicted_remaining_seconds(const RunState& state, double ln_a_end, const OutputCost& outputs);

}  // namespace orbis
