// The Fourier-space passes of the CUDA PM (gpu/pm_cuda.hpp) over R2C meshes of n x n x (n/2+1)
// complex values, with the per-mode arithmetic of the CPU path (pm/pm_modes.hpp,
// pm/interlaced_influence.hpp's principal_wavevector): the Green's function in place, then
// one gradient component at a time into the work mesh; and the long-range potential energy's
// sum over the modes. `Complex` is float2 or double2.
#pragma once
#include <cuda_runtime.h>

#include "pm/pm_modes.hpp"

namespace orbis::gpu {

template <typename Real> struct MeshComplex;
template <> struct MeshComplex<float> { using type = float2; };
template <> struct MeshComplex<double> { using type = double2; };

// The long-range passes below cover the rows (i, j) of every x plane i and the y columns
// [y0, y0 + ny), stored [i][j - y0][k]: the whole mesh by default, or one rank's y slab of the
// distributed cuFFT PM (gpu/pm_cuda_slabs.cu, pm/slab_transpose.hpp); ny = 0: all n columns.

// Long range: phi(k) = long_range_green(k) rho(k), in place. k_axis, inv_w2: per-axis tables
// (PmAxisTables) in device memory.
template <typename Real>
void pm_long_range_green(typename MeshComplex<Real>::type* rho, int n, const double* k_axis,
                         const double* inv_w2, double norm, double rs2, cudaStream_t stream, int y0 = 0,
                         int ny = 0);

// Long range, the mesh potential energy's sum over the modes of each row (i, j), in double:
// row_sums[i ny + j - y0] = sum_k long_range_energy_term(rho(i, j, k), long_range_green(k)),
// with the Green's function of pm_long_range_green (rho is left as it is), over the rows
// stored as above (the whole mesh, or a rank's y slab: gpu/pm_cuda_ranks.cu). Each row's sum
// has a fixed order (a warp's strided partial sums, then a fixed butterfly), so the result is
// bitwise the same from run to run.
template <typename Real>
void pm_long_range_energy_rows(const typename MeshComplex<Real>::type* rho, int n, const double* k_axis,
                               const double* inv_w2, double norm, double rs2, double* row_sums,
                               cudaStream_t stream, int y0 = 0, int ny = 0);

// Long range: out = -i k_d phi (zero on axis d's Nyquist plane); out may be phi.
template <typename Real>
void pm_long_range_gradient(const typename MeshComplex<Real>::type* phi, typename MeshComplex<Real>::type* out,
                            int n, int axis, const double* k_axis, cudaStream_t stream, int y0 = 0, int ny = 0);

// The same for d = y or z on `planes` planes of an x slab ([plane][y][k], n rows of n/2+1
// modes each) whose x lines were transformed back already: -i k_d commutes with the x
// transform, so this equals the y slab's product to rounding.
template <typename Real>
void pm_slab_gradient(const typename MeshComplex<Real>::type* phi, typename MeshComplex<Real>::type* out, int n,
                      int planes, int axis, const double* k_axis, cudaStream_t stream);

// PM-only: meshes A and B become the even and odd coset potentials, in place; `influence` is
// interlaced_optimal_influence() in the mesh precision, `shift` the half-cell phases.
template <typename Real>
void pm_interlaced_green(typename MeshComplex<Real>::type* a, typename MeshComplex<Real>::type* b, int n,
                         const Real* influence, const ModeComplex* shift, double norm, cudaStream_t stream);

// PM-only: out = component `axis` of g_A (mesh_b false) or g_B (true) from the potentials.
template <typename Real>
void pm_interlaced_gradient(const typename MeshComplex<Real>::type* phi_even,
                            const typename MeshComplex<Real>::type* phi_odd,
                            typename MeshComplex<Real>::type* out, int n, int axis, bool mesh_b,
                            double dk, const ModeComplex* shift, cudaStream_t stream);

}  // namespace orbis::gpu
