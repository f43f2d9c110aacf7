// The state of CudaPmRanks (gpu/pm_cuda_ranks.hpp), shared by its source files: the forces
// (gpu/pm_cuda_ranks.cu: routing, ghost planes, the passes over CudaPmSlabs), the potential
// energy (gpu/pm_cuda_ranks_energy.cu: the forward transform and the mode sums) and the
// counts' modes (gpu/pm_cuda_ranks_modes.cu: the same forward transform, for the P(k)).
#pragma once
#include <cufft.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/comm.hpp"
#include "core/timer.hpp"
#include "gpu/cuda_check.cuh"
#include "gpu/device_buffer.cuh"
#include "gpu/pm_cuda_mesh.cuh"
#include "gpu/pm_cuda_ranks.hpp"
#include "gpu/pm_cuda_slabs.hpp"
#include "pm/fft_mesh.hpp"
#include "pm/slab_transpose.hpp"

namespace orbis {

// The planes of fixed-point sums (8 bytes a node) one deposit pass of a rank holds, `held`
// planes of its x slab and ghost planes on an n^3 mesh: as many as take no more memory than
// that x slab (held planes of n 2(n/2+1) reals), so the sums never need more than the slab's
// own bytes beside it: every held plane for a double mesh (one pass), about half of them for
// a float mesh; at least the ghost planes (their own pass) and one.
inline int pm_fixed_planes(int n, int held, int ghosts, bool double_mesh) {
  const std::size_t real = double_mesh ? sizeof(double) : sizeof(float);
  const std::size_t slab_bytes = static_cast<std::size_t>(held) * 2 * (static_cast<std::size_t>(n) / 2 + 1) * real;
  const auto planes = static_cast<int>(slab_bytes / (static_cast<std::size_t>(n) * sizeof(unsigned long long)));
  return std::max({planes, ghosts, 1});
}

struct CudaPmRanks::Impl {
  Impl(const PmSettings& s, const Comm& c, int d, Use u)
      : settings(s), comm(c), device(d), use(u), layout(s.grid_side, c.size(), c.rank()) {}
  ~Impl();

  PmSettings settings;
  Comm comm;
  int device = 0;
  Use use = Use::forces;
  SlabTranspose layout;     // CudaPmSlabs' (the traffic count; the energy's transpose)
  SlabPlanes slab;          // this rank's x planes
  int ghosts = 0, held = 0;   // ghost planes after the slab; slab and ghosts
  std::size_t mesh_reals = 0;   // one mesh: held n 2(n/2+1) reals (at least 1)
  std::unique_ptr<CudaPmSlabs> slabs;   // Use::forces only
  cudaStream_t own_stream = nullptr;   // the host-vector entries'

  // Ghost planes (pm/slab_ghost_lists.hpp): the density's go ghost -> owned (added), the
  // forces' owned -> ghost (copied).
  std::vector<int> ghost_planes, owned_planes;
  std::vector<std::size_t> ghost_counts, owned_counts;   // per rank, in planes

  // Use::forces: one x slab of mesh_reals Reals (the density, then each force component),
  // and the fixed-point sums of the held planes until they are the density, for one
  // accelerations() call. Use::energy and Use::counts: rho and the energy's scratch
  // (energy_block), for one potential_energy() or count_modes() call.
  gpu::DeviceArray<unsigned char> meshes;
  gpu::DeviceArray<unsigned long long> fixed_sums;
  gpu::DeviceArray<unsigned long long> ghost_in;      // density ghost planes received
  gpu::DeviceArray<unsigned char> force_ghost_in;     // force ghost planes received (one mesh)
  // The call's own particles (the caller's x | y | z blocks; the stayers are read there). The
  // leavers: their indices and sort keys (double buffers), the packed positions and then the
  // accelerations back; the particles routed here: as received (interleaved, then their
  // accelerations interleaved), positions and accelerations in x | y | z blocks.
  const double* own_pos = nullptr;
  std::size_t own_n = 0, leaving = 0;
  gpu::DeviceArray<std::uint32_t> keys, keys_alt, order, order_alt;
  gpu::DeviceArray<unsigned char> sort_temp;
  gpu::DeviceArray<double> packed, routed, routed_pos, routed_acc;
  gpu::DeviceArray<unsigned long long> counts_dev;
  gpu::DeviceArray<std::int64_t> selected;   // the leavers' selection count
  gpu::DeviceArray<double> host_io;                   // host-vector entry: positions, accelerations
  gpu::PinnedArray<unsigned char> send, recv;
  gpu::PinnedArray<unsigned long long> counts_host;
  std::vector<std::size_t> send_counts, recv_counts;
  const std::uint32_t* sorted_order = nullptr;   // send slot -> caller's index
  std::size_t routed_count = 0;                   // particles routed here from the other ranks
  PmRankTraffic traffic;
  bool logged = false;

