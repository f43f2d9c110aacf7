// The potential energy of an isolated system on the device: the softened pair sum
// S = sum_{i<j} 1 / sqrt(|x_i - x_j|^2 + eps^2) of integrate/conservation.hpp (W = -G m^2 S)
// from the device positions, by direct summation in double: the whole check's reference, so
// no tree and no float. Each particle's row sum over every other particle runs in a fixed
// order (tiles of the positions through shared memory), the rows come back and the host adds
// them in order: the same bits run after run. Every pair is summed from both sides (S is half
// the rows' total), which keeps the threads even; 1e12 pair terms (10^6 particles) take about
// a second on an H100-class GPU.
#pragma once
#include <cstddef>

#include <cuda_runtime.h>

namespace orbis::gpu {

// x, y, z: device arrays of n positions; waits for the stream. The scratch (8 bytes a
// particle) comes from the device pool for the call.
// weights: null (one mass), or each particle's weight w_i = m_i / m (device, n; individual
// masses): then S = sum_{i<j} w_i w_j / sqrt(|x_i - x_j|^2 + eps^2), so that W = -G m^2 S
// still (row i is w_i times the sum over j of w_j / s_ij; weights of 1 give the bits of null).
double softened_pair_sum(const double* x, const double* y, const double* z, std::size_t n, double softening,
                         cudaStream_t stream, const double* weights = nullptr);

}  // namespace orbis::gpu
