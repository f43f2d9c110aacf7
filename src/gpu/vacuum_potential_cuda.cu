#include "gpu/vacuum_potential_cuda.cuh"

#include <vector>

#include "gpu/cuda_check.cuh"
#include "gpu/device_buffer.cuh"

namespace orbis::gpu {
namespace {

constexpr int kTile = 256;   // threads per block and positions per shared tile

// row[i] = sum_{j != i} w_j / sqrt(|x_i - x_j|^2 + eps^2), j in increasing order (w = 1
// without weights).
template <bool Weighted>
__global__ void pair_rows(const double* x, const double* y, const double* z, const double* w, std::size_t n,
                          double eps2, double* row) {
  __shared__ double sx[kTile], sy[kTile], sz[kTile], sw[Weighted ? kTile : 1];
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(kTile) + threadIdx.x;
  const double xi = i < n ? x[i] : 0, yi = i < n ? y[i] : 0, zi = i < n ? z[i] : 0;
  double sum = 0;
  for (std::size_t base = 0; base < n; base += kTile) {
    const std::size_t j = base + threadIdx.x;
    __syncthreads();   // the last tile is read by every thread before it is replaced
    sx[threadIdx.x] = j < n ? x[j] : 0;
    sy[threadIdx.x] = j < n ? y[j] : 0;
    sz[threadIdx.x] = j < n ? z[j] : 0;
    if constexpr (Weighted) sw[threadIdx.x] = j < n ? w[j] : 0;
    __syncthreads();
    const int count = static_cast<int>(n - base < kTile ? n - base : kTile);
    for (int k = 0; k < count; ++k) {
      if (base + k == i) continue;
      const double dx = sx[k] - xi, dy = sy[k] - yi, dz = sz[k] - zi;
      if constexpr (Weighted) sum += __dmul_rn(sw[k], rsqrt(dx * dx + dy * dy + dz * dz + eps2));
      else sum += rsqrt(dx * dx + dy * dy + dz * dz + eps2);
    }
  }
  if (i < n) row[i] = sum;
}

}  // namespace

std::vector<double> softened_potentials(const double* x, const double* y, const double* z, std::size_t n,
                                        double softening, cudaStream_t stream, const double* weights) {
  std::vector<double> host(n, 0.0);
  if (n < 2) return host;
  AllocationStream on_stream(stream);
  DeviceArray<double> row;
  row.ensure_exact(n);
  const auto blocks = static_cast<unsigned>((n + kTile - 1) / kTile);
  if (weights) pair_rows<true><<<blocks, kTile, 0, stream>>>(x, y, z, weights, n, softening * softening, row.data());
  else pair_rows<false><<<blocks, kTile, 0, stream>>>(x, y, z, nullptr, n, softening * softening, row.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(host.data(), row.data(), n * sizeof(double), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

}  // namespace orbis::gpu
