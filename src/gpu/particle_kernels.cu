#include "gpu/particle_kernels.cuh"

#include <algorithm>

#include "core/vec3.hpp"
#include "gpu/cuda_check.cuh"

// Built with --fmad=false (src/CMakeLists.txt): x + p * f rounds as the host's kick and
// drift (integrate/kdk.cpp) do, so a drift or kick on either side gives the same bits.

namespace orbis::gpu {
namespace {

constexpr unsigned kThreads = 256;
unsigned grid_for(std::size_t n) {
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>((n + kThreads - 1) / kThreads, 65535u * 8u)));
}
#define ORBIS_FOR_EACH(i, n) \
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)

template <typename Ga>
__global__ void kick_kernel(double* p, const double* g_long, double long_factor, const Ga* g_short,
                            const std::uint8_t* bin, int min_active_bin, const double* short_factor, std::size_t n) {
  ORBIS_FOR_EACH(i, n) {
    for (int d = 0; d < 3; ++d) {
      const std::size_t k = d * n + i;
      double v = p[k];
      if (long_factor != 0) v += g_long[k] * long_factor;
      p[k] = v;
    }
    const int b = bin ? bin[i] : 0;
    if (g_short && b >= min_active_bin) {
      const double f = short_factor[b];
      for (int d = 0; d < 3; ++d) p[d * n + i] += static_cast<double>(g_short[d * n + i]) * f;
    }
  }
}

__global__ void drift_kernel(double* x, const double* p, double f, double box, std::size_t n) {
  ORBIS_FOR_EACH(i, n) {
    for (int d = 0; d < 3; ++d) {
      const std::size_t k = d * n + i;
      const double moved = x[k] + p[k] * f;
      x[k] = box > 0 ? periodic_wrap_position(moved, box) : moved;
    }
  }
}

__global__ void deinterleave_kernel(const double* xyz, std::size_t n, double* soa) {
  ORBIS_FOR_EACH(i, n) {
    soa[i] = xyz[3 * i];
    soa[n + i] = xyz[3 * i + 1];
    soa[2 * n + i] = xyz[3 * i + 2];
  }
}

__global__ void interleave_kernel(const double* soa, std::size_t n, double box, double* xyz) {
  ORBIS_FOR_EACH(i, n) {
    for (int d = 0; d < 3; ++d) {
      const double v = soa[d * n + i];
      xyz[3 * i + d] = box > 0 ? periodic_wrap_position(v, box) : v;
    }
  }
}

__global__ void wrap_kernel(double* x, double box, std::size_t n) {
  ORBIS_FOR_EACH(k, n) x[k] = periodic_wrap_position(x[k], box);
}

template <typename Gb>
__global__ void interleave_sum_kernel(const double* a, const Gb* b, std::size_t n, double* xyz) {
  ORBIS_FOR_EACH(i, n) {
    for (int d = 0; d < 3; ++d) xyz[3 * i + d] = a[d * n + i] + static_cast<double>(b[d * n + i]);
  }
}

template <typename Ga>
__global__ void scatter_kernel(const double* acc_tree, const std::uint32_t* order, const std::uint8_t* bin,
                               int min_active_bin, std::size_t n, Ga* out, std::size_t out_stride) {
  ORBIS_FOR_EACH(t, n) {
    const std::uint32_t i = order[t];
    if ((bin && bin[i] < min_active_bin) || i >= out_stride) continue;
    for (int d = 0; d < 3; ++d) out[d * out_stride + i] = static_cast<Ga>(acc_tree[3 * t + d]);
  }
}

// Block maxima (bits of non-negative doubles order like the values), then one atomicMax per
// block: the maximum itself does not depend on the order of arrival.
template <typename Gb>
__global__ void max_norm2_kernel(const double* a, const Gb* b, std::size_t n, unsigned long long* out) {
  unsigned long long best = 0;
  ORBIS_FOR_EACH(i, n) {
    double s = 0;
    for (int d = 0; d < 3; ++d) {
      const double g = a[d * n + i] + static_cast<double>(b[d * n + i]);
      s += g * g;
    }
    best = max(best, static_cast<unsigned long long>(__double_as_longlong(s)));
  }
  for (int o = 16; o > 0; o /= 2) best = max(best, __shfl_down_sync(0xffffffffu, best, o));
  if ((threadIdx.x & 31) == 0 && best > 0) atomicMax(out, best);
}

