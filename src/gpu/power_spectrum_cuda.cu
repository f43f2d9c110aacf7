#include "gpu/power_spectrum_cuda.cuh"

#include <cufft.h>
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "analysis/power_spectrum_estimator.hpp"
#include "core/error.hpp"
#include "gpu/cuda_check.cuh"
#include "gpu/cufft_check.cuh"
#include "gpu/device_buffer.cuh"
#include "gpu/pm_cuda_mesh.cuh"
#include "gpu/power_spectrum_bins_cuda.cuh"
#include "pm/fixed_point_mesh.hpp"

namespace orbis::gpu {
namespace {

std::size_t cube(int n) { return static_cast<std::size_t>(n) * n * n; }
// Reals of one padded mesh, n * n * 2(n/2+1) (the in-place R2C layout).
std::size_t padded_reals(int n) { return static_cast<std::size_t>(n) * n * 2 * (n / 2 + 1); }

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
                       const PowerSpectrumSettings& s, const SpectrumTables& tables, cudaStream_t stream);
};

pk::BinSums CudaPowerSpectrum::Impl::spectrum(const double* x, const double* y, const double* z, std::size_t count,
                                              double box, const PowerSpectrumSettings& s,
                                              const SpectrumTables& tables, cudaStream_t stream) {
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

  // The whole mesh's modes: every y column (power_spectrum_bins_cuda.cuh).
  const ModeSlab modes{reinterpret_cast<const double2*>(first.data()),
                       s.interlacing ? reinterpret_cast<const double2*>(shifted.data()) : nullptr, n, 0, n};
  const pk::BinSums out = bin_mode_sums(modes, tables, box, static_cast<double>(count), stream, events[3]);
  first.release();
  shifted.release();
  for (int p = 0; p < 3; ++p) {
    float ms = 0;
    ORBIS_CUDA_CHECK(cudaEventElapsedTime(&ms, events[p], events[p + 1]));
    phase_ms[p] += ms;
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
  const std::size_t partial = bin_mode_sums_bytes(n, n, binning.count);
  const std::size_t tables = SpectrumTables::bytes(n, binning.count);
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
  SpectrumTables tables(s, n);
  const pk::BinSums unfolded = impl_->spectrum(x, y, z, count, box_mpc_h, s, tables, stream);
  if (s.fold_factor == 1) {
    tables.release();
    return pk::assemble(s, box_mpc_h, count, unfolded, nullptr, {});
  }
  DeviceArray<double> folded;
  folded.ensure_exact(3 * count);
  fold_positions(x, y, z, count, box_mpc_h, s.fold_factor, folded.data(), stream);
  const pk::BinSums folded_sums = impl_->spectrum(folded.data(), folded.data() + count, folded.data() + 2 * count,
                                                  count, box_mpc_h, s, tables, stream);
  folded.release();
  tables.release();
  return pk::assemble(s, box_mpc_h, count, unfolded, &folded_sums, {});
}

std::string CudaPowerSpectrum::last_phases() const {
  return fmt::format("deposit {:.1f} ms, transforms {:.1f} ms, binning {:.1f} ms", impl_->phase_ms[0],
                     impl_->phase_ms[1], impl_->phase_ms[2]);
}

}  // namespace orbis::gpu
