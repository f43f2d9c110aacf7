#include "gpu/pm_cuda_fourier.cuh"

#include "core/error.hpp"
#include "gpu/cuda_check.cuh"
#include "pm/interlaced_influence.hpp"

namespace orbis::gpu {
namespace {

// One warp per mesh row (i, j), looping over its n/2+1 modes; eight rows per block.
constexpr int kRowsPerBlock = 8;
const dim3 kRowBlock(32, kRowsPerBlock);
unsigned row_blocks(int n) { return static_cast<unsigned>((n * n + kRowsPerBlock - 1) / kRowsPerBlock); }
// The long-range passes over n x planes of ny y columns.
unsigned row_blocks(int n, int ny) {
  return static_cast<unsigned>((static_cast<long long>(n) * ny + kRowsPerBlock - 1) / kRowsPerBlock);
}

template <typename C>
__device__ ModeComplex from_mesh(C c) {
  return {static_cast<double>(c.x), static_cast<double>(c.y)};
}
template <typename Real, typename C = typename MeshComplex<Real>::type>
__device__ C to_mesh(ModeComplex c) {
  C out;
  out.x = static_cast<Real>(c.re);
  out.y = static_cast<Real>(c.im);
  return out;
}
__device__ int signed_index(int i, int n) { return i <= n / 2 ? i : i - n; }

template <typename Real, typename C = typename MeshComplex<Real>::type>
__global__ void long_range_green_kernel(C* __restrict__ rho, int n, const double* __restrict__ k_axis,
                                        const double* __restrict__ inv_w2, double norm, double rs2, int y0,
                                        int ny) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y, nzc = n / 2 + 1;
  if (row >= n * ny) return;
  const int i = row / ny, j = y0 + (row - i * ny);
  const double kxy2 = k_axis[i] * k_axis[i] + k_axis[j] * k_axis[j];
  const double wxy = inv_w2[i] * inv_w2[j];
  C* r = rho + static_cast<std::size_t>(row) * nzc;
  for (int k = threadIdx.x; k < nzc; k += blockDim.x) {
    const double k2 = kxy2 + k_axis[k] * k_axis[k];
    const Real g = static_cast<Real>(long_range_green(k2, rs2, norm, wxy, inv_w2[k]));
    C v = r[k];
    v.x *= g;
    v.y *= g;
    r[k] = v;
  }
}

template <typename Real, typename C = typename MeshComplex<Real>::type>
__global__ void long_range_energy_rows_kernel(const C* __restrict__ rho, int n, const double* __restrict__ k_axis,
                                              const double* __restrict__ inv_w2, double norm, double rs2,
                                              double* __restrict__ row_sums, int y0, int ny) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y, nzc = n / 2 + 1;
  if (row >= n * ny) return;   // a whole warp: the rows are the warps
  const int i = row / ny, j = y0 + (row - i * ny);
  const double kxy2 = k_axis[i] * k_axis[i] + k_axis[j] * k_axis[j];
  const double wxy = inv_w2[i] * inv_w2[j];
  const C* r = rho + static_cast<std::size_t>(row) * nzc;
  double sum = 0;
  for (int k = threadIdx.x; k < nzc; k += blockDim.x) {
    const ModeComplex v = from_mesh(r[k]);
    sum += long_range_energy_term(v.re, v.im, long_range_green(kxy2 + k_axis[k] * k_axis[k], rs2, norm, wxy, inv_w2[k]),
                                  k, n);
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (threadIdx.x == 0) row_sums[row] = sum;
}

template <typename Real, typename C = typename MeshComplex<Real>::type>
__global__ void long_range_gradient_kernel(const C* phi, C* out, int n, int axis,
                                           const double* __restrict__ k_axis, int y0, int ny, int ni) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y, nzc = n / 2 + 1, nyquist = n / 2;
  if (row >= ni * ny) return;
  const int i = row / ny, j = y0 + (row - i * ny);
  const std::size_t base = static_cast<std::size_t>(row) * nzc;
  const int fixed = axis == 0 ? i : j;   // axes x and y: the same k_d along the row
  const double k_row = fixed == nyquist ? 0.0 : k_axis[fixed];
  for (int k = threadIdx.x; k < nzc; k += blockDim.x) {
    const double kd = axis == 2 ? (k == nyquist ? 0.0 : k_axis[k]) : k_row;
    const ModeComplex v = from_mesh(phi[base + k]);
    out[base + k] = to_mesh<Real>(minus_i_k(kd, v.re, v.im));
  }
}

template <typename Real, typename C = typename MeshComplex<Real>::type>
__global__ void interlaced_green_kernel(C* __restrict__ a, C* __restrict__ b, int n,
                                        const Real* __restrict__ influence,
                                        const ModeComplex* __restrict__ shift, double norm) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y, nzc = n / 2 + 1, h = n / 2 + 1;
  if (row >= n * n) return;
  const int i = row / n, j = row - i * n;
  const Real* g = influence + 2 * (static_cast<std::size_t>(min(i, n - i)) * h + min(j, n - j)) * h;
  const ModeComplex pxy = shift[i] * shift[j];
  const std::size_t base = static_cast<std::size_t>(row) * nzc;
  for (int k = threadIdx.x; k < nzc; k += blockDim.x) {
    ModeComplex even, odd;
    interlaced_potentials(from_mesh(a[base + k]), from_mesh(b[base + k]), pxy * shift[k], norm,
                          static_cast<double>(g[2 * k]), static_cast<double>(g[2 * k + 1]), even, odd);
    a[base + k] = to_mesh<Real>(even);
    b[base + k] = to_mesh<Real>(odd);
  }
}

