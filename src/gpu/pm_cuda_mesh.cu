#include "gpu/pm_cuda_mesh.cuh"

#include <cmath>

#include "gpu/cuda_check.cuh"
#include "pm/slab_routing.hpp"

namespace orbis::gpu {
namespace {

constexpr int kParticleBlock = 256;

unsigned blocks_for(std::size_t count) {
  return static_cast<unsigned>((count + kParticleBlock - 1) / kParticleBlock);
}

// Whether `keep` keeps a particle at x (PmSlabKeep): the routing's rule, on the unshifted mesh
// of the P-point window (gpu/pm_cuda_ranks.cu's SlabRule, the same arithmetic; the routing
// checks that its selection and its counts agree).
template <int P>
__device__ bool kept(const PmSlabKeep& keep, double x, double box, double cells_per_length, int n) {
  if (keep.count < 0) return true;
  const int plane = stencil_first_plane(x, box, cells_per_length, P == 2 ? Window::cic : Window::tsc, n);
  return plane >= keep.first && plane < keep.first + keep.count;
}

template <int P>
__device__ WindowStencil<P> stencil_of(const double* x, const double* y, const double* z, std::size_t p,
                                       double box, double cells_per_length, double shift, int n) {
  return WindowStencil<P>(cell_coordinate(x[p], box, cells_per_length, shift),
                          cell_coordinate(y[p], box, cells_per_length, shift),
                          cell_coordinate(z[p], box, cells_per_length, shift), n);
}

// Whether the stencil of a particle at x reaches a plane of the window [x_lo, x_hi) (which may
// wrap at n): a deposit in several passes of a few planes each (gpu/pm_cuda_ranks.cu) skips
// the others' y and z reads and weights.
template <int P>
__device__ bool reaches_planes(double x, double box, double cells_per_length, double shift, int n, int x_lo,
                               int x_hi) {
  int base = 0;
  double w[3];
  window_weights(P == 2 ? Window::cic : Window::tsc, cell_coordinate(x, box, cells_per_length, shift), base, w);
  int plane = wrap_mesh_index(base, n) - x_lo;   // the stencil's first plane in the window's numbering
  if (plane < 0) plane += n;
  // Its planes are plane, ..., plane + P - 1 (mod n); the window's 0, ..., x_hi - x_lo - 1.
  return plane < x_hi - x_lo || plane + P - 1 >= n;
}

template <int P>
__global__ void assign_fixed_kernel(const double* __restrict__ x, const double* __restrict__ y,
                                    const double* __restrict__ z, std::size_t count, double box,
                                    double cells_per_length, double shift, int n, int x_lo, int x_hi,
                                    double scale, unsigned long long* __restrict__ acc, PmSlabKeep keep) {
  const std::size_t p = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (p >= count || !kept<P>(keep, x[p], box, cells_per_length, n)) return;
  if (!reaches_planes<P>(x[p], box, cells_per_length, shift, n, x_lo, x_hi)) return;
  const WindowStencil<P> s = stencil_of<P>(x, y, z, p, box, cells_per_length, shift, n);
#pragma unroll
  for (int o = 0; o < P; ++o) {
    // The node's plane in the window [x_lo, x_hi), which may wrap at n (x_hi > n).
    int plane = s.i[o] - x_lo;
    if (plane < 0) plane += n;
    if (plane >= x_hi - x_lo) continue;
#pragma unroll
    for (int a = 0; a < P; ++a) {
      unsigned long long* row = acc + (static_cast<std::size_t>(plane) * n + s.j[a]) * n;
      const double wxy = s.wx[o] * s.wy[a];
#pragma unroll
      for (int c = 0; c < P; ++c) {
        const unsigned long long q = fixed_point_round(wxy * s.wz[c], scale);
        if (q != 0) atomicAdd(row + s.k[c], q);
      }
    }
  }
}

template <typename Real>
__global__ void fixed_to_mesh_kernel(const unsigned long long* __restrict__ acc, int n, int x_lo,
                                     int rows, double mean, double factor, Real* __restrict__ mesh) {
  const int padded = 2 * (n / 2 + 1);
  const int row = blockIdx.x * blockDim.y + threadIdx.y;   // (i - x_lo) n + j
  if (row >= rows) return;
  const unsigned long long* in = acc + static_cast<std::size_t>(row) * n;
  Real* out = mesh + (static_cast<std::size_t>(x_lo) * n + row) * padded;
  for (int k = threadIdx.x; k < padded; k += blockDim.x)
    out[k] = k < n ? static_cast<Real>(pm_fixed_to_density(in[k], mean, factor)) : Real(0);
}

template <int P, typename Real>
__global__ void interpolate_kernel(const Real* __restrict__ mesh, const double* __restrict__ x,
                                   const double* __restrict__ y, const double* __restrict__ z,
                                   std::size_t count, double box, double cells_per_length, double shift,
                                   int n, int x0, double scale, bool add, double* __restrict__ out,
                                   PmSlabKeep keep) {
  const std::size_t p = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (p >= count || !kept<P>(keep, x[p], box, cells_per_length, n)) return;
  const WindowStencil<P> s = stencil_of<P>(x, y, z, p, box, cells_per_length, shift, n);
  const std::size_t padded = 2 * (n / 2 + 1);
  double sum = 0;
#pragma unroll
  for (int o = 0; o < P; ++o) {
    int plane = s.i[o] - x0;   // the mesh's planes start at x0 and wrap at n
    if (plane < 0) plane += n;
    double sx = 0;
#pragma unroll
    for (int a = 0; a < P; ++a) {
      const Real* row = mesh + (static_cast<std::size_t>(plane) * n + s.j[a]) * padded;
      double sy = 0;
#pragma unroll
      for (int c = 0; c < P; ++c) sy += s.wz[c] * static_cast<double>(row[s.k[c]]);
      sx += s.wy[a] * sy;
    }
    sum += s.wx[o] * sx;
  }
  out[p] = add ? out[p] + scale * sum : scale * sum;
}

}  // namespace

void pm_assign_fixed(const double* x, const double* y, const double* z, std::size_t count,
                     const PmMeshGeometry& g, int x_lo, int x_hi, double scale,
                     unsigned long long* acc, cudaStream_t stream, const PmSlabKeep& keep) {
  if (count == 0) return;
  const double cpl = g.n / g.box;
  if (g.window == Window::cic)
    assign_fixed_kernel<2><<<blocks_for(count), kParticleBlock, 0, stream>>>(
        x, y, z, count, g.box, cpl, g.shift_cells, g.n, x_lo, x_hi, scale, acc, keep);
  else
    assign_fixed_kernel<3><<<blocks_for(count), kParticleBlock, 0, stream>>>(
        x, y, z, count, g.box, cpl, g.shift_cells, g.n, x_lo, x_hi, scale, acc, keep);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

template <typename Real>
void pm_fixed_to_mesh(const unsigned long long* acc, int n, int x_lo, int x_hi, double mean, double factor,
                      Real* mesh, cudaStream_t stream) {
  const int rows = (x_hi - x_lo) * n;
  if (rows <= 0) return;
  const dim3 block(32, 8);
  fixed_to_mesh_kernel<Real><<<(rows + 7) / 8, block, 0, stream>>>(acc, n, x_lo, rows, mean, factor, mesh);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

template <typename Real>
void pm_interpolate(const Real* mesh, const double* x, const double* y, const double* z,
                    std::size_t count, const PmMeshGeometry& g, double scale, bool add,
                    double* out, cudaStream_t stream, int x0, const PmSlabKeep& keep) {
  if (count == 0) return;
  const double cpl = g.n / g.box;
  if (g.window == Window::cic)
    interpolate_kernel<2, Real><<<blocks_for(count), kParticleBlock, 0, stream>>>(
        mesh, x, y, z, count, g.box, cpl, g.shift_cells, g.n, x0, scale, add, out, keep);
  else
    interpolate_kernel<3, Real><<<blocks_for(count), kParticleBlock, 0, stream>>>(
        mesh, x, y, z, count, g.box, cpl, g.shift_cells, g.n, x0, scale, add, out, keep);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

template void pm_fixed_to_mesh<float>(const unsigned long long*, int, int, int, double, double, float*, cudaStream_t);
template void pm_fixed_to_mesh<double>(const unsigned long long*, int, int, int, double, double, double*, cudaStream_t);
template void pm_interpolate<float>(const float*, const double*, const double*, const double*, std::size_t,
                                    const PmMeshGeometry&, double, bool, double*, cudaStream_t, int,
                                    const PmSlabKeep&);
template void pm_interpolate<double>(const double*, const double*, const double*, const double*, std::size_t,
                                     const PmMeshGeometry&, double, bool, double*, cudaStream_t, int,
                                    const PmSlabKeep&);

}  // namespace orbis::gpu
