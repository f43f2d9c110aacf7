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
  double mass = 0;                 // every particle's mass, 1e10 Msun/h (with `masses`: their mean)
  // Isolated systems ([gravity] boundary = "vacuum") only: each particle's own mass, in the
  // [units] mass unit, or empty when every particle has `mass` (the readers leave it empty
  // for equal masses). The gravity kernels take masses[i] / mass as weights, with G mass as
  // their constant. Cosmological runs have one mass (the PM, FoF and the writers of
  // comoving runs assume it).
  std::vector<double> masses;
  // GADGET particle type (0..5) of each particle, or empty when all are type 1 (dark matter,
  // the only type of cosmological runs). Kept so that a galaxy's disc, bulge and halo are
  // written back as the types they were read as.
  std::vector<std::uint8_t> type;

  std::size_t size() const { return pos.size(); }
  bool has_individual_masses() const { return !masses.empty(); }
  double mass_of(std::size_t i) const { return masses.empty() ? mass : masses[i]; }
  int type_of(std::size_t i) const { return type.empty() ? 1 : type[i]; }
  // New particles (n above the old size) are in bin 0 (and of mass `mass`, type 1, where
  // those are per particle).
  void resize(std::size_t n) {
    pos.resize(n);
    mom.resize(n);
    id.resize(n);
    time_bin.resize(n);
    if (!masses.empty()) masses.resize(n, mass);
    if (!type.empty()) type.resize(n, 1);
  }
};

}  // namespace orbis
