// Every rank's particles on one rank, in id order: the same arrays a one-rank run holds, for
// the snapshots of a run on several ranks (written by rank 0 until they are written in
// shares; power spectra and halo catalogues are measured across ranks). The gathering rank
// needs the memory of the whole particle set.
#pragma once
#include <vector>

#include "core/comm.hpp"
#include "core/particles.hpp"
#include "core/vec3.hpp"

namespace orbis {

struct GatheredParticles {
  Particles particles;           // on root: everyone's, sorted by id; elsewhere empty
  std::vector<Vec3d> values;     // values[i] travelled with particle i (empty if none given)
};

// Collective. `values`: one per local particle, or empty.
GatheredParticles gather_particles(const Particles& local, const std::vector<Vec3d>& values, const Comm& comm,
                                   int root = 0);

}  // namespace orbis
