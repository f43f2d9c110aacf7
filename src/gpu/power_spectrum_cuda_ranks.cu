#include "gpu/power_spectrum_cuda_ranks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/power_spectrum_estimator.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "gpu/cuda_check.cuh"
#include "gpu/device_buffer.cuh"
#include "gpu/pm_cuda_ranks.hpp"
#include "gpu/power_spectrum_bins_cuda.cuh"
#include "pm/pm_solver.hpp"

namespace orbis::gpu {
namespace {

// The mesh over the ranks of a P(k) of these settings: the counts' modes in double (as the
// host estimator's and the one-GPU spectrum's meshes); no force split.
PmSettings counts_mesh(const PowerSpectrumSettings& s, double box) {
  PmSettings pm;
  pm.box_mpc_h = box;
  pm.grid_side = s.grid_side;
  pm.window = s.window;
  pm.r_s_mpc_h = 0;
  pm.double_mesh = true;
  pm.interlaced = s.interlacing;
  return pm;
}

// Every rank's bin sums, added in rank order on every rank (the same bits everywhere); the
// mode counts are integers, summed.
pk::BinSums sum_over_ranks(const pk::BinSums& mine, const Comm& comm) {
  const std::size_t bins = mine.k.size();
  std::vector<double> packed(mine.k);
  packed.insert(packed.end(), mine.power.begin(), mine.power.end());
  packed.insert(packed.end(), mine.shot.begin(), mine.shot.end());
  const std::vector<double> all = comm.allgatherv(packed);
  pk::BinSums total(static_cast<int>(bins));
  for (std::size_t at = 0; at < all.size(); at += 3 * bins)
    for (std::size_t b = 0; b < bins; ++b) {
      total.k[b] += all[at + b];
      total.power[b] += all[at + bins + b];
      total.shot[b] += all[at + 2 * bins + b];
    }
  total.modes = mine.modes;
  comm.reduce(total.modes, Comm::Op::sum);
  return total;
}

}  // namespace

struct CudaPowerSpectrumRanks::Impl {
  Comm comm;
  int device = 0;
  std::unique_ptr<CudaPmRanks> mesh;   // for the side, window and box below
  int side = 0;
  Window window = Window::tsc;
  double box = 0;
  double phase_ms[2] = {0, 0};   // deposit and transforms, binning

  // The mesh over the ranks for these settings, planned (collectively) when they change.
  CudaPmRanks& mesh_for(const PowerSpectrumSettings& s, double box_mpc_h) {
    if (mesh && side == s.grid_side && window == s.window && box == box_mpc_h) return *mesh;
    mesh.reset();
    run_collectively(comm, [&] {
      mesh = std::make_unique<CudaPmRanks>(counts_mesh(s, box_mpc_h), comm, device, CudaPmRanks::Use::counts);
    });
    side = s.grid_side;
    window = s.window;
    box = box_mpc_h;
    return *mesh;
  }