template <typename Real, typename C = typename MeshComplex<Real>::type>
__global__ void interlaced_gradient_kernel(const C* __restrict__ phi_even, const C* __restrict__ phi_odd,
                                           C* __restrict__ out, int n, int axis, bool mesh_b, double dk,
                                           const ModeComplex* __restrict__ shift) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y, nzc = n / 2 + 1;
  if (row >= n * n) return;
  const int i = row / n, j = row - i * n;
  const ModeComplex pxy = conj(shift[i] * shift[j]);
  const std::size_t base = static_cast<std::size_t>(row) * nzc;
  for (int k = threadIdx.x; k < nzc; k += blockDim.x) {
    const int m[3] = {signed_index(i, n), signed_index(j, n), k};
    double ke[3], ko[3];
    principal_wavevector(m, n, Coset::even, ke);
    principal_wavevector(m, n, Coset::odd, ko);
    ModeComplex ga, gb;
    interlaced_gradient(from_mesh(phi_even[base + k]), from_mesh(phi_odd[base + k]), dk, ke[axis], ko[axis],
                        pxy * conj(shift[k]), ga, gb);
    out[base + k] = to_mesh<Real>(mesh_b ? gb : ga);
  }
}

}  // namespace

template <typename Real>
void pm_long_range_green(typename MeshComplex<Real>::type* rho, int n, const double* k_axis,
                         const double* inv_w2, double norm, double rs2, cudaStream_t stream, int y0, int ny) {
  if (ny == 0) ny = n;
  long_range_green_kernel<Real><<<row_blocks(n, ny), kRowBlock, 0, stream>>>(rho, n, k_axis, inv_w2, norm, rs2,
                                                                             y0, ny);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

template <typename Real>
void pm_long_range_energy_rows(const typename MeshComplex<Real>::type* rho, int n, const double* k_axis,
                               const double* inv_w2, double norm, double rs2, double* row_sums,
                               cudaStream_t stream, int y0, int ny) {
  if (ny == 0) ny = n;
  long_range_energy_rows_kernel<Real><<<row_blocks(n, ny), kRowBlock, 0, stream>>>(rho, n, k_axis, inv_w2, norm,
                                                                                   rs2, row_sums, y0, ny);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

template <typename Real>
void pm_long_range_gradient(const typename MeshComplex<Real>::type* phi, typename MeshComplex<Real>::type* out,
                            int n, int axis, const double* k_axis, cudaStream_t stream, int y0, int ny) {
  if (ny == 0) ny = n;
  long_range_gradient_kernel<Real><<<row_blocks(n, ny), kRowBlock, 0, stream>>>(phi, out, n, axis, k_axis, y0,
                                                                                ny, n);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

template <typename Real>
void pm_slab_gradient(const typename MeshComplex<Real>::type* phi, typename MeshComplex<Real>::type* out, int n,
                      int planes, int axis, const double* k_axis, cudaStream_t stream) {
  if (axis != 1 && axis != 2)
    fail("internal: pm_slab_gradient of axis {} (an x slab's modes are of y and z alone)", axis);
  if (planes == 0) return;
  // The x slab's rows are the y slab's with i the plane and every y (y0 0, ny n).
  long_range_gradient_kernel<Real><<<row_blocks(planes, n), kRowBlock, 0, stream>>>(phi, out, n, axis, k_axis, 0, n,
                                                                                     planes);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

template <typename Real>
void pm_interlaced_green(typename MeshComplex<Real>::type* a, typename MeshComplex<Real>::type* b, int n,
                         const Real* influence, const ModeComplex* shift, double norm, cudaStream_t stream) {
  interlaced_green_kernel<Real><<<row_blocks(n), kRowBlock, 0, stream>>>(a, b, n, influence, shift, norm);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

template <typename Real>
void pm_interlaced_gradient(const typename MeshComplex<Real>::type* phi_even,
                            const typename MeshComplex<Real>::type* phi_odd,
                            typename MeshComplex<Real>::type* out, int n, int axis, bool mesh_b,
                            double dk, const ModeComplex* shift, cudaStream_t stream) {
  interlaced_gradient_kernel<Real><<<row_blocks(n), kRowBlock, 0, stream>>>(phi_even, phi_odd, out, n, axis,
                                                                             mesh_b, dk, shift);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

#define ORBIS_PM_FOURIER(Real)                                                                              \
  template void pm_long_range_green<Real>(MeshComplex<Real>::type*, int, const double*, const double*,     \
                                          double, double, cudaStream_t, int, int);                         \
  template void pm_long_range_energy_rows<Real>(const MeshComplex<Real>::type*, int, const double*,          \
                                                const double*, double, double, double*, cudaStream_t, int, \
                                                int);                                                      \
  template void pm_long_range_gradient<Real>(const MeshComplex<Real>::type*, MeshComplex<Real>::type*, int, \
                                             int, const double*, cudaStream_t, int, int);                  \
  template void pm_slab_gradient<Real>(const MeshComplex<Real>::type*, MeshComplex<Real>::type*, int, int, int, \
                                       const double*, cudaStream_t);                                            \
  template void pm_interlaced_green<Real>(MeshComplex<Real>::type*, MeshComplex<Real>::type*, int,         \
                                          const Real*, const ModeComplex*, double, cudaStream_t);          \
  template void pm_interlaced_gradient<Real>(const MeshComplex<Real>::type*, const MeshComplex<Real>::type*, \
                                             MeshComplex<Real>::type*, int, int, bool, double,             \
                                             const ModeComplex*, cudaStream_t);
ORBIS_PM_FOURIER(float)
ORBIS_PM_FOURIER(double)
#undef ORBIS_PM_FOURIER

}  // namespace orbis::gpu
