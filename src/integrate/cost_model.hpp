// The ETA of the step log from the run's measured cost: the force evaluations still to come
// are predicted from the time bins (exactly for the PM step in progress; for the later PM
// steps from the bins' evaluation rate per unit ln a, grown as it grew over the recent PM
// steps), and priced at the recent wall seconds per evaluation.
#pragma once
#include <cstddef>

#include "integrate/run_state.hpp"

namespace orbis {

// Predicted wall seconds from the state's sync point to ln a = ln_a_end; negative while
// nothing has been measured.
double predicted_remaining_seconds(const RunState& state, double ln_a_end);

}  // namespace orbis
