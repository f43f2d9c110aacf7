// The long-range (TreePM) PM over ranks with everything on the GPUs: the particles' side too,
// not only the transforms (gpu/pm_cuda_slabs.hpp). Input: the rank's positions already on the
// device, output: the long-range accelerations written on the device; collective over the
// communicator. No CUDA header is needed here (a stream is a CUstream_st*).
//
// The steps, on each rank's GPU with host staging only where MPI moves data:
//  1. routing: each particle goes to the owner of its stencil's first x plane (the host PM's
//     rule, pm/slab_routing.hpp). Those of this rank's slab (most particles when the domains
//     are nearly x slabs) stay where they are: the passes read their positions from the
//     caller's arrays and write their accelerations there (gpu/pm_cuda_mesh.cuh's
//     PmSlabKeep). The others, the leavers, are selected in index order, sorted stably by
//     destination on the device (CUB), packed, copied to pinned memory, Comm's alltoallv,
//     copied up;
//  2. per mesh (two, 1/8 and 5/8 cell, when interlaced: pm/pm_modes.hpp's
//     long_range_mesh_shift; one at 1/4 otherwise), one after the other in the same memory:
//     fixed-point deposit into the x slab's planes and its window-order ghost planes (the
//     one-GPU PM's kernel, gpu/pm_cuda_mesh.cuh: integer atomics, deterministic), the ghost
//     planes added into their owners' planes as integers (device to device through the cuFFT
//     slabs' CUDA IPC exchange when the ranks have one, else staged through pinned memory),
//     the conversion to the density in the x slab (for a float mesh in passes: the ghost
//     planes first, then the slab's planes half at a time, so the 8-byte sums never take more
//     than the slab's own memory), the Fourier work of CudaPmSlabs on it, and
//     for each force component in turn, in the same x slab: its ghost planes (with CUDA IPC
//     they come with the y -> x transpose, as rows of every rank's y slab, and the 2D C2R
//     transforms them with the slab: no exchange of their own; staged, fetched from their
//     owners) and the interpolation at the stayers and the routed particles (half of each
//     mesh's force when there are two);
//  3. the routed particles' accelerations back the way the positions came (device pack,
//     staging, alltoallv) and scattered into the leavers' places.
//
// Why particles travel and not mesh pieces: with the default mesh of 2N cells per side a
// particle's share of the mesh is ~8 cells of 8 bytes (the fixed-point density; then the
// three force components), twice with interlacing, to move each way if every rank assigned
// its own particles onto a whole-box mesh and reduced it; a particle that crosses costs
// 24 bytes of position out and 24 of acceleration back. ORB domains of 2 ranks are nearly x
// slabs, so few particles cross at all; only the thin ghost planes (3 planes for TSC) move
// for every rank. The volume moved is logged at the first step (traffic()).
//
// Determinism: the density's sums are integers (the same bits for any order of the routed
// particles); the transforms are cuFFT's over the slab decomposition, so the forces are not
// bitwise the same across rank counts (as CudaPmSlabs; the host PmSolver's are).
//
// Memory per rank, taken from the device pool by each accelerations() call and given back
// at its end (transient_bytes() and the per-particle buffers; between PM steps the
// short-range step uses that memory, as the one-GPU PM's): one real x slab with the window's
// ghost planes, (nx + ghosts) n 2(n/2+1) reals (the density, then g_x, g_y and g_z in turn),
// the fixed-point sums of the planes of a pass (8 bytes a node: no more than the x slab's
// bytes, so about half its planes for a float mesh) until they are the density, given back
// before CudaPmSlabs takes its complex y slab (one with CUDA IPC, two staged), the received
// density and force ghost planes; per particle that
// leaves or arrives (routing_bytes(): a leaver's keys, order and packed position, an
// arrival's position and acceleration; none for those that stay), and cuFFT's work area (one
// for all the plans, which run in turn). Held between calls (held_bytes()): the exchange's
// exported buffer with CUDA IPC, the axis tables. Pinned host buffers of the particles that
// cross and of the ghost planes.
//
// The forces equal the one-GPU CudaPmSolver's to the transforms' rounding
// (tests/mpi/test_pm_ranks_cuda.cpp).
//
// The long-range potential energy over ranks (potential_energy(), the mesh term of the energy
// check, integrate/energy.hpp): the same routing, deposit and ghost planes, then only the
// forward transform: the 2D R2C of the x planes, the transpose to y slabs and the 1D
// transforms along x. Built for forces, the object runs them on its CudaPmSlabs
// (forward_on_device: its plans, and its transposes device to device with CUDA IPC); built for
// the energy or the counts alone, on cuFFT plans of its own that match CudaPmSlabs', with this
// rank's own block copied on the device and the others' through host memory and Comm's
// alltoallv. Then the one-GPU PM's sum of G(k) |rho(k)|^2 per
// mesh row (gpu/pm_cuda_fourier.cuh) over the rank's y columns. Every rank's row sums go to
// every rank (allgather, n^2 doubles in all) and are added as CudaPmSolver adds them: the
// rows of each x plane in y order, the planes in x order, mesh B's planes into mesh A's at
// weight 1/2 each. So the value is the same on every rank, the same bits from call to call for
// a given rank count (however the particles are spread over the ranks: the density is integer
// sums), and the one-GPU value to the transforms' rounding (tests/mpi/test_energy_ranks_cuda.cpp).
//
// Memory of the energy: the energy check is its own object, apart from the step engine's
// CudaPmRanks, and a second object built for forces would hold a second set of buffers for
// the whole run (its cuFFT work areas and, with CUDA IPC, an exported transpose buffer of the
// larger of an x and a y slab, ~n^3 / P reals per rank), and take its slabs at each call. So the
// energy check builds its CudaPmRanks with Use::energy, which keeps only its cuFFT plans
// (without work areas), the per-axis tables and a few counts. Each potential_energy() takes
// from the device pool (gpu/device_buffer.cuh), queued on the caller's stream, the density x
// slab with its ghost planes, one scratch area (the fixed-point sums of a pass, then
// the y slab of modes), the received ghost planes, the cuFFT work area, the row sums and the
// routed positions (the routing's other buffers go back before the slabs are taken), and
// gives them all back before it returns: ~8 n^3 / P bytes for a float mesh (16 for double)
// plus 24 bytes per routed particle and the caller's 24 per particle, for the length of the
// check only, from memory the step's phases (tree, walk, P2P) have given back to the pool
// (0.55 GB + 0.4 GB per rank for 256^3 particles on a 512^3 float mesh over 2 ranks); a check
// that would not fit stops every rank with the bytes needed and free. The transpose's host
// staging is ordinary host memory freed at return (the particles' and ghost planes' pinned
// buffers stay, small). A CudaPmRanks built for forces (the step engine's energy check) takes
// the same blocks from the pool per call and runs the transform on its CudaPmSlabs, holding
// nothing more than the energy's tables between checks.
//
// The counts' modes (count_modes(), for the power spectrum over ranks:
// gpu/power_spectrum_cuda_ranks.hpp): the same routing, deposit, ghost planes and forward
// transform, with the particle counts minus their mean (analysis/power_spectrum.cpp's
// assign_counts: the same fixed point, the same mesh values) in place of the mass density, at
// the shifts the caller gives (0 and 1/2 cell for an interlaced P(k)), each mesh's y slab of
// modes kept until the caller has used them all. Built with Use::counts on the P(k) mesh's
// settings (any r_s; a double mesh) it holds only its cuFFT plans; each call takes from the
// pool the density x slab and scratch (the last mesh's modes), one more y slab per earlier
// mesh, the received ghost planes, the work area and the routed positions, and gives them
// back before it returns: for a double mesh ~(16 + 8 (meshes - 1)) n^3 / P bytes plus 24
// bytes per routed particle (P(k) on 512^3, interlaced, over 2 ranks: 1.6 GB a rank, and
// cuFFT's work area). When they would not fit on some rank (ranks on one GPU counted
// together, gpu/shared_gpu_memory.hpp), no rank takes them (count_modes() returns false on
// every rank).
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/timer.hpp"
#include "core/vec3.hpp"
#include "pm/pm_solver.hpp"

