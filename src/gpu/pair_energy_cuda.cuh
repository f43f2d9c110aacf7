// The pair sum of the potential energy diagnostic (fmm/pair_energy.hpp) on the GPU: one thread
// per particle, in the chaining mesh's cell order, sums its half stencil (exact erfc in
// double); the particles' sums are added in a fixed order (blocks of consecutive particles
// reduced on the device in a fixed tree, the blocks' sums in order on the host), so the result
// is the same bits from run to run. One kernel serves both entries:
//   - pair_potential_sum: host positions (the P2P evaluator's, over ranks with ghosts and the
//     same ghost_pair_weight rule as the CPU): the chaining mesh is built on the host
//     (ChainingMesh) and the particles go up in its cell order. Transient device memory: 32
//     bytes per particle plus 4 per cell, freed on return.
//   - pair_potential_sum_device: positions already in device memory (the CUDA step engine's:
//     on one rank its state, over ranks its forest's own particles and ghosts, each wrapped into
//     the box as it is read): the cells are found, sorted (a stable radix sort: within a cell
//     the particles keep their order, as in ChainingMesh) and indexed on the device, so nothing
//     per particle crosses the bus. The same cell order as the host's mesh, hence the same
//     per-particle sums and the same total as pair_potential_sum for the same positions.
//     Transient memory from the device pool on `stream` (pair_potential_sum_device_bytes),
//     given back on return.
#pragma once
#include <cstddef>

#include <cuda_runtime.h>

#include "fmm/pair_energy.hpp"

namespace orbis::gpu {

double pair_potential_sum(const PairPotentialInput& input, int device);

// The sum over the n particles at (x[p], y[p], z[p]) (device memory, x | y | z, any
// coordinates: wrapped into [0, rule.box) as read) with rule's box, r_s, cut and softening
// (rule.positions is not read); the last rule.ghosts of them are other ranks' particles (this
// rank's share then, as pair_potential_sum's). On the current device, queued on `stream`;
// waits for the result.
double pair_potential_sum_device(const double* x, const double* y, const double* z, std::size_t n,
                                 const PairPotentialInput& rule, cudaStream_t stream);
// The most device memory pair_potential_sum_device holds at once for n particles (bytes).
std::size_t pair_potential_sum_device_bytes(std::size_t n, double box, double cut);

}  // namespace orbis::gpu
