// The P(k) estimator's per-mode sums on the device, the one implementation that both device
// estimators use: the one-GPU spectrum (gpu/power_spectrum_cuda.cuh, the whole mesh's modes)
// and the spectrum over ranks (gpu/power_spectrum_cuda_ranks.hpp, each rank its y slab of
// modes). Each mode is weighed as the host's binned_spectrum weighs it (analysis/
// power_spectrum.cpp: window deconvolution, the interlaced meshes' average, the shot noise's
// alias sums, +k and -k), from the host's own tables (analysis/power_spectrum_estimator.hpp).
//
// Order: one thread per (x plane, row group, bin) sums its modes in a fixed order (the bin's
// modes in a row are one run of k: bins are ranges of the integer |m|^2, taken from the host's
// binning), the partial sums go to an array, and the host adds them in (plane, group) order.
// So the sums are the same bits at every call for the same modes.
#pragma once
#include <cstddef>

#include <cuda_runtime.h>

#include "analysis/power_spectrum.hpp"
#include "analysis/power_spectrum_estimator.hpp"
#include "gpu/device_buffer.cuh"

namespace orbis::gpu {

// The host's tables of one mesh side on the device: per axis index the window W_1 and the
// alias sums A and B (pk::AxisTables; w | a | b, n doubles each), and the bins' edges in
// |m|^2 (pk::Binning::squared_edges). From the pool, on the current allocation stream.
struct SpectrumTables {
  SpectrumTables(const PowerSpectrumSettings& settings, int n);
  pk::Binning binning;
  int n = 0;
  DeviceArray<double> axis;
  DeviceArray<long long> edges;
  void release() {
    axis.release();
    edges.release();
  }
  // Device bytes of the tables.
  static std::size_t bytes(int n, int bins) {
    return 3 * static_cast<std::size_t>(n) * sizeof(double) + (bins + 1) * sizeof(long long);
  }
};

// The transform of the counts (and of the half-cell-shifted counts when interlaced) on this
// device: every x plane i, the y columns [y0, y0 + ny), k < n/2+1, stored [i][j - y0][k]. The
// whole mesh (cuFFT's 3D in-place D2Z) is y0 = 0, ny = n; a rank's y slab of the slab
// decomposition (pm/slab_transpose.hpp) is its y planes.
struct ModeSlab {
  const double2* first = nullptr;
  const double2* shifted = nullptr;   // null: not interlaced
  int n = 0, y0 = 0, ny = 0;
};

// The bins' sums over the slab's modes for `total` particles in a box of box_mpc_h, queued on
// `stream` and waited for; the partial sums' memory comes from the pool for the call.
// `after_kernel` (optional) is recorded on the stream once the sums are made (phase timing).
pk::BinSums bin_mode_sums(const ModeSlab& modes, const SpectrumTables& tables, double box_mpc_h, double total,
                          cudaStream_t stream, cudaEvent_t after_kernel = nullptr);
// Device bytes of bin_mode_sums' partial sums for a slab of ny columns of an n mesh.
std::size_t bin_mode_sums_bytes(int n, int ny, int bins);

// out = the positions folded F times (pk::fold_position: any coordinate, wrapped), x | y | z
// blocks of count.
void fold_positions(const double* x, const double* y, const double* z, std::size_t count, double box_mpc_h,
                    int fold, double* out, cudaStream_t stream);

}  // namespace orbis::gpu
