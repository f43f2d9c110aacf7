#include "gpu/power_spectrum_cuda.cuh"

#include <cufft.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/power_spectrum_estimator.hpp"
#include "core/error.hpp"
#include "core/exact_sum.hpp"
#include "core/units.hpp"
#include "gpu/cuda_check.cuh"
#include "gpu/cufft_check.cuh"
#include "gpu/device_buffer.cuh"
#include "gpu/pm_cuda_mesh.cuh"
#include "pm/fixed_point_mesh.hpp"

namespace orbis::gpu {
namespace {

constexpr unsigned kThreads = 256;
unsigned grid_for(std::size_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

std::size_t cube(int n) { return static_cast<std::size_t>(n) * n * n; }
// Reals of one padded mesh, n * n * 2(n/2+1) (the in-place R2C layout).
std::size_t padded_reals(int n) { return static_cast<std::size_t>(n) * n * 2 * (n / 2 + 1); }

// The binning kernel's threads: about 2^18 (enough to fill an H200), as (x plane, row group,
// bin) triples; more row groups when there are few bins (log bins: tens).
int row_groups(int n, int bins) {
  const long long want = (1LL << 18) / (static_cast<long long>(n) * bins);
  return static_cast<int>(std::clamp<long long>(want, 1, n));
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
  const double2* first = nullptr;    // the transform of the mesh, n x n x (n/2+1)
  const double2* shifted = nullptr;  // of the half-cell-shifted mesh; null: not interlaced
  const double* w = nullptr;         // the host's tables (pk::AxisTables), n each
  const double* alias_a = nullptr;
  const double* alias_b = nullptr;
  const long long* edges = nullptr;  // bins + 1 edges in |m|^2 (pk::Binning::squared_edges)
  int n = 0, bins = 0, groups = 0, rows_per_group = 0;
  double volume = 0, total = 0;
};

// Thread (i, group, b): the modes of bin b in x plane i, rows [group * rows_per_group, ...),
// in order of j then k, each as the host's binned_spectrum computes it. In a row |m|^2 =
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
  const int j_end = min(n, (group + 1) * g.rows_per_group);
  for (int j = group * g.rows_per_group; j < j_end; ++j) {
    const int my = j <= n / 2 ? j : j - n;
    const long long r2 = static_cast<long long>(mx) * mx + static_cast<long long>(my) * my;
    if (r2 >= q_hi) continue;
    const int k_lo = static_cast<int>(ceil_sqrt(q_lo - r2));
    const int k_hi = static_cast<int>(min(static_cast<long long>(nzc), ceil_sqrt(q_hi - r2)));
    const std::size_t row = (static_cast<std::size_t>(i) * n + j) * nzc;
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

// Positions folded F times (pk::fold_position), x | y | z blocks of count.
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

struct CudaPowerSpectrum::Impl {
  int plan_n = 0;   // the mesh side of `plan` (0: none yet)
  cufftHandle plan = 0;
  std::size_t work_bytes = 0;
  // Phase timing: events at the phase boundaries of a spectrum; ms per phase, summed.
  cudaEvent_t events[4] = {};
  double phase_ms[3] = {0, 0, 0};   // deposit, transforms, binning

  Impl() {
    for (cudaEvent_t& e : events) ORBIS_CUDA_CHECK(cudaEventCreate(&e));
  }
  ~Impl() {
    if (plan_n) cufftDestroy(plan);
    for (cudaEvent_t e : events) cudaEventDestroy(e);
  }
  // The in-place D2Z plan of the padded n^3 mesh, without a work area of its own (it comes
  // from the pool at each call).
  void make_plan(int n) {
    if (plan_n == n) return;
    if (plan_n) ORBIS_CUFFT_CHECK(cufftDestroy(plan));
    plan_n = 0;
    const long long nn = n, nzc = n / 2 + 1;
    long long dims[3] = {nn, nn, nn}, real_embed[3] = {nn, nn, 2 * nzc}, complex_embed[3] = {nn, nn, nzc};
    ORBIS_CUFFT_CHECK(cufftCreate(&plan));
    plan_n = n;
    ORBIS_CUFFT_CHECK(cufftSetAutoAllocation(plan, 0));
    ORBIS_CUFFT_CHECK(cufftMakePlanMany64(plan, 3, dims, real_embed, 1, nn * nn * 2 * nzc, complex_embed, 1,
                                          nn * nn * nzc, CUFFT_D2Z, 1, &work_bytes));
  }

  // One spectrum's sums (binned_spectrum on the host) of the particles at x | y | z.
  pk::BinSums spectrum(const double* x, const double* y, const double* z, std::size_t count, double box,
                       const PowerSpectrumSettings& s, const pk::Binning& binning, const double* tables,
                       const long long* edges, cudaStream_t stream);
};

pk::BinSums CudaPowerSpectrum::Impl::spectrum(const double* x, const double* y, const double* z, std::size_t count,
                                              double box, const PowerSpectrumSettings& s,
                                              const pk::Binning& binning, const double* tables,
                                              const long long* edges, cudaStream_t stream) {
  const int n = s.grid_side;
  // The counts minus their mean in 64-bit fixed point, as the host estimator assigns them
  // (pm/fixed_point_mesh.hpp: the same scale and mean).
  const double scale = fixed_point_scale(count);
  const double mean = pm_fixed_point_mean(count, scale, n);
  DeviceArray<unsigned long long> sums;
  sums.ensure_exact(cube(n));
  DeviceArray<double> first, shifted;
  auto assign = [&](double shift_cells, DeviceArray<double>& mesh) {
    mesh.ensure_exact(padded_reals(n));
    ORBIS_CUDA_CHECK(cudaMemsetAsync(sums.data(), 0, cube(n) * sizeof(unsigned long long), stream));
    pm_assign_fixed(x, y, z, count, PmMeshGeometry{n, s.window, box, shift_cells}, 0, n, scale, sums.data(), stream);
    pm_fixed_to_mesh<double>(sums.data(), n, 0, n, mean, 1.0 / scale, mesh.data(), stream);
  };
  ORBIS_CUDA_CHECK(cudaEventRecord(events[0], stream));
  assign(0.0, first);
  if (s.interlacing) assign(0.5, shifted);
  sums.release();
  ORBIS_CUDA_CHECK(cudaEventRecord(events[1], stream));

  DeviceArray<unsigned char> work;
  if (work_bytes > 0) {
    work.ensure_exact(work_bytes);
    ORBIS_CUFFT_CHECK(cufftSetWorkArea(plan, work.data()));
  }
  ORBIS_CUFFT_CHECK(cufftSetStream(plan, stream));
  cufft_forward_real(plan, first.data());
  if (s.interlacing) cufft_forward_real(plan, shifted.data());
  work.release();
  ORBIS_CUDA_CHECK(cudaEventRecord(events[2], stream));

  BinArgs g;
  g.first = reinterpret_cast<const double2*>(first.data());
  g.shifted = s.interlacing ? reinterpret_cast<const double2*>(shifted.data()) : nullptr;
  g.w = tables;
  g.alias_a = tables + n;
  g.alias_b = tables + 2 * n;
  g.edges = edges;
  g.n = n;
  g.bins = binning.count;
  g.groups = row_groups(n, binning.count);
  g.rows_per_group = (n + g.groups - 1) / g.groups;
  g.volume = box * box * box;
  g.total = static_cast<double>(count);
  const std::size_t cells = static_cast<std::size_t>(n) * g.groups * g.bins;
  DeviceArray<ModeSums> partial;
  partial.ensure_exact(cells);
  bin_modes_kernel<<<grid_for(cells), kThreads, 0, stream>>>(g, partial.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  ORBIS_CUDA_CHECK(cudaEventRecord(events[3], stream));
  std::vector<ModeSums> host(cells);
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(host.data(), partial.data(), cells * sizeof(ModeSums), cudaMemcpyDeviceToHost,
                                   stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  partial.release();
  first.release();
  shifted.release();
  for (int p = 0; p < 3; ++p) {
    float ms = 0;
    ORBIS_CUDA_CHECK(cudaEventElapsedTime(&ms, events[p], events[p + 1]));
    phase_ms[p] += ms;
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

CudaPowerSpectrum::CudaPowerSpectrum() : impl_(std::make_unique<Impl>()) {}
CudaPowerSpectrum::~CudaPowerSpectrum() = default;

std::size_t CudaPowerSpectrum::device_bytes(std::size_t count, const PowerSpectrumSettings& s) {
  const int n = s.grid_side;
  impl_->make_plan(n);
  const pk::Binning binning(s, n);
  const std::size_t meshes = (s.interlacing ? 2 : 1) * padded_reals(n) * sizeof(double);
  const std::size_t partial = static_cast<std::size_t>(n) * row_groups(n, binning.count) * binning.count * sizeof(ModeSums);
  const std::size_t tables = 3 * n * sizeof(double) + (binning.count + 1) * sizeof(long long);
  const std::size_t folded = s.fold_factor > 1 ? 3 * count * sizeof(double) : 0;
  return folded + tables + meshes + std::max(cube(n) * sizeof(unsigned long long), impl_->work_bytes + partial);
}

PowerSpectrum CudaPowerSpectrum::measure(const double* x, const double* y, const double* z, std::size_t count,
                                         double box_mpc_h, const PowerSpectrumSettings& s, cudaStream_t stream) {
  const int n = s.grid_side;
  if (n < 4 || n % 2 != 0) fail("P(k): mesh side {} must be even and at least 4", n);
  if (!(box_mpc_h > 0)) fail("P(k): box size {} Mpc/h must be positive", box_mpc_h);
  if (s.fold_factor < 1) fail("P(k): fold factor {} must be at least 1", s.fold_factor);
  if (count == 0) fail("P(k): no particles");
  impl_->make_plan(n);
  AllocationStream scope(stream);
  for (double& ms : impl_->phase_ms) ms = 0;

  // The host's tables: the same windows, alias sums and bin edges.
  const pk::Binning binning(s, n);
  const pk::AxisTables axis(s.window, n);
  std::vector<double> table_values(axis.w);
  table_values.insert(table_values.end(), axis.a.begin(), axis.a.end());
  table_values.insert(table_values.end(), axis.b.begin(), axis.b.end());
  const std::vector<std::int64_t> edge_values = binning.squared_edges(n);
  static_assert(sizeof(long long) == sizeof(std::int64_t), "edges travel as long long");
  DeviceArray<double> tables;
  tables.ensure_exact(table_values.size());
  tables.upload(table_values.data(), table_values.size());
  DeviceArray<long long> edges;
  edges.ensure_exact(edge_values.size());
  edges.upload(reinterpret_cast<const long long*>(edge_values.data()), edge_values.size());

  const pk::BinSums unfolded =
      impl_->spectrum(x, y, z, count, box_mpc_h, s, binning, tables.data(), edges.data(), stream);
  if (s.fold_factor == 1) {
    tables.release();
    edges.release();
    return pk::assemble(s, box_mpc_h, count, unfolded, nullptr, {});
  }
  DeviceArray<double> folded;
  folded.ensure_exact(3 * count);
  fold_kernel<<<grid_for(count), kThreads, 0, stream>>>(x, y, z, count, box_mpc_h, s.fold_factor, folded.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  const pk::BinSums folded_sums = impl_->spectrum(folded.data(), folded.data() + count, folded.data() + 2 * count,
                                                  count, box_mpc_h, s, binning, tables.data(), edges.data(), stream);
  folded.release();
  tables.release();
  edges.release();
  return pk::assemble(s, box_mpc_h, count, unfolded, &folded_sums, {});
}

std::string CudaPowerSpectrum::last_phases() const {
  return fmt::format("deposit {:.1f} ms, transforms {:.1f} ms, binning {:.1f} ms", impl_->phase_ms[0],
                     impl_->phase_ms[1], impl_->phase_ms[2]);
}

}  // namespace orbis::gpu
