// Mass assignment in 64-bit fixed point: one formula for the host PM (PmSolver), the CUDA PM
// (gpu/pm_cuda_mesh.cuh) and the P(k) estimator (analysis/power_spectrum.cpp).
//
// Each particle adds fixed_point_round(w, 2^S) (core/exact_sum.hpp) to the unsigned 64-bit
// sum of every node of its stencil (w the product of its three window weights, wx wy first,
// then wz). Integer addition is associative: a node's sum is the same bits whatever order the
// particles, threads, atomics or ranks add in. 2^S = fixed_point_scale(N), S = 62 -
// ceil(log2 N), with N the TOTAL particle count (over all ranks: the same S for any
// decomposition); each particle carries weight 1 in all, so a sum stays below 2^62. The sums
// become the density contrast in mesh precision as (sum - mean) * factor, mean = N 2^S / n^3
// (it only feeds k = 0, which every Green's function zeroes and P(k) leaves out, and without
// it a float mesh would round the mean along with the fluctuations), factor = (density of one
// particle) / 2^S. Rounding a weight to 2^-S errs by at most n^3 2^-62 of a cell's mean
// occupancy: 6e-14 on 64^3, 2.3e-10 on 1024^3, below a float mesh's rounding.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/exact_sum.hpp"
#include "core/hostdevice.hpp"

namespace orbis {

// The mean node sum, N 2^S / n^3, for N particles on an n^3 mesh.
inline double pm_fixed_point_mean(std::size_t n_particles, double scale, int n) {
  return static_cast<double>(n_particles) * scale / (static_cast<double>(n) * n * n);
}

// One node's value in the mesh: (sum - mean) * factor.
ORBIS_HD double pm_fixed_to_density(std::uint64_t sum, double mean, double factor) {
  return (static_cast<double>(sum) - mean) * factor;
}

}  // namespace orbis
