// The counts' Fourier modes of the PM over ranks on the GPUs (gpu/pm_cuda_ranks.hpp, "The
// counts' modes"), for the power spectrum over ranks (gpu/power_spectrum_cuda_ranks.hpp): the
// forces' routing (pm_cuda_ranks.cu), then per mesh shift the energy's forward transform
// (forward_modes, pm_cuda_ranks_energy.cu) of the counts, each mesh's y slab kept until the
// caller has used them all.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/error.hpp"
#include "gpu/cuda_check.cuh"
#include "gpu/device_alltoallv.cuh"
#include "gpu/device_buffer.cuh"
#include "gpu/pm_cuda_ranks.hpp"
#include "gpu/pm_cuda_ranks_impl.cuh"
#include "gpu/shared_gpu_memory.hpp"

namespace orbis {
namespace {

// Each y slab starts 256-byte aligned, as the pool's blocks do (cuFFT's alignment).
std::size_t aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

std::size_t CudaPmRanks::Impl::count_slab_bytes(int meshes_count) const {
  const std::size_t real = settings.double_mesh ? sizeof(double) : sizeof(float);
  const std::size_t y_slab = aligned(std::max<std::size_t>(layout.y_slab_count, 1) * 2 * real);
  const EnergyBlock block = energy_block();
  std::size_t bytes = meshes.capacity() >= block.total() ? 0 : block.total();
  bytes += ghost_in.capacity() >= ghost_in_count() ? 0 : ghost_in_count() * sizeof(unsigned long long);
  bytes += static_cast<std::size_t>(std::max(meshes_count - 1, 0)) * y_slab;
  return bytes + std::max<std::size_t>(forward_fft_work, 1);
}

template <typename Real>
void CudaPmRanks::Impl::count_passes(std::size_t total, const std::vector<double>& shifts,
                                     const std::function<void(const std::vector<const void*>&)>& use,
                                     cudaStream_t stream) {
  const std::size_t y_slab = aligned(std::max<std::size_t>(layout.y_slab_count, 1) * 2 * sizeof(Real));
  const int count = static_cast<int>(shifts.size());
  const EnergyBlock block = energy_block();
  // The energy's block: the x slab, then the scratch (the fixed-point sums of each mesh, the
  // last mesh's modes); the earlier meshes' modes in slabs of their own.
  meshes.ensure_exact(block.total());
  ghost_in.ensure_exact(ghost_in_count());
  earlier_modes.ensure_exact(std::max<std::size_t>(static_cast<std::size_t>(count - 1) * y_slab, 1));
  bind_forward_plans(stream);
  Real* const rho = reinterpret_cast<Real*>(meshes.data());
  unsigned char* const scratch = meshes.data() + block.scratch_offset;
  auto* const fixed = reinterpret_cast<unsigned long long*>(scratch);
  std::vector<const void*> slabs;
  for (int k = 0; k < count; ++k) {
    void* const modes = k + 1 < count ? static_cast<void*>(earlier_modes.data() + k * y_slab) : scratch;
    // The counts themselves: (sum - mean) / scale, analysis/power_spectrum's assign_counts.
    forward_modes<Real>(shifts[static_cast<std::size_t>(k)], total, 1.0, rho, fixed, modes, stream);
    slabs.push_back(modes);
  }
  fft_work.release();   // its memory serves the caller's use of the slabs
  use(slabs);
  sync(stream);   // the caller's work on the slabs, before they go back
}

bool CudaPmRanks::count_modes(const double* pos, std::size_t n, const std::vector<double>& shifts_cells,
                              const std::function<void(const std::vector<const void*>& slabs)>& use,
                              CUstream_st* stream_in, std::size_t use_bytes,
                              gpu::DeviceAlltoallv* transposes) {
  Impl& m = *impl_;
  if (shifts_cells.empty()) fail("internal: count_modes() without a mesh");
  const cudaStream_t stream = stream_in;
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  const std::size_t total = m.total_particles(n);
  if (total == 0) fail("internal: count_modes() of no particles on any rank");
  run_collectively(m.comm, [&] { m.make_forward_plans(); });
  m.sync(stream);   // the positions' producers
  const PmRankTraffic forces_traffic = m.traffic;   // the forces' record stays the last accelerations()'
  bool fits = false;
  {
    gpu::AllocationStream on_stream(stream);
    m.route(pos, n, stream);
    m.give_back_routing_buffers();   // but the routed positions: their memory then serves the meshes
    m.sync(stream);
    // The meshes' memory is checked on every rank before any rank takes it (a rank that could
    // not would leave the others waiting in the ghost planes' exchange), the asks of ranks on
    // one GPU together.
    const std::size_t need = m.count_slab_bytes(static_cast<int>(shifts_cells.size())) + use_bytes;
    fits = gpu::fits_on_gpus(m.comm, m.device, need);
    // The borrowed buffer is not grown: it would stay that large for the whole run.
    const std::size_t real = settings_.double_mesh ? sizeof(double) : sizeof(float);
    const std::size_t transpose_bytes = Comm::total(m.layout.x_lines) * m.layout.nzc * 2 * real;
    const bool borrow = transposes && transposes->device_bytes() >= transpose_bytes;
    m.borrowed_transposes = m.comm.all(borrow) ? transposes : nullptr;
    if (fits) {
      if (settings_.double_mesh) m.count_passes<double>(total, shifts_cells, use, stream);
      else m.count_passes<float>(total, shifts_cells, use, stream);
    }
    m.meshes.release();
    m.ghost_in.release();
    m.earlier_modes.release();
    m.fft_work.release();
    m.routed_pos.release();
  }
  m.borrowed_transposes = nullptr;
  m.traffic = forces_traffic;
  return fits;
}

int CudaPmRanks::y_first() const { return impl_->layout.y.first; }
int CudaPmRanks::y_count() const { return impl_->layout.y.count; }

std::size_t CudaPmRanks::count_modes_bytes(std::size_t n, int meshes_count) const {
  const Impl& m = *impl_;
  // The routing (ensure's 1/8 headroom), every own particle counted as leaving and as many
  // arriving (an estimate: it comes before the counts are known, and a rank may receive more
  // than it holds).
  const std::size_t room = n + n / 8 + 1;
  const std::size_t routed_pos = room * 3 * sizeof(double);
  const std::size_t routing = CudaPmRanks::routing_bytes(room, room);
  // Then the routing's buffers are given back, but the routed positions, and the meshes taken.
  return std::max(routing, routed_pos + m.count_slab_bytes(meshes_count));
}

}  // namespace orbis
