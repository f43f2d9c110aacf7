// The x slab -> y slab transpose (pm/slab_transpose.hpp's blocks) through a DeviceAlltoallv
// that moves device memory directly between the ranks (CUDA IPC, gpu/device_alltoallv.cuh):
// the pitched blocks packed by destination on the device into the exchange's exported buffer,
// then pulled by their owners straight into their y slabs. Nothing crosses the host. Used by
// the cuFFT slab PM's forces (gpu/pm_cuda_slabs.cu) and, borrowing its exchange, by the counts'
// modes of the P(k) over ranks (gpu/pm_cuda_ranks_energy.cu).
#pragma once
#include <cuda_runtime.h>

#include "core/comm.hpp"
#include "gpu/copy_2d.cuh"
#include "gpu/cuda_check.cuh"
#include "gpu/device_alltoallv.cuh"
#include "pm/slab_transpose.hpp"

namespace orbis::gpu {

// Bytes of the exported buffer this rank's x -> y transpose of elements C needs.
template <typename C>
std::size_t peer_transpose_bytes(const SlabTranspose& t) {
  return Comm::total(t.x_lines) * static_cast<std::size_t>(t.nzc) * sizeof(C);
}

// Collective; exchange.peer_to_peer() must hold. Work queued on `stream` before the call has
// written x_slab; y_slab (this rank's, y_slab_count elements) is complete on return.
template <typename C>
void transpose_x_to_y_peer(const SlabTranspose& t, DeviceAlltoallv& exchange, const C* x_slab, C* y_slab,
                           cudaStream_t stream) {
  const std::size_t line = static_cast<std::size_t>(t.nzc) * sizeof(C);
  C* out = static_cast<C*>(exchange.send_buffer(peer_transpose_bytes<C>(t)));
  for (const PitchedBlock& b : t.x_blocks)
    copy_2d(out + b.buffer_offset, b.width * sizeof(C), x_slab + b.slab_offset, b.pitch * sizeof(C), b.width * sizeof(C),
            b.rows, stream);
  exchange.exchange(out, t.x_lines, y_slab, t.y_lines, line, stream);
}

}  // namespace orbis::gpu
