#include "gpu/power_spectrum_bins_cuda.cuh"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "core/units.hpp"
#include "gpu/cuda_check.cuh"

namespace orbis::gpu {
namespace {

constexpr unsigned kThreads = 256;
unsigned grid_for(std::size_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

// The binning kernel's threads: about 2^18 (enough to fill an H200), as (x plane, row group,
// bin) triples; more row groups when there are few bins (log bins: tens). At most one group
// a row; none without rows.
int row_groups(int n, int rows, int bins) {
  if (rows <= 0) return 0;
  const long long want = (1LL << 18) / (static_cast<long long>(n) * bins);
  return static_cast<int>(std::clamp<long long>(want, 1, rows));
}

// One bin's sums over some modes (binned_spectrum's on the host, per x plane).
struct ModeSums {
  double k, power, shot;
  long long modes;
};

// The smallest r >= 0 with r^2 >= v, exactly (the double sqrt is then corrected in integers).
__device__ long long ceil_sqrt(long long v) {
  if (v <= 0) return 0;
  long long r = static_cast<long long>(sqrt(static_cast<double>(v)));
  while (r * r < v) ++r;
  while (r > 0 && (r - 1) * (r - 1) >= v) --r;
  return r;
}

struct BinArgs {
  const double2* first = nullptr;    // the modes, n x ny x (n/2+1) ([i][j - y0][k])
  const double2* shifted = nullptr;  // of the half-cell-shifted mesh; null: not interlaced
  const double* w = nullptr;         // the host's tables (pk::AxisTables), n each
  const double* alias_a = nullptr;
  const double* alias_b = nullptr;
  const long long* edges = nullptr;  // bins + 1 edges in |m|^2 (pk::Binning::squared_edges)
  int n = 0, y0 = 0, ny = 0, bins = 0, groups = 0, rows_per_group = 0;
  double volume = 0, total = 0;
};

// Thread (i, group, b): the modes of bin b in x plane i, rows y0 + [group * rows_per_group,
// ...), in order of j then k, each as the host's binned_spectrum computes it. In a row |m|^2 =
// r2 + k^2 grows with k, so the bin's modes are the k with edges[b] <= r2 + k^2 < edges[b+1].
__global__ void bin_modes_kernel(BinArgs g, ModeSums* __restrict__ partial) {
  const long long t = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (t >= static_cast<long long>(g.n) * g.groups * g.bins) return;
  const int b = static_cast<int>(t % g.bins);
  const int group = static_cast<int>((t / g.bins) % g.groups);
  const int i = static_cast<int>(t / (static_cast<long long>(g.bins) * g.groups));
  const int n = g.n, nzc = n / 2 + 1;
  const int mx = i <= n / 2 ? i : i - n;
  const long long q_lo = g.edges[b], q_hi = g.edges[b + 1];
  ModeSums s{0, 0, 0, 0};
  const int row_end = min(g.ny, (group + 1) * g.rows_per_group);
  for (int row_in_slab = group * g.rows_per_group; row_in_slab < row_end; ++row_in_slab) {
    const int j = g.y0 + row_in_slab;
    const int my = j <= n / 2 ? j : j - n;
    const long long r2 = static_cast<long long>(mx) * mx + static_cast<long long>(my) * my;
    if (r2 >= q_hi) continue;
    const int k_lo = static_cast<int>(ceil_sqrt(q_lo - r2));
    const int k_hi = static_cast<int>(min(static_cast<long long>(nzc), ceil_sqrt(q_hi - r2)));
    const std::size_t row = (static_cast<std::size_t>(i) * g.ny + row_in_slab) * nzc;
    const double w_xy = g.w[i] * g.w[j];
    const double a_xy = g.alias_a[i] * g.alias_a[j];
    const double b_xy = g.alias_b[i] * g.alias_b[j];
    for (int k = k_lo; k < k_hi; ++k) {
      const double m = sqrt(static_cast<double>(r2 + static_cast<long long>(k) * k));
      double2 f = g.first[row + k];
      const double alias_all = a_xy * g.alias_a[k];
      double alias = alias_all;
      if (g.shifted) {
        // x -> x + cell/2 multiplied the modes by e^{-i k.s}; undo it and average.
        const double theta = units::pi * (mx + my + k) / n;
        double sn, cs;
        sincos(theta, &sn, &cs);
        const double2 h = g.shifted[row + k];
        f.x = 0.5 * (f.x + (h.x * cs - h.y * sn));
        f.y = 0.5 * (f.y + (h.x * sn + h.y * cs));
        alias = 0.5 * (alias_all + b_xy * g.alias_b[k]);
      }
      const double window = w_xy * g.w[k];
      const double d = g.total * window;
      const double re = f.x / d, im = f.y / d;
      const double power = g.volume * (re * re + im * im);
      const double weight = (k == 0 || k == n / 2) ? 1.0 : 2.0;   // +k and -k
      s.k += weight * m;
      s.power += weight * power;
      s.shot += weight * g.volume / g.total * alias / (window * window);
      s.modes += static_cast<long long>(weight);
    }
  }
  partial[(static_cast<std::size_t>(i) * g.groups + group) * g.bins + b] = s;
}

__global__ void fold_kernel(const double* __restrict__ x, const double* __restrict__ y,
                            const double* __restrict__ z, std::size_t count, double box, int fold,
                            double* __restrict__ out) {
  const std::size_t p = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (p >= count) return;
  out[p] = pk::fold_position(x[p], box, fold);
  out[count + p] = pk::fold_position(y[p], box, fold);
  out[2 * count + p] = pk::fold_position(z[p], box, fold);
}

}  // namespace

SpectrumTables::SpectrumTables(const PowerSpectrumSettings& settings, int side) : binning(settings, side), n(side) {
  const pk::AxisTables tables(settings.window, n);
  std::vector<double> values(tables.w);
  values.insert(values.end(), tables.a.begin(), tables.a.end());
  values.insert(values.end(), tables.b.begin(), tables.b.end());
  const std::vector<std::int64_t> edge_values = binning.squared_edges(n);
  static_assert(sizeof(long long) == sizeof(std::int64_t), "edges travel as long long");
  axis.ensure_exact(values.size());
  axis.upload(values.data(), values.size());
  edges.ensure_exact(edge_values.size());
  edges.upload(reinterpret_cast<const long long*>(edge_values.data()), edge_values.size());
}

std::size_t bin_mode_sums_bytes(int n, int ny, int bins) {
  return static_cast<std::size_t>(n) * row_groups(n, ny, bins) * bins * sizeof(ModeSums);
}

pk::BinSums bin_mode_sums(const ModeSlab& modes, const SpectrumTables& tables, double box, double total,
                          cudaStream_t stream, cudaEvent_t after_kernel) {
  const int n = modes.n;
  if (n != tables.n) fail("internal: P(k) modes of a {}^3 mesh binned with the tables of {}^3", n, tables.n);
  BinArgs g;
  g.first = modes.first;
  g.shifted = modes.shifted;
  g.w = tables.axis.data();
  g.alias_a = g.w + n;
  g.alias_b = g.w + 2 * n;
  g.edges = tables.edges.data();
  g.n = n;
  g.y0 = modes.y0;
  g.ny = modes.ny;
  g.bins = tables.binning.count;
  g.groups = row_groups(n, modes.ny, g.bins);
  g.rows_per_group = g.groups > 0 ? (modes.ny + g.groups - 1) / g.groups : 0;
  g.volume = box * box * box;
  g.total = total;
  const std::size_t cells = static_cast<std::size_t>(n) * g.groups * g.bins;
  std::vector<ModeSums> host(cells);
  if (cells > 0) {
    DeviceArray<ModeSums> partial;
    partial.ensure_exact(cells);
    bin_modes_kernel<<<grid_for(cells), kThreads, 0, stream>>>(g, partial.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    if (after_kernel) ORBIS_CUDA_CHECK(cudaEventRecord(after_kernel, stream));
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(host.data(), partial.data(), cells * sizeof(ModeSums), cudaMemcpyDeviceToHost,
                                     stream));
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    partial.release();
  } else if (after_kernel) {
    ORBIS_CUDA_CHECK(cudaEventRecord(after_kernel, stream));
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  // The partial sums added in (plane, group) order: the same bits at every call.
  pk::BinSums out(g.bins);
  for (std::size_t c = 0; c < cells; ++c) {
    const int b = static_cast<int>(c % g.bins);
    out.k[b] += host[c].k;
    out.power[b] += host[c].power;
    out.shot[b] += host[c].shot;
    out.modes[b] += host[c].modes;
  }
  return out;
}

void fold_positions(const double* x, const double* y, const double* z, std::size_t count, double box, int fold,
                    double* out, cudaStream_t stream) {
  if (count == 0) return;
  fold_kernel<<<grid_for(count), kThreads, 0, stream>>>(x, y, z, count, box, fold, out);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace orbis::gpu
