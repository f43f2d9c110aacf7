// The total force (long + short range) of a particle set from a step engine, as the run's
// first step computes it: load, forces of every particle, accelerations.
#pragma once
#include <vector>

#include "integrate/step_engine.hpp"

namespace orbis::test {

inline std::vector<Vec3d> engine_accelerations(StepEngine& engine, const Particles& particles, ForceStats& stats) {
  engine.load(particles);
  engine.compute_forces(true, 0, stats);
  return engine.accelerations();
}

}  // namespace orbis::test