__global__ void max_norm2_kernel(const double* p, std::size_t n, unsigned long long* out) {
  unsigned long long best = 0;
  ORBIS_FOR_EACH(i, n) {
    const double x = p[i], y = p[n + i], z = p[2 * n + i];
    best = max(best, static_cast<unsigned long long>(__double_as_longlong(x * x + y * y + z * z)));
  }
  for (int o = 16; o > 0; o /= 2) best = max(best, __shfl_down_sync(0xffffffffu, best, o));
  if ((threadIdx.x & 31) == 0 && best > 0) atomicMax(out, best);
}

__global__ void exact_norm2_sum_kernel(const double* p, std::size_t n, ExactSumScale scale, unsigned long long* out) {
  unsigned long long sum = 0;
  ORBIS_FOR_EACH(i, n) {
    const double x = p[i], y = p[n + i], z = p[2 * n + i];
    sum += exact_sum_term(x * x + y * y + z * z, scale);   // norm2 (core/vec3.hpp), no FMA
  }
  for (int o = 16; o > 0; o /= 2) sum += __shfl_down_sync(0xffffffffu, sum, o);
  if ((threadIdx.x & 31) == 0 && sum > 0) atomicAdd(out, sum);
}

// One thread per block of kNorm2Block particles, in order (the host's ordered sum); the
// blocks are few (n / 4096), so each thread's loop is the whole cost: a sweep of 3n doubles.
__global__ void block_component_kernel(const double* p, std::size_t n, std::size_t blocks, const double* w,
                                       double* partial) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (k >= blocks) return;
  const std::size_t end = min(n, (k + 1) * kNorm2Block);
  for (int d = 0; d < 3; ++d) {
    double s = 0;
    if (w) {
      for (std::size_t i = k * kNorm2Block; i < end; ++i) s += w[i] * p[d * n + i];   // --fmad=false: no FMA
    } else {
      for (std::size_t i = k * kNorm2Block; i < end; ++i) s += p[d * n + i];
    }
    partial[3 * k + d] = s;
  }
}

template <typename Gb>
__global__ void assign_bins_kernel(const double* a, const Gb* b, std::size_t n, BinRule rule, std::uint8_t* bin,
                                   unsigned long long* counts) {
  __shared__ unsigned int local[kMaxTimeBins];
  if (threadIdx.x < kMaxTimeBins) local[threadIdx.x] = 0;
  __syncthreads();
  ORBIS_FOR_EACH(i, n) {
    int k = bin[i];
    if (k >= rule.min_active_bin) {
      const double gx = a[i] + static_cast<double>(b[i]);
      const double gy = a[n + i] + static_cast<double>(b[n + i]);
      const double gz = a[2 * n + i] + static_cast<double>(b[2 * n + i]);
      k = bin_for_acceleration(gx * gx + gy * gy + gz * gz, rule);
      bin[i] = static_cast<std::uint8_t>(k);
    }
    atomicAdd(&local[k], 1u);
  }
  __syncthreads();
  if (threadIdx.x < kMaxTimeBins && local[threadIdx.x] > 0) atomicAdd(counts + threadIdx.x, local[threadIdx.x]);
}

}  // namespace

