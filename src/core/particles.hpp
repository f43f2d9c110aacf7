// The particle state the run loop owns. Structure of arrays, so that ICs, PM, tree and
// analysis each touch only what they need and the GPU upload is a straight copy.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/vec3.hpp"

namespace orbis {

struct Particles {
  std::vector<Vec3d> pos;          // comoving position, Mpc/h, in [0, box)
  std::vector<Vec3d> mom;          // canonical momentum p = a^2 dx/dt, km/s
  std::vector<std::uint64_t> id;   // 1-based; grid ICs number particles in grid order
  // Time bin k: short-range steps of 2^-k of the PM step (integrate/step_engine.hpp). Either
  // one per particle or empty, which means every particle is in bin 0 (ICs, snapshots:
  // the run loop assigns the bins before its first step).
  std::vector<std::uint8_t> time_bin;
  double mass = 0;                 // every particle's mass, 1e10 Msun/h

  std::size_t size() const { return pos.size(); }
  // New particles (n above the old size) are in bin 0.
  void resize(std::size_t n) { pos.resize(n); mom.resize(n); id.resize(n); time_bin.resize(n); }
};

}  // namespace orbis
