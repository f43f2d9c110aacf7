// An isolated system's softened potentials on the device: for every particle
// phi~_i = sum_{j != i} w_j / sqrt(|x_i - x_j|^2 + eps^2) (integrate/conservation.hpp: the
// snapshots' Potential is -G m phi~_i, and W = -G m^2 S with S = sum_i w_i phi~_i / 2), from
// the device positions, by direct summation in double: the conservation check's reference,
// so no tree and no float. Each particle's row runs over every other particle in a fixed
// order (tiles of the positions through shared memory): the same bits run after run. 1e12
// pair terms (10^6 particles) take about a second on an H100-class GPU.
#pragma once
#include <cstddef>
#include <vector>

#include <cuda_runtime.h>

namespace orbis::gpu {

// x, y, z: device arrays of n positions; returns phi~ in their order (waits for the stream).
// The scratch (8 bytes a particle) comes from the device pool for the call. weights: null
// (one mass: w = 1), or each particle's weight w_j = m_j / m (device, n; individual masses),
// each term's product rounded before the sum (w = 1 gives the bits of null).
std::vector<double> softened_potentials(const double* x, const double* y, const double* z, std::size_t n,
                                        double softening, cudaStream_t stream, const double* weights = nullptr);

}  // namespace orbis::gpu
