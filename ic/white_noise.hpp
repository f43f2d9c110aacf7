// Gaussian white noise on the particle grid from a counter-based generator: the value at
// grid point (ix, iy, iz) is a pure function of (seed, ix, iy, iz), so the ICs are the same
// for any number of threads or MPI ranks, and any slab can be filled on its own.
//   Philox4x32-10 (Salmon, Moraes, Dror & Shaw 2011, "Parallel random numbers: as easy as
//   1, 2, 3"), counter = (ix, iy, iz, 0), key = (low, high 32 bits of the seed)
//   -> two 53-bit uniforms u1, u2 in (0, 1] -> Box-Muller: sqrt(-2 ln u1) cos(2 pi u2).
#pragma once
#include <array>
#include <cstdint>

namespace orbis {

template <typename Real> class FftMesh;

namespace ic {

using Philox4x32 = std::array<std::uint32_t, 4>;

// One Philox4x32-10 block (the Random123 reference algorithm).
Philox4x32 philox4x32_10(Philox4x32 counter, std::array<std::uint32_t, 2> key);

// Uniform in (0, 1] from 64 random bits (53 of them used): never 0, so log() is safe.
inline double uniform_open0(std::uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

// Unit-variance Gaussian deviate at grid point (ix, iy, iz) for `seed`.
double white_noise(std::uint64_t seed, std::uint32_t ix, std::uint32_t iy, std::uint32_t iz);

// Fills the real part of `mesh` (its local x slab) with white_noise(seed, ix, iy, iz).
void fill_white_noise(FftMesh<double>& mesh, std::uint64_t seed);

}  // namespace ic
}  // namespace orbis
