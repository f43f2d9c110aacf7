// The ETA of the step log from the run's measured cost. A sync point costs a fixed part
// (drifting every particle, refitting the tree, the walk's and the far field's passes) plus a
// part per active particle: seconds = alpha * evaluations + beta * sync points, alpha and
// beta fitted by least squares to the recent PM steps. What remains is predicted from the
// time bins: exactly for the PM step in progress (the evaluations and sync points its bins
// still make); for the later PM steps from the current bins' rates per unit ln a, grown as
// they grew over the recent PM steps (the bins deepen as structure forms).
#pragma once
#include <cstddef>

#include "integrate/run_state.hpp"

namespace orbis {

// Predicted wall seconds from the state's sync point to ln a = ln_a_end; negative while
// nothing has been measured.
double predicted_remaining_seconds(const RunState& state, double ln_a_end);

}  // namespace orbis