template <typename Ga>
void kick_particles(double* p, const double* g_long, double long_factor, const Ga* g_short, const std::uint8_t* bin,
                    int min_active_bin, const double* short_factor, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  kick_kernel<Ga><<<grid_for(n), kThreads, 0, stream>>>(p, g_long, long_factor, g_short, bin, min_active_bin,
                                                       short_factor, n);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

void drift_particles(double* x, const double* p, double drift_factor, double box, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  drift_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, p, drift_factor, box, n);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

void deinterleave(const double* xyz, std::size_t n, double* soa, cudaStream_t stream) {
  if (n == 0) return;
  deinterleave_kernel<<<grid_for(n), kThreads, 0, stream>>>(xyz, n, soa);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

void interleave(const double* soa, std::size_t n, double* xyz, cudaStream_t stream) {
  interleave_positions(soa, n, 0.0, xyz, stream);
}

void interleave_positions(const double* soa, std::size_t n, double box, double* xyz, cudaStream_t stream) {
  if (n == 0) return;
  interleave_kernel<<<grid_for(n), kThreads, 0, stream>>>(soa, n, box, xyz);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

void wrap_positions(double* x, std::size_t n, double box, cudaStream_t stream) {
  if (n == 0 || !(box > 0)) return;
  wrap_kernel<<<grid_for(3 * n), kThreads, 0, stream>>>(x, box, 3 * n);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

template <typename Gb>
void interleave_sum(const double* a, const Gb* b, std::size_t n, double* out, cudaStream_t stream) {
  if (n == 0) return;
  interleave_sum_kernel<Gb><<<grid_for(n), kThreads, 0, stream>>>(a, b, n, out);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

template <typename Ga>
void scatter_short_range(const double* acc_tree, const std::uint32_t* order, const std::uint8_t* bin,
                         int min_active_bin, std::size_t n, Ga* out, std::size_t out_stride, cudaStream_t stream) {
  if (n == 0) return;
  scatter_kernel<Ga><<<grid_for(n), kThreads, 0, stream>>>(acc_tree, order, bin, min_active_bin, n, out, out_stride);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

template <typename Gb>
void max_norm2_sum(const double* a, const Gb* b, std::size_t n, unsigned long long* out, cudaStream_t stream) {
  ORBIS_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(unsigned long long), stream));
  if (n == 0) return;
  max_norm2_kernel<Gb><<<grid_for(n), kThreads, 0, stream>>>(a, b, n, out);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

void max_norm2(const double* p, std::size_t n, unsigned long long* out, cudaStream_t stream) {
  ORBIS_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(unsigned long long), stream));
  if (n == 0) return;
  max_norm2_kernel<<<grid_for(n), kThreads, 0, stream>>>(p, n, out);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

void exact_norm2_sum(const double* p, std::size_t n, const ExactSumScale& scale, unsigned long long* out,
                     cudaStream_t stream) {
  ORBIS_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(unsigned long long), stream));
  if (n == 0) return;
  exact_norm2_sum_kernel<<<grid_for(n), kThreads, 0, stream>>>(p, n, scale, out);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

void block_component_sums(const double* p, std::size_t n, double* partial, cudaStream_t stream,
                          const double* weights) {
  const std::size_t blocks = norm2_block_count(n);
  if (blocks == 0) return;
  block_component_kernel<<<static_cast<unsigned>((blocks + 127) / 128), 128, 0, stream>>>(p, n, blocks, weights,
                                                                                           partial);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

template <typename Gb>
void assign_bins(const double* a, const Gb* b, std::size_t n, const BinRule& rule, std::uint8_t* bin,
                 unsigned long long* counts, cudaStream_t stream) {
  ORBIS_CUDA_CHECK(cudaMemsetAsync(counts, 0, kMaxTimeBins * sizeof(unsigned long long), stream));
  if (n == 0) return;
  assign_bins_kernel<Gb><<<grid_for(n), kThreads, 0, stream>>>(a, b, n, rule, bin, counts);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

#define ORBIS_INSTANTIATE(T)                                                                                   \
  template void kick_particles<T>(double*, const double*, double, const T*, const std::uint8_t*, int,          \
                                  const double*, std::size_t, cudaStream_t);                                  \
  template void interleave_sum<T>(const double*, const T*, std::size_t, double*, cudaStream_t);               \
  template void scatter_short_range<T>(const double*, const std::uint32_t*, const std::uint8_t*, int,          \
                                       std::size_t, T*, std::size_t, cudaStream_t);                            \
  template void max_norm2_sum<T>(const double*, const T*, std::size_t, unsigned long long*, cudaStream_t);        \
  template void assign_bins<T>(const double*, const T*, std::size_t, const BinRule&, std::uint8_t*,             \
                               unsigned long long*, cudaStream_t);
ORBIS_INSTANTIATE(float)
ORBIS_INSTANTIATE(double)
#undef ORBIS_INSTANTIATE

}  // namespace orbis::gpu