  // The forward transform of the potential energy and of the counts' modes
  // (pm_cuda_ranks_energy.cu): CudaPmSlabs' 2D R2C of the x planes and 1D C2C of the y slab's
  // x lines (none without planes or columns), made without work areas; the work area, the
  // row sums and the (energy and counts use) meshes come from the pool for each call. The
  // energy's k and 1/W^2 per axis index, held (2n doubles).
  cufftHandle forward_planes = 0, forward_lines = 0;
  bool forward_planes_made = false, forward_lines_made = false, forward_ready = false, energy_ready = false;
  std::size_t forward_fft_work = 0;
  gpu::DeviceArray<unsigned char> fft_work;
  gpu::DeviceArray<double> axis_tables, row_sums;
  // count_modes(): the y slabs of the meshes before the last (pm_cuda_ranks_modes.cu), and
  // the exchange borrowed for its transposes (null: through host memory).
  gpu::DeviceArray<unsigned char> earlier_modes;
  gpu::DeviceAlltoallv* borrowed_transposes = nullptr;

  // The forces' real x slab, and the fixed-point sums' planes and elements (density_into()).
  std::size_t meshes_bytes() const { return mesh_reals * (settings.double_mesh ? sizeof(double) : sizeof(float)); }
  int fixed_planes() const { return pm_fixed_planes(settings.grid_side, held, ghosts, settings.double_mesh); }
  std::size_t fixed_count() const {
    return static_cast<std::size_t>(fixed_planes()) * settings.grid_side * settings.grid_side;
  }
  std::size_t mesh_bytes() const {
    return meshes.capacity() + (fixed_sums.capacity() + ghost_in.capacity()) * sizeof(unsigned long long) +
           force_ghost_in.capacity();
  }
  std::size_t particle_bytes() const {
    return (keys.capacity() + keys_alt.capacity() + order.capacity() + order_alt.capacity()) * sizeof(std::uint32_t) +
           sort_temp.capacity() + selected.capacity() * sizeof(std::int64_t) +
           (packed.capacity() + routed.capacity() + routed_pos.capacity() + routed_acc.capacity() +
            host_io.capacity()) * sizeof(double) +
           counts_dev.capacity() * sizeof(unsigned long long);
  }
  void sync(cudaStream_t stream) const { ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream)); }
  // Elements of ghost_in: the owned planes' integer sums received (at least one plane).
  std::size_t ghost_in_count() const {
    return std::max<std::size_t>(owned_planes.size(), 1) * static_cast<std::size_t>(settings.grid_side) *
           settings.grid_side;
  }

  // The particles over every rank, this rank holding n; a count the routing's 32-bit order
  // cannot hold stops every rank (the others would wait). Collective.
  std::size_t total_particles(std::size_t n) const;
  void count_destinations(const double* pos, std::size_t n, cudaStream_t stream);
  void route(const double* pos, std::size_t n, cudaStream_t stream);
  // The own particles this rank's slab keeps (those that do not leave).
  gpu::PmSlabKeep keep_own() const { return gpu::PmSlabKeep{slab.first, slab.count}; }
  void deposit(const gpu::PmMeshGeometry& g, double scale, int x_lo, int x_hi, unsigned long long* fixed,
               cudaStream_t stream) const;
  // One mesh's density of every rank's particles at g in this rank's x slab rho:
  // (sum - mean) factor / scale over its planes, the density ghost planes added into their
  // owners' sums, through `fixed` (fixed_count() sums, in passes when they are fewer than the
  // held planes'). Collective (the ghost planes).
  template <typename Real>
  void density_into(const gpu::PmMeshGeometry& g, double scale, double mean, double factor, Real* rho,
                    unsigned long long* fixed, cudaStream_t stream, PhaseTimes& times);
  void exchange_particles(const double* out, const std::vector<std::size_t>& out_counts, double* in,
                          const std::vector<std::size_t>& in_counts, cudaStream_t stream);
  void send_back(double* acc, cudaStream_t stream);
  gpu::DeviceAlltoallv* peer_exchange() const;
  void exchange_planes(const unsigned char* from, const std::vector<int>& out_planes,
                       const std::vector<std::size_t>& out_counts, unsigned char* in,
                       const std::vector<std::size_t>& in_counts, std::size_t plane_bytes, cudaStream_t stream);
  template <typename Real>
  void fetch_force_ghosts(Real* mesh, cudaStream_t stream);
  // The force pass: the stayers' accelerations into acc (x | y | z blocks of own_n), the
  // routed particles' into routed_acc; with energy_rows (device, meshes x n x y.count doubles)
  // also each mesh's energy row sums (energy_of_rows()).
  template <typename Real>
  void run(std::size_t total, double mass, double* acc, cudaStream_t stream, PhaseTimes& times, double* energy_rows);

  // The energy (pm_cuda_ranks_energy.cu). The block of one call (of count_modes() too), in
  // `meshes`: the density x slab (mesh_reals reals, as rho of the forces' layout), then from
  // scratch_offset (256-byte aligned) the scratch: the fixed-point sums (fixed_count()), then
  // the y slab of modes.
  struct EnergyBlock {
    std::size_t scratch_offset = 0, scratch_bytes = 0;
    std::size_t total() const { return scratch_offset + scratch_bytes; }
  };
  EnergyBlock energy_block() const;
  void make_forward_plans();
  void make_energy_plans();   // the forward plans and the energy's tables
  // The forward plans on `stream` with a work area from the pool (fft_work).
  void bind_forward_plans(cudaStream_t stream);
  // Device bytes one potential_energy() call of this rank would take from the pool for n own
  // particles (the routed ones counted as n: an estimate for the check before any allocation).
  std::size_t energy_call_bytes(std::size_t n) const;
  void give_back_routing_buffers();
  void give_back_energy_memory();
  template <typename C>
  void transpose_to_y(const C* x_slab, C* y_slab, cudaStream_t stream);
  // One mesh's forward transform of this rank's share: its density at shift_cells into the x
  // slab `rho` (density_into(), through `fixed`: fixed_count() sums; fixed_point_scale(total)
  // and its mean), the 2D R2C of its planes, the transpose into
  // `modes` (this rank's y slab of complex Reals; may be `fixed`'s memory, read before) and the
  // 1D transforms along x. The plans bound (bind_forward_plans).
  template <typename Real>
  void forward_modes(double shift_cells, std::size_t total, double factor, Real* rho, unsigned long long* fixed,
                     void* modes, cudaStream_t stream);
  template <typename Real>
  double mesh_energy(std::size_t total, double mass, cudaStream_t stream);
  // The mesh energy from every mesh's row sums of this rank's y columns at `rows` (device, one
  // mesh after the other, queued on `stream`): every rank's gathered and added in
  // CudaPmSolver::potential_energy's order (collective; the whole value on every rank).
  double energy_of_rows(const double* rows, int meshes_count, cudaStream_t stream);

  // count_modes() (pm_cuda_ranks_modes.cu): the pool memory of its meshes (the energy's block,
  // the received ghost planes, the earlier meshes' y slabs and the work area) for `meshes`
  // shifts, and the passes over them once the particles are routed.
  std::size_t count_slab_bytes(int meshes) const;
  template <typename Real>
  void count_passes(std::size_t total, const std::vector<double>& shifts,
                    const std::function<void(const std::vector<const void*>&)>& use, cudaStream_t stream);
};

}  // namespace orbis
