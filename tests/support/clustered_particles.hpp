// Test-only clustered particle sets for the tree and force tests: a grid displaced by a
// Zel'dovich-like (curl-free, random-phase) field strong enough to form sheets and
// filaments, plus two Plummer haloes, one straddling the box corner (periodic wrap) and one
// compact. Deterministic for a given seed on every platform (own generator).
#pragma once
#include <cstdint>
#include <vector>

#include "core/vec3.hpp"

namespace orbis::test {

// n_side^3 particles in [0, box): (1 - halo_fraction) of them on the displaced grid (rounded
// to a cube), the rest in the haloes. Halo scale radii are fractions of the mean spacing.
std::vector<Vec3d> clustered_particles(int n_side, double box, std::uint64_t seed,
                                       double halo_fraction = 0.33);

// Uniform random positions in [0, box).
std::vector<Vec3d> uniform_particles(std::size_t n, double box, std::uint64_t seed);

}  // namespace orbis::test
