// The rank-domain update with the particles in device memory (issue #29): RankDomains::update
// (domain/rank_domains.hpp) in its parts, for the CUDA step engine's state, which stays on the
// device. The top tree is built on the device (gpu/global_top_tree_cuda.cuh) and each
// particle's top node stays there: its group comes from a table of the groups' nodes (one
// entry a group, uploaded), and only the groups' local counts come down, from which the host
// engine's code decides the runs (RankDomains::assign_groups). Who leaves is decided on the
// device (a stable selection: the leavers in their order, the stayers in theirs); only the
// leavers come down with their groups; they go through MPI as the host engine's do
// (exchange_migrants, domain/particle_exchange.hpp), and the arrivals go up with their
// groups. On the device the stayers close up in their order and the arrivals follow them
// (migrate_particles' order), that set's subtree order is computed from its positions and
// groups (gpu/subtree_order_cuda.cuh, the host's permutation bit for bit), and the state is
// permuted by it: the host engine's particles in the host engine's order, so that a run over
// ranks is the same on either engine and after a restart.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "domain/rank_domains.hpp"
#include "gpu/device_buffer.cuh"

namespace orbis::gpu {

// The CUDA step engine's per-particle state: positions and momenta as x | y | z blocks of n
// doubles (Mpc/h, km/s), ids, time bins.
struct DeviceParticleState {
  DeviceArray<double>& pos;
  DeviceArray<double>& mom;
  DeviceArray<std::uint64_t>& id;
  DeviceArray<std::uint8_t>& bin;
};

// Room in a per-particle array for `count` particles of `per` elements each. headroom (over
// ranks, where every domain update changes the count): 1/16 more when it grows, so that the
// small changes of most updates (the particles that cross a domain's faces, a rebalance's
// few percent) take no new arrays; a quarter more was 0.14 GiB a rank of 8.4M particles at
// 256^3 on 2 ranks (the state's 93 bytes a particle). Contents are not kept when it grows.
template <typename T>
void fit_particles(DeviceArray<T>& array, std::size_t per, std::size_t count, bool headroom) {
  if (per * count <= array.capacity()) return;
  array.ensure_exact(per * (headroom ? count + count / 16 : count));
}

// Collective over domains.comm() (several ranks), at a PM step: domains.update(the state's n
// particles, work), the particles kept on the device. Their positions are wrapped into
// [0, box) first (the host engine's update gets them wrapped). Returns the rank's new count;
// the state's arrays hold those particles (grown as fit_particles(..., true) grows them).
// scratch: device memory whose contents go, grown to 3 doubles a particle (the engine's
// long-range accelerations, zeroed after the update). Queued on `stream` and waited for; the
// working arrays come from the device pool and go back to it.
std::size_t update_domains_cuda(RankDomains& domains, double work, const DeviceParticleState& state, std::size_t n,
                                double box, DeviceArray<double>& scratch, cudaStream_t stream);

}  // namespace orbis::gpu