  // One spectrum's bin sums over every rank (binned_spectrum on the host) of this rank's
  // particles at pos; nullopt (every rank) when the meshes do not fit.
  std::optional<pk::BinSums> spectrum(CudaPmRanks& m, const double* pos, std::size_t count, std::uint64_t total,
                                      const PowerSpectrumSettings& s, const SpectrumTables& tables,
                                      DeviceAlltoallv* transposes, cudaStream_t stream) {
    const int n = s.grid_side;
    const std::vector<double> shifts = s.interlacing ? std::vector<double>{0.0, 0.5} : std::vector<double>{0.0};
    pk::BinSums mine(tables.binning.count);
    Stopwatch watch;
    double binning_seconds = 0;
    const bool done = m.count_modes(
        pos, count, shifts,
        [&](const std::vector<const void*>& slabs) {
          Stopwatch binning;
          const ModeSlab modes{static_cast<const double2*>(slabs[0]),
                               slabs.size() > 1 ? static_cast<const double2*>(slabs[1]) : nullptr, n, m.y_first(),
                               m.y_count()};
          mine = bin_mode_sums(modes, tables, box, static_cast<double>(total), stream);
          binning_seconds = binning.seconds();
        },
        stream, bin_mode_sums_bytes(n, m.y_count(), tables.binning.count), transposes);
    if (!done) return std::nullopt;
    Stopwatch reduction;
    pk::BinSums sums = sum_over_ranks(mine, comm);
    phase_ms[0] += 1e3 * (watch.seconds() - reduction.seconds() - binning_seconds);
    phase_ms[1] += 1e3 * (binning_seconds + reduction.seconds());
    return sums;
  }
};

CudaPowerSpectrumRanks::CudaPowerSpectrumRanks(const Comm& comm, int device) : impl_(std::make_unique<Impl>()) {
  impl_->comm = comm;
  impl_->device = device;
}

CudaPowerSpectrumRanks::~CudaPowerSpectrumRanks() = default;

std::size_t CudaPowerSpectrumRanks::device_bytes(std::size_t count, double box_mpc_h, const PowerSpectrumSettings& s) {
  ORBIS_CUDA_CHECK(cudaSetDevice(impl_->device));
  const CudaPmRanks& m = impl_->mesh_for(s, box_mpc_h);
  const int n = s.grid_side;
  const pk::Binning binning(s, n);
  const std::size_t folded = s.fold_factor > 1 ? 3 * count * sizeof(double) : 0;
  return folded + SpectrumTables::bytes(n, binning.count) + bin_mode_sums_bytes(n, m.y_count(), binning.count) +
         m.count_modes_bytes(count, s.interlacing ? 2 : 1);
}

std::optional<PowerSpectrum> CudaPowerSpectrumRanks::measure(const double* pos, std::size_t count, double box_mpc_h,
                                                             const PowerSpectrumSettings& s, CUstream_st* stream_in,
                                                             DeviceAlltoallv* transposes) {
  Impl& im = *impl_;
  const cudaStream_t stream = stream_in;
  const int n = s.grid_side;
  // The same settings on every rank: every rank fails alike.
  if (n < 4 || n % 2 != 0) fail("P(k): mesh side {} must be even and at least 4", n);
  if (!(box_mpc_h > 0)) fail("P(k): box size {} Mpc/h must be positive", box_mpc_h);
  if (s.fold_factor < 1) fail("P(k): fold factor {} must be at least 1", s.fold_factor);
  const std::uint64_t total = im.comm.sum(static_cast<std::uint64_t>(count));
  if (total == 0) fail("P(k): no particles");
  ORBIS_CUDA_CHECK(cudaSetDevice(im.device));
  CudaPmRanks& m = im.mesh_for(s, box_mpc_h);
  for (double& ms : im.phase_ms) ms = 0;
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));   // the positions' producers
  AllocationStream scope(stream);

  // The host's tables: the same windows, alias sums and bin edges.
  SpectrumTables tables(s, n);
  const std::optional<pk::BinSums> unfolded = im.spectrum(m, pos, count, total, s, tables, transposes, stream);
  std::optional<pk::BinSums> folded_sums;
  if (unfolded && s.fold_factor > 1) {
    DeviceArray<double> folded;
    folded.ensure_exact(std::max<std::size_t>(3 * count, 1));
    fold_positions(pos, pos + count, pos + 2 * count, count, box_mpc_h, s.fold_factor, folded.data(), stream);
    folded_sums = im.spectrum(m, folded.data(), count, total, s, tables, transposes, stream);
    folded.release();
  }
  tables.release();
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (!unfolded || (s.fold_factor > 1 && !folded_sums)) return std::nullopt;
  return pk::assemble(s, box_mpc_h, total, *unfolded, folded_sums ? &*folded_sums : nullptr, {});
}

std::string CudaPowerSpectrumRanks::last_phases() const {
  return fmt::format("deposit and transforms {:.1f} ms, binning {:.1f} ms", impl_->phase_ms[0], impl_->phase_ms[1]);
}

}  // namespace orbis::gpu
