// The matter power spectrum on the device, from positions already there (the CUDA step
// engine's), with the estimator of analysis/power_spectrum.hpp: the same window, interlacing,
// folding, binning and shot noise, from the same tables (analysis/power_spectrum_estimator.hpp).
//
//   deposit: the PM's fixed-point assignment (gpu/pm_cuda_mesh.cuh, the host's formula and
//     scale: integer sums, the same bits for any particle order), the counts minus their
//     mean into a double mesh; the half-cell-shifted copy when interlaced;
//   transforms: cuFFT's in-place D2Z (unnormalised, e^{-i k.x}, as FFTW's);
//   binning: the per-mode sums of gpu/power_spectrum_bins_cuda.cuh (shared with the spectrum
//     over ranks, gpu/power_spectrum_cuda_ranks.hpp) over the whole mesh, in a fixed order. So
//     the result is the same bits at every call, and equals the host's to the transforms'
//     rounding (cuFFT vs FFTW); the mode counts and k_mean are the host's exactly up to the
//     order of summation.
// Folding (fold_factor F > 1) measures a second spectrum from positions folded on the device.
// Over several ranks, gpu/power_spectrum_cuda_ranks.hpp measures the same estimator with the
// meshes in x slabs over the ranks' GPUs.
//
// Memory, from the stream-ordered pool (gpu/device_buffer.cuh) for the length of a call and
// given back at its end: the 64-bit sums (8 n^3 bytes), one or two (interlaced) padded double
// meshes (8 n^2 2(n/2+1) bytes each), cuFFT's work area, the partial sums and, folded, a copy of
// the positions (24 bytes a particle). 256^3 particles on 512^3, interlaced: 3.2 GiB plus the
// work area. device_bytes() says how much; the caller falls back to the host when it is not free.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include <cuda_runtime.h>

#include "analysis/power_spectrum.hpp"

namespace orbis::gpu {

class CudaPowerSpectrum {
 public:
  CudaPowerSpectrum();
  ~CudaPowerSpectrum();
  CudaPowerSpectrum(const CudaPowerSpectrum&) = delete;
  CudaPowerSpectrum& operator=(const CudaPowerSpectrum&) = delete;

  // Device bytes measure() takes at most for `count` particles (the cuFFT plan for the mesh
  // is made here if not yet, to know its work area).
  std::size_t device_bytes(std::size_t count, const PowerSpectrumSettings& settings);
  // The spectrum of the `count` particles at x, y, z (device arrays, any coordinates: they are
  // wrapped into [0, box)) in a periodic box of box_mpc_h, queued on `stream` and waited for.
  // The linear column is NaN (the caller knows the cosmology). Invalid settings: an Error, as
  // measure_power_spectrum's.
  PowerSpectrum measure(const double* x, const double* y, const double* z, std::size_t count, double box_mpc_h,
                        const PowerSpectrumSettings& settings, cudaStream_t stream);
  // The last measure()'s device phases in ms (deposit, transforms, binning), summed over its
  // spectra (two when folded): for the benchmark and the test's log.
  std::string last_phases() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace orbis::gpu