struct CUstream_st;

namespace orbis {
namespace gpu {
class DeviceAlltoallv;
}

// What one accelerations() call moved between ranks, this rank's sends (bytes).
struct PmRankTraffic {
  std::size_t particles = 0;          // this rank's particles
  std::size_t particles_away = 0;     // of them, routed to another rank
  std::size_t particle_bytes = 0;     // positions out and accelerations back
  std::size_t ghost_bytes = 0;        // density ghost planes added, force ghost planes fetched
  std::size_t transpose_bytes = 0;    // CudaPmSlabs' transposes between x and y slabs
};

// A rank's particles that the PM's routing sends to other ranks' slabs, and those it receives.
struct CudaPmRoutingCounts {
  std::size_t leaving = 0, arriving = 0;
};

class CudaPmRanks {
 public:
  // What the object is for, and so what it keeps on the device between calls.
  enum class Use {
    forces,   // the step engine's: slabs, CudaPmSlabs, particle buffers, kept from step to step
    energy,   // the energy check's: potential_energy() only, its memory from the pool per call
    counts,   // the P(k)'s: count_modes() only, its memory from the pool per call; any r_s
  };

  // Plans and allocates on `device` (made current) for this rank's slab of `comm`; not
  // collective (make_cuda_pm_ranks makes a failure everyone's). Long range (r_s > 0) only,
  // but for Use::counts. Use::energy and Use::counts allocate no slabs (accelerations() is
  // then an Error, and potential_energy() too for Use::counts).
  CudaPmRanks(const PmSettings& settings, const Comm& comm, int device, Use use = Use::forces);
  ~CudaPmRanks();
  CudaPmRanks(const CudaPmRanks&) = delete;
  CudaPmRanks& operator=(const CudaPmRanks&) = delete;

