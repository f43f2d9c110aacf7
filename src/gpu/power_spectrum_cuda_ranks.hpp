// The matter power spectrum over MPI ranks on the ranks' GPUs, from positions already there
// (the CUDA step engine's over ranks), with the estimator of analysis/power_spectrum.hpp: the
// one-GPU spectrum's (gpu/power_spectrum_cuda.cuh) with the meshes in x slabs over the ranks.
//
//   deposit and transforms: CudaPmRanks' counts' modes (gpu/pm_cuda_ranks.hpp, count_modes,
//     built with Use::counts on the P(k) mesh): each particle routed to the owner of its
//     stencil's first x plane, the fixed-point counts (the host's formula and scale: integer
//     sums, the same bits for any particle order and any spread over the ranks) into the
//     rank's x slab and ghost planes, the ghost planes added into their owners', the counts
//     minus their mean, the 2D R2C of the x planes, the transpose to y slabs and the 1D
//     transforms along x; the half-cell-shifted mesh too when interlaced;
//   binning: each rank its y slab's modes with the one-GPU spectrum's per-mode sums
//     (gpu/power_spectrum_bins_cuda.cuh: window deconvolution, interlacing, shot noise, the
//     host's bins and tables), in a fixed order; every rank's bin sums gathered to every rank
//     and added in rank order (the mode counts, integers, summed). So every rank returns the
//     same bits, the same at every call for a given rank count (however the particles are
//     spread over the ranks), and the host's and the one-GPU spectrum's to the transforms'
//     rounding (tests/mpi/test_pk_ranks_cuda.cpp);
//   folding (fold_factor F > 1): a second spectrum from the positions folded on the device
//     (pk::fold_position; any coordinates: wrapped), routed and deposited as the first.
//
// Memory per rank, from the device pool for the length of a call and given back at its end:
// CudaPmRanks::count_modes_bytes (a double x slab with ghost planes and a scratch of the same
// size, one more y slab when interlaced: ~(16 + 8) n^3 / P bytes; the routed positions),
// the bins' partial sums and tables and, folded, a copy of the rank's positions (24 bytes a
// particle). 512^3 interlaced over 2 ranks: ~1.6 GB a rank. device_bytes() says how much;
// when the device lacks it the caller measures on the host. The transposes go device to device
// through the step engine's PM exchange where it lends one (CUDA IPC), else through host memory
// (ordinary, freed at return) and MPI.
#pragma once
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "analysis/power_spectrum.hpp"
#include "core/comm.hpp"

struct CUstream_st;

namespace orbis::gpu {

class DeviceAlltoallv;

class CudaPowerSpectrumRanks {
 public:
  // For the ranks of `comm`, each on its `device` (this rank's); plans nothing yet.
  CudaPowerSpectrumRanks(const Comm& comm, int device);
  ~CudaPowerSpectrumRanks();
  CudaPowerSpectrumRanks(const CudaPowerSpectrumRanks&) = delete;
  CudaPowerSpectrumRanks& operator=(const CudaPowerSpectrumRanks&) = delete;

  // Device bytes measure() takes from the pool on this rank at most for `count` own particles
  // (an estimate: the particles routed to this rank counted as many as its own). Collective:
  // the mesh over the ranks is planned here if not yet (a failure is every rank's).
  std::size_t device_bytes(std::size_t count, double box_mpc_h, const PowerSpectrumSettings& settings);
  // The spectrum of every rank's particles, this rank's `count` at pos (device memory,
  // x | y | z blocks of count doubles, Mpc/h, any coordinates: wrapped into [0, box)) in a
  // periodic box of box_mpc_h. Collective over comm; work is queued on `stream` (earlier work
  // on it is waited for) and waited for. Every rank returns the same value; the linear column
  // is NaN (the caller knows the cosmology). nullopt on every rank when some rank's device
  // cannot hold the meshes once the particles are routed (nothing is kept). Invalid settings
  // or no particles on any rank: an Error on every rank, as measure_power_spectrum's.
  // `transposes` (may be null): an exchange that moves device memory between the ranks
  // directly, lent for the transposes (CudaPmRanks::count_modes).
  std::optional<PowerSpectrum> measure(const double* pos, std::size_t count, double box_mpc_h,
                                       const PowerSpectrumSettings& settings, CUstream_st* stream,
                                       DeviceAlltoallv* transposes = nullptr);
  // The last measure()'s wall time in ms per phase (deposit and transforms with the exchanges,
  // binning with the sums over the ranks), summed over its spectra: for the log.
  std::string last_phases() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace orbis::gpu
