// The particle-mesh solver on the GPU (cuFFT) as C++ sees it: the same force as PmSolver
// (pm/pm_solver.hpp: TSC or CIC, the deconvolved long-range Green's function and spectral
// gradient of TreePM, or the two-mesh PM-only force), computed from positions that already
// live in device memory. No CUDA header is needed here: a stream is a CUstream_st* (what
// cudaStream_t names).
//
// Device memory (plan_bytes() gives it before anything is allocated): the tables are
// allocated at construction and kept; the meshes and the cuFFT work area are one block taken
// from the device's stream-ordered pool by each device-pointer accelerations() or
// potential_energy() call and given back, queued on its stream, when it ends, so that between
// calls the same memory serves the tree and the short-range step (gpu/device_buffer.cuh):
//   - one complex mesh, phi(k), n^2 * 2(n/2+1) reals (two for PM-only, whose interlaced
//     meshes meet in the Green's function; the long range's take turns in one),
//   - one work mesh of the same size: the fixed-point density while assigning, then each
//     gradient component in turn (transformed and interpolated one at a time, so the three
//     components never need three meshes),
//   - the cuFFT work area, sized by cuFFT for these plans and shared by all of them,
//   - PM-only: the optimal influence table (2 (n/2+1)^3 reals); small per-axis tables.
// Nothing per particle: particles are read where they are and forces written there. cuFFT
// needs no work area for these in-place transforms (measured on an H100 with CUDA 13 for 256^3
// to 1024^3), so the long range of 512^3 particles on a 1024^3 float mesh takes 2 x 4.3 GB,
// 64 bytes per particle (tests/bench/bench_pm_cuda).
//
// Assignment is deterministic: weights are summed as 64-bit fixed-point integers
// (pm_cuda_mesh.cuh says why and with what resolution), so the mesh, and hence every force,
// is bitwise the same from run to run and for any order of the particles.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/timer.hpp"
#include "core/vec3.hpp"
#include "pm/pm_solver.hpp"

struct CUstream_st;

namespace orbis {

// Device bytes of the PM, by kind (plan_bytes, bytes()).
struct CudaPmMemory {
  std::size_t meshes = 0;      // complex meshes and the work mesh
  std::size_t fft_work = 0;    // the shared cuFFT work area
  std::size_t energy_rows = 0;   // the energy check's row sums, when a force pass sums them (2 n^2 doubles)
  std::size_t tables = 0;      // influence table (PM-only) and per-axis tables
  std::size_t particles = 0;   // per-particle scratch (none) and, once the host-vector
                               // accelerations() has run, its staging arrays
  std::size_t total() const { return meshes + fft_work + tables + particles; }   // held and per call, rows aside
  std::size_t per_call() const { return meshes + fft_work + energy_rows; }   // from the pool by each call
};

class CudaPmSolver {
 public:
  // Plans the transforms and allocates everything on `device` (made current); fails before
  // allocating, with bytes needed and free, when the plan does not fit.
  CudaPmSolver(const PmSettings& settings, int device = 0);
  ~CudaPmSolver();
  CudaPmSolver(const CudaPmSolver&) = delete;
  CudaPmSolver& operator=(const CudaPmSolver&) = delete;

  const PmSettings& settings() const { return settings_; }

  // a[p] = g(x_p), in (km/s)^2/(Mpc/h), written (not added) for the n particles of mass
  // particle_mass (1e10 Msun/h) at (x[p], y[p], z[p]) in Mpc/h (wrapped into [0, box) here).
  // All pointers are device memory; the work is queued on `stream` and this returns without
  // waiting. Exactly PmSolver::accelerations' force, up to rounding. With mesh_energy (host;
  // long range only) the pass also sums potential_energy() at these positions, from the
  // density modes it transforms anyway (the same bits; this then waits for the sum).
  void accelerations(const double* x, const double* y, const double* z, std::size_t n,
                     double particle_mass, double* ax, double* ay, double* az, CUstream_st* stream,
                     double* mesh_energy = nullptr);

  // The same from and to host vectors, waiting for the result (tests, benchmarks, a host
  // engine): PmSolver::accelerations' signature. Phase times are added to `times` (may be
  // null) as "pm_assign", "pm_fft", "pm_green", "pm_gradient", "pm_interpolate", measured on
  // the device; the transfers are not in them.
  void accelerations(const std::vector<Vec3d>& pos, double particle_mass, std::vector<Vec3d>& acc,
                     PhaseTimes* times = nullptr, double* mesh_energy = nullptr);

  // The long-range potential energy W_mesh = (1/2) sum_p m phi_long(x_p), comoving, in (km/s)^2
  // times 1e10 Msun/h: PmSolver::potential_energy's definition and sum, (1/2) cell^3 sum_k
  // G(k) |rho(k)|^2 over the modes of the same density mesh (one assignment, one forward FFT,
  // no interpolation), for the n particles of mass particle_mass at (x[p], y[p], z[p]) in
  // device memory (Mpc/h, wrapped here). The work is queued on `stream`; this waits for the
  // result. The meshes come from the pool as for accelerations() and go back at the end.
  // Bitwise the same from run to run and for any particle order; long range (TreePM) only,
  // as on the host (an Error for a PM-only solver).
  double potential_energy(const double* x, const double* y, const double* z, std::size_t n,
                          double particle_mass, CUstream_st* stream);

  // The same from host positions (the energy check, whose pair sum needs them on the host
  // anyway; tests): staged through pool memory that is given back on return, so that, unlike
  // the host-vector accelerations(), nothing stays allocated.
  double potential_energy(const std::vector<Vec3d>& pos, double particle_mass);

  // Phase timing with CUDA events for the device-pointer accelerations(): off by default.
  // When on, phase_times() waits for the last call and returns its phases (seconds).
  void set_phase_timing(bool on);
  PhaseTimes phase_times() const;

  // Device memory of a call (the meshes and work area while it runs, the tables), and what
  // a solver for `settings` needs for n particles (the device-pointer call; no staging),
  // computed without allocating (cuFFT is asked for its work area on the current device).
  CudaPmMemory memory() const;
  std::size_t bytes() const { return memory().total(); }
  static CudaPmMemory plan_memory(const PmSettings& settings, std::size_t n_particles);
  static std::size_t plan_bytes(const PmSettings& settings, std::size_t n_particles) {
    return plan_memory(settings, n_particles).total();
  }

  // "cuFFT PM 512^3 float mesh, tsc, long range, r_s = ... , 2.1 GiB on the device"
  std::string describe() const;

 private:
  struct Impl;
  PmSettings settings_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace orbis
