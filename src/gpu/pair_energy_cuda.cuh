// The pair sum of the potential energy diagnostic (fmm/pair_energy.hpp) on the GPU: the
// chaining mesh is built on the host, the particles go up in its cell order, one thread per
// particle sums its half stencil (exact erfc in double), and the host adds the particles'
// sums in cell order, as the CPU version does; over ranks the same ghosts and the same
// ghost_pair_weight rule (fmm/pair_energy.hpp). Transient device memory: 32 bytes per
// particle plus 4 per cell, freed on return.
#pragma once
#include "fmm/pair_energy.hpp"

namespace orbis::gpu {

double pair_potential_sum(const PairPotentialInput& input, int device);

}  // namespace orbis::gpu