  const PmSettings& settings() const { return settings_; }

  // acc = g(x_p) for the n particles of mass particle_mass (1e10 Msun/h) at pos (device
  // memory, x | y | z blocks of n doubles, Mpc/h, wrapped into the box here), written (not
  // added) into acc (device, x | y | z blocks of n). Collective over comm; work queued on
  // `stream` before the call is waited for, and the result is complete when this returns.
  // Phases go to `times` (may be null) as PmSolver's. With mesh_energy (host; asked on every
  // rank or on none) the pass also gives potential_energy() at these positions, the same bits,
  // from the density modes it transforms anyway (each mesh's row sums; 2 n^2 / ranks doubles
  // more from the pool, and one gather).
  void accelerations(const double* pos, std::size_t n, double particle_mass, double* acc, CUstream_st* stream,
                     PhaseTimes* times = nullptr, double* mesh_energy = nullptr);
  // The same from and to host vectors (tests): PmSolver::accelerations' signature.
  void accelerations(const std::vector<Vec3d>& pos, double particle_mass, std::vector<Vec3d>& acc,
                     PhaseTimes* times = nullptr, double* mesh_energy = nullptr);

  // The long-range potential energy W_mesh = (1/2) sum_p m phi_long(x_p) of every rank's
  // particles, comoving, in (km/s)^2 times 1e10 Msun/h: CudaPmSolver::potential_energy's and
  // PmSolver::potential_energy's quantity, (1/2) cell^3 sum_k G(k) |rho(k)|^2 with the long
  // range's Green's function and window deconvolutions (the mean of the two meshes' when
  // interlaced), for this rank's n particles of mass particle_mass at pos (device memory,
  // x | y | z blocks of n doubles, Mpc/h, wrapped here). Collective over comm; every rank
  // returns the whole value, the same bits. Work is queued on `stream` (earlier work on it is
  // waited for); this waits for the result. Memory: see the header's comment.
  double potential_energy(const double* pos, std::size_t n, double particle_mass, CUstream_st* stream);
  // The same from host positions (the energy check holds them on the host): staged through
  // pool memory that is given back on return.
  double potential_energy(const std::vector<Vec3d>& pos, double particle_mass);

