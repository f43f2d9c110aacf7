// Test-only clustered particle sets for the tree and force tests: a grid displaced by a
// Zel'dovich-like (curl-free, random-phase) field strong enough to form sheets and
// filaments, plus two Plummer haloes, one straddling the box corner (periodic wrap) and one
// compact. Deterministic for a given seed on every platform (own generator).
#pragma once
#include <cstdint>
#include <vector>

#include "core/particles.hpp"
#include "core/vec3.hpp"

namespace orbis::test {

// n_side^3 particles in [0, box): (1 - halo_fraction) of them on the displaced grid (rounded
// to a cube), the rest in the haloes: 2/3 in a Plummer sphere of scale radius
// halo_scale * box across the corner, 1/3 in one of a quarter of that radius. Halo sizes are
// fractions of the box, so a larger n_side resolves the same haloes with more particles.
std::vector<Vec3d> clustered_particles(int n_side, double box, std::uint64_t seed,
                                       double halo_fraction = 0.33, double halo_scale = 1.0 / 32);

// The clustered set as simulation particles of a Planck-like Omega_m = 0.3144 box (equal
// masses, 1e10 Msun/h), ids from 1: what the TreePM-vs-Ewald tests evaluate.
Particles clustered_particle_set(int n_side, double box, std::uint64_t seed);

// Uniform random positions in [0, box).
std::vector<Vec3d> uniform_particles(std::size_t n, double box, std::uint64_t seed);

// The tree builders' tie case: a regular 37 x 41 x 29 grid of spacing 0.5 (longer on y: equal
// coordinates on every axis and equal box sides), shuffled.
std::vector<Vec3d> shuffled_tie_grid(std::uint64_t seed);

}  // namespace orbis::test
