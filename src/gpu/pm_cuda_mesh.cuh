// Mass assignment and interpolation of the CUDA PM (gpu/pm_cuda.hpp), with the CPU's window
// (pm/mass_assignment.hpp: WindowStencil and cell_coordinate are the same code).
//
// Determinism: each particle adds round(w * 2^S) to the 64-bit unsigned integer of every node
// of its stencil (w the product of its three window weights) with atomicAdd, the host PM's
// formula (pm/fixed_point_mesh.hpp: the scale, the rounding and the conversion); integer addition
// is associative, so the sums are bitwise the same whatever order the atomics land in, and
// for any order of the particles. The integer mesh is then converted to the density contrast
// in mass units, (sum - mean) * (density of one particle) / 2^S, in the mesh precision: the
// mean only feeds the k = 0 mode, which both Green's functions set to zero, and without it a
// float mesh would round the mean density along with the fluctuations. Exact integer sums
// also make a float mesh more accurate than adding floats into dense cells: 256^3 clustered
// particles on a 512^3 mesh, forces against a double mesh, rms 2.0e-7 here, 2.1e-5 for the
// host PM when it still added floats (tests/bench/bench_pm_cuda_results.md, 2026-11-25). The
// host PM now sums the same integers (pm/pm_solver.hpp), so that gap is not its any more.
// Measured on one H100 (tests/bench/bench_pm_cuda, TSC, float mesh), against float atomicAdd
// straight into the mesh (fast, not deterministic): 256^3 clustered particles on 512^3, 6.8 ms
// vs 4.8 ms; the same shuffled, 14.9 vs 12.6 ms; 512^3 on 1024^3 (two passes), 31.7 vs 13.8 ms.
// Sorting the particles by cell and gathering per node was not chosen: it costs a sort and
// per-particle memory every step, and its sums would still depend on the particles' order
// within a cell. Each particle
// carries weight 1 in total, so a node's sum is at most N 2^S; S = 62 - ceil(log2 N) keeps it
// below 2^62. Rounding each weight to 2^-S errs by at most n^3 2^-62 of the mean occupancy of
// a cell (N / n^3 particles): 6e-14 on a 64^3 mesh, 2.3e-10 on 1024^3. That is far below a
// float mesh's rounding, and at test sizes below a double mesh's FFT rounding.
//
// Memory: the integer mesh needs 8 n^3 bytes; it lives in the work mesh, which holds
// n^2 2(n/2+1) reals, so a double mesh is assigned in one pass and a float mesh in two
// (half the x planes each; particles outside a pass's planes only compute their stencil).
#pragma once
#include <cstddef>

#include <cuda_runtime.h>

#include "pm/fixed_point_mesh.hpp"
#include "pm/mass_assignment.hpp"

namespace orbis::gpu {

// Where particles meet a periodic n^3 mesh of a `box` (Mpc/h) with `window`; shift_cells is
// added to every coordinate in cell units (0.5 for mesh B of the PM-only force).
struct PmMeshGeometry {
  int n = 0;
  Window window = Window::tsc;
  double box = 0;
  double shift_cells = 0;
};

// The particles a rank of the PM over ranks keeps (gpu/pm_cuda_ranks.hpp): those whose
// stencil's first x plane on the unshifted mesh (pm/slab_routing.hpp's stencil_first_plane,
// the routing's rule) lies in its slab [first, first + count); the others are routed to their
// slab's owner. count < 0 (the default): every particle.
struct PmSlabKeep {
  int first = 0, count = -1;
};

// acc[((i - x_lo) n + j) n + k] += round(w * scale) for every stencil node (i, j, k) with
// x_lo <= i < x_hi; acc is zeroed by the caller. x_hi may exceed n: the planes then wrap
// periodically (x_lo, ..., n - 1, 0, ..., x_hi - n - 1, at acc's planes 0, 1, ...), the x slab
// and ghost planes of the PM over ranks (gpu/pm_cuda_ranks.hpp); x_hi - x_lo <= n.
// Only the particles `keep` keeps take part.
void pm_assign_fixed(const double* x, const double* y, const double* z, std::size_t count,
                     const PmMeshGeometry& g, int x_lo, int x_hi, double scale,
                     unsigned long long* acc, cudaStream_t stream, const PmSlabKeep& keep = {});

// mesh(i, j, k) = (acc - mean) * factor for x_lo <= i < x_hi in the padded real layout
// ((i n + j) 2(n/2+1) + k), padding zeroed.
template <typename Real>
void pm_fixed_to_mesh(const unsigned long long* acc, int n, int x_lo, int x_hi, double mean, double factor,
                      Real* mesh, cudaStream_t stream);

// out[p] = scale * sum_node W(x_node - x_p) mesh(node) (or out[p] += ... when `add`), the
// CPU's interpolation (PmSolver), one component at a time. mesh holds the x planes from x0 on
// (wrapping at n) in the padded layout: the whole mesh (x0 = 0), or a rank's x slab and its
// ghost planes (gpu/pm_cuda_ranks.hpp), which must hold every stencil's planes. out[p] of a
// particle `keep` does not keep is left as it is.
template <typename Real>
void pm_interpolate(const Real* mesh, const double* x, const double* y, const double* z,
                    std::size_t count, const PmMeshGeometry& g, double scale, bool add,
                    double* out, cudaStream_t stream, int x0 = 0, const PmSlabKeep& keep = {});

}  // namespace orbis::gpu