  // The Fourier modes of the counts of every rank's particles on this mesh, for each shift in
  // shifts_cells (cells along every axis): this rank's n particles at pos (device memory,
  // x | y | z blocks of n doubles, Mpc/h, any coordinates: wrapped), the fixed-point counts
  // minus their mean (fixed_point_scale and pm_fixed_point_mean of the total over the ranks,
  // pm/fixed_point_mesh.hpp) forward transformed, unnormalised, e^{-i k.x} (FFTW's and cuFFT's
  // sign), into this rank's y slab: modes (i, j, k) for every x index i, the y columns
  // [y_first(), y_first() + y_count()) and k < n/2+1, stored [i][j - y_first()][k], two reals
  // (re, im) of the mesh precision a mode. `use` is called once, on every rank, with one slab
  // per shift in that order (device memory on `stream`, valid during the call; its queued work
  // is waited for before the memory goes back). Collective over comm; work queued on `stream`
  // before the call is waited for. Returns false, on every rank, without calling `use`, when
  // the slabs and use_bytes more (what `use` takes from the pool) would not fit on some rank's
  // device once the particles are routed (see the header's comment); true otherwise. A rank
  // may hold no particles, but not every rank (an Error).
  // `transposes` (may be null; the same on every rank): another object's exchange that moves
  // device memory between the ranks directly (peer_transposes()), borrowed for the transposes
  // when its buffer is already large enough on every rank; else they go through host memory.
  bool count_modes(const double* pos, std::size_t n, const std::vector<double>& shifts_cells,
                   const std::function<void(const std::vector<const void*>& slabs)>& use, CUstream_st* stream,
                   std::size_t use_bytes = 0, gpu::DeviceAlltoallv* transposes = nullptr);
  // This rank's y columns of count_modes()' slabs.
  int y_first() const;
  int y_count() const;
  // Device bytes a count_modes() call of `meshes` shifts takes from the pool on this rank for n
  // own particles (an estimate: the routed particles counted as many as the own).
  std::size_t count_modes_bytes(std::size_t n, int meshes) const;

  // The last accelerations()' traffic (this rank's; potential_energy() and count_modes() leave
  // it), and the same summed over the ranks (collective).
  // Use::forces: its CudaPmSlabs' exchange when that moves device memory directly (CUDA IPC,
  // after the first accelerations()), for count_modes() of another object to borrow; else null.
  gpu::DeviceAlltoallv* peer_transposes() const;

  const PmRankTraffic& traffic() const;
  PmRankTraffic total_traffic() const;

  std::size_t device_bytes() const;    // allocated now: slabs, cuFFT slabs, particle buffers
  std::size_t mesh_bytes() const;      // of which the slabs and the cuFFT slabs (none for Use::energy)
  // Held between calls (the exchange's exported buffer, tables), and what
  // an accelerations() call takes from the pool besides the per-particle buffers at its peak
  // (the real x slab with its ghost planes, the received density and force ghost planes, and
  // the larger of the fixed-point sums and the cuFFT slabs' complex y slabs, one with CUDA
  // IPC, two staged, with their work area), given back when it returns.
  std::size_t held_bytes() const;
  std::size_t transient_bytes() const;
  std::size_t outside_pool_bytes() const;   // of held_bytes(), not the pool's (CudaPmSlabs')
  // What transient_bytes() will be, before any object exists (the automatic mesh's choice,
  // integrate/pm_mesh_choice.hpp), for rank `rank` of `ranks`: an upper bound (the transposes'
  // work slab taken as CUDA IPC's).
  static std::size_t planned_transient_bytes(const PmSettings& settings, int ranks, int rank);
  std::size_t pinned_bytes() const;
  // Device bytes of the particle buffers of an accelerations() call whose rank sends `leaving`
  // particles to other ranks' slabs and receives `arriving` (those that stay take none).
  static std::size_t routing_bytes(std::size_t leaving, std::size_t arriving);
  // Those two counts for this rank's n particles at pos (device, x | y | z blocks) now: one
  // pass over the positions and the counts' all-to-all. Collective.
  CudaPmRoutingCounts routing_counts(const double* pos, std::size_t n, CUstream_st* stream);
  // "PM 256^3 float mesh, tsc, long range on two interlaced meshes over 2 ranks, particles
  // and meshes on the GPUs: 130 MiB of slabs on device 0"
  std::string describe() const;

 private:
  struct Impl;
  PmSettings settings_;
  std::unique_ptr<Impl> impl_;
};

// The PM over ranks on the GPUs when every rank of `comm` has a usable GPU (`device` is this
// rank's), else null with the reason in *why. Collective over comm.
std::unique_ptr<CudaPmRanks> make_cuda_pm_ranks(const PmSettings& settings, const Comm& comm, int device,
                                                std::string* why, CudaPmRanks::Use use = CudaPmRanks::Use::forces);

}  // namespace orbis
