// The long-range PM's mesh work over ranks on each rank's GPU (a PmSlabTransform, pm/pm_solver.hpp):
// the host keeps the routing of particles to slab owners, the assignment into the x slab and
// its ghost planes, and the interpolation; between them, on the GPU of every rank:
//   upload the density slab | cuFFT 2D R2C (y, z) of its x planes | transpose x slabs -> y slabs
//   | cuFFT 1D C2C along x | phi = Green * rho | g_x = -i k_x phi, C2C^-1 along x, transpose
//   y -> x, C2R 2D, download into the host's slab of g_x | phi: C2C^-1 along x, transpose
//   y -> x | for d in y, z: g_d = -i k_d phi in the x slab, C2R 2D, download
// with the Green's function and gradient kernels of the one-GPU PM (gpu/pm_cuda_fourier.cuh,
// pm/pm_modes.hpp). g_y and g_z are made after the x transform, from phi's x slab (k_y and
// k_z are its own axes): three transposes and two inverse 1D transforms a call, not four and
// three. The transposes are staged through pinned host
// buffers and Comm's alltoallv (no CUDA-aware MPI assumed); their block layout is
// pm/slab_transpose.hpp's, and the pitched blocks are packed and unpacked by the copy engines
// (cudaMemcpy2DAsync) on the way to and from the host. Several ranks may share one GPU.
//
// Memory per rank (kept from step to step): on the device the real x slab, nx n 2(n/2+1)
// reals, and two complex y slabs (phi, then phi's x slab; what y -> x sends), n ny (n/2+1)
// complex each (or nx n (n/2+1) where that is larger),
// so about 3 n^3 / P reals (4 or 8 bytes), plus one cuFFT work area and the per-axis tables;
// on the host two pinned buffers of max(nx, ny) n (n/2+1) complex values, about n^3 / P reals
// each (the transpose's send and receive sides). device_bytes() and pinned_bytes() give the exact numbers.
//
// The same work on device slabs (long_range_on_device): the PM whose particle side runs on the
// GPUs too (gpu/pm_cuda_ranks.hpp) keeps its x slab on the device (the density, then each force
// component in turn), and this class then needs no x slab of its own (host_slab false) and
// copies no slab to or from the host.
//
// The result equals the host PM's to the transforms' rounding (tests/mpi/test_pm_slabs_cuda.cpp).
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "core/comm.hpp"
#include "pm/pm_solver.hpp"

namespace orbis {
namespace gpu {
class DeviceAlltoallv;
}

class CudaPmSlabs final : public PmSlabTransform {
 public:
  // Plans and allocates on `device` (made current) for this rank's slabs of `comm`; not
  // collective (a failure on one rank should be made everyone's: run_collectively). Fails
  // with the bytes needed and free when the slabs do not fit. Long range (r_s > 0) only.
  // host_slab false: no device x slab for the host-pointer entry (long_range() then fails);
  // only long_range_on_device() is used, on x slabs followed by ghost_planes more planes (the
  // global planes (x0 + nx + g) mod n, g < ghost_planes), which the forces fill with CUDA IPC.
  CudaPmSlabs(const PmSettings& settings, const Comm& comm, int device, bool host_slab = true, int ghost_planes = 0);
  ~CudaPmSlabs() override;

  // PmSlabTransform: host slabs, uploaded and downloaded here.
  void long_range(float* rho, float* gx, float* gy, PhaseTimes& times) override;
  void long_range(double* rho, double* gx, double* gy, PhaseTimes& times) override;
  // The same on a device x slab of `device` (FftMesh's padded layout, local_nx planes; what
  // follows them, ghost planes, is left alone): rho, the density, is overwritten by g_x, g_y
  // and g_z in turn, and after each use(axis) is called, when this object's stream has
  // finished it (work use() queues elsewhere must be finished when it returns: the next
  // component overwrites rho). One x slab for the three components: the PM over ranks
  // interpolates each one before the next. When ghost_planes_filled(), each component's ghost
  // planes come with it (the y -> x transpose also brings those planes' rows from every
  // rank's y slab, and the 2D C2R transforms them with the slab's own); else they hold
  // nothing of use and the caller fetches them from their owners. Collective over
  // comm; work on other streams that fills rho must be finished first. The two complex slabs
  // and the transforms' work area are taken from the device pool for the call and given back
  // when it ends (the short-range step reuses that memory between PM steps); held_bytes() is
  // what stays allocated between calls, transient_bytes() what a call takes besides. energy_rows (device, may be null)
  // receives the energy check's row sums of this rank's y columns from the transformed density
  // (gpu/pm_cuda_fourier.cuh's pm_long_range_energy_rows: n times SlabTranspose::y.count
  // doubles), from the modes forward_on_device() would give.
  void long_range_on_device(float* rho, const std::function<void(int axis)>& use, PhaseTimes& times,
                            double* energy_rows = nullptr);
  void long_range_on_device(double* rho, const std::function<void(int axis)>& use, PhaseTimes& times,
                            double* energy_rows = nullptr);
  // The forward transform alone (the energy check's mesh term over ranks,
  // gpu/pm_cuda_ranks.hpp): rho, a device x slab as above, is overwritten by its planes' 2D
  // R2C; modes (device, this rank's y slab: y_slab_count complex values [i][j - y0][k])
  // receives the forward modes, unnormalised, through the transposes of long_range_on_device
  // (CUDA IPC device to device where the ranks have it). Takes the transforms' work area
  // from the pool for the call.
  // Collective; work on other streams that fills rho must be finished first, and the modes
  // are complete when this returns.
  void forward_on_device(float* rho, void* modes);
  void forward_on_device(double* rho, void* modes);
  // The transposes' exchange when it moves device memory directly between the ranks (CUDA
  // IPC; chosen at the first call), else null: other transposes on this communicator may borrow
  // it between calls (gpu/slab_transpose_peer.cuh).
  gpu::DeviceAlltoallv* peer_exchange() const;
  // long_range_on_device() fills the ghost planes with each force component (CUDA IPC).
  bool ghost_planes_filled() const;
  std::size_t held_bytes() const;
  std::size_t transient_bytes() const;
  // Of held_bytes(), what is not the device pool's (CUDA IPC's exported buffer): what a
  // measure of the pool's use must add.
  std::size_t outside_pool_bytes() const;
  // "cuFFT slabs over 3 ranks, device 0, 12.3 MiB on the device, 4.1 MiB pinned"
  std::string describe() const override;
  std::size_t device_bytes() const override;
  std::size_t pinned_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The GPU slab PM for a host engine's PmSolver when every rank of `comm` has a usable GPU
// (`device` is this rank's: gpu_device_for_rank), else null with the reason in *why.
// Collective over comm.
std::unique_ptr<PmSlabTransform> make_cuda_pm_slabs(const PmSettings& settings, const Comm& comm, int device,
                                                    std::string* why);

// The PM choice over ranks of both step engines (integrate/host_engine.hpp, gpu/step_engine_cuda.hpp):
// pm's long-range transforms on the cuFFT slabs (make_cuda_pm_slabs, logged) when every rank of
// comm has a usable GPU; else false, the reason in *why, and pm stays on the host's slabs. Collective.
bool use_cuda_pm_slabs(PmSolver& pm, const Comm& comm, int device, std::string* why);

}  // namespace orbis
