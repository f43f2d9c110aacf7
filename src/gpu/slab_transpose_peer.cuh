// The x slab -> y slab transpose (pm/slab_transpose.hpp's blocks) through a DeviceAlltoallv
// that moves device memory directly between the ranks (CUDA IPC, gpu/device_alltoallv.cuh):
// the pitched blocks packed by destination on the device into the exchange's exported buffer,
// then pulled by their owners straight into their y slabs (a rank's own block copied there
// directly). Nothing crosses the host. Used by
// the cuFFT slab PM's forces (gpu/pm_cuda_slabs.cu) and, borrowing its exchange, by the counts'
// modes of the P(k) over ranks (gpu/pm_cuda_ranks_energy.cu).
#pragma once
#include <cuda_runtime.h>

#include <vector>

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
// written x_slab; y_slab (this rank's, y_slab_count elements) is complete on return. Each
// rank packs the blocks of the others into its exported buffer (in rank order, as x_blocks
// has them: its own block's place is left as it is) and copies its own block straight into
// its y slab; each rank then pulls its blocks from the others' buffers.
template <typename C>
void transpose_x_to_y_peer(const SlabTranspose& t, DeviceAlltoallv& exchange, const C* x_slab, C* y_slab,
                           cudaStream_t stream) {
  C* out = static_cast<C*>(exchange.send_buffer(peer_transpose_bytes<C>(t)));
  std::vector<Copy2d> packing;
  for (int r = 0; r < t.ranks; ++r) {
    const PitchedBlock& b = t.x_blocks[static_cast<std::size_t>(r)];
    C* to = r == t.rank ? y_slab + t.y_offsets[static_cast<std::size_t>(r)] : out + b.buffer_offset;
    packing.push_back(Copy2d{to, x_slab + b.slab_offset, b.width * sizeof(C), b.pitch * sizeof(C), b.width * sizeof(C),
                             b.rows});
  }
  copy_2d_batch(packing, stream);
  std::vector<PeerPull> pulls;
  for (int s = 0; s < t.ranks; ++s) {
    if (s == t.rank) continue;
    const PitchedBlock theirs = SlabTranspose(t.n, t.ranks, s).x_blocks[static_cast<std::size_t>(t.rank)];
    if (theirs.count() == 0) continue;
    PeerPull q;
    q.rank = s;
    q.from = theirs.buffer_offset * sizeof(C);
    q.to = t.y_offsets[static_cast<std::size_t>(s)] * sizeof(C);
    q.width = q.from_pitch = q.to_pitch = theirs.count() * sizeof(C);
    q.rows = 1;
    pulls.push_back(q);
  }
  exchange.pull(pulls, y_slab, stream);
}

}  // namespace orbis::gpu
