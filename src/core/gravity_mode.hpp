// [gravity] boundary and solver read together: the schema checks each key alone, this checks
// that they go together, so every consumer sees one consistent choice.
//   periodic: pm (particle mesh only) or treepm (PM long range + FMM short range);
//   vacuum:   fmm (the FMM alone, untruncated 1/r over the whole tree) or direct (every pair).
#pragma once

namespace orbis {

class Params;

enum class Boundary { periodic, vacuum };
enum class GravitySolver { pm, treepm, fmm, direct };

struct GravityMode {
  Boundary boundary = Boundary::periodic;
  GravitySolver solver = GravitySolver::treepm;
  bool periodic() const { return boundary == Boundary::periodic; }
};

// Fails (orbis::Error) naming both keys, where they were set and what would do, when the
// solver does not serve the boundary.
GravityMode gravity_mode(const Params& params);

}  // namespace orbis
