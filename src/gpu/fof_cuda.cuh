// Friends-of-friends on the device, from positions already there (the CUDA step engine's):
// exactly the groups of analysis/fof.hpp's host linker, as one label per particle (the
// smallest index of its group's members), from which the host makes the catalogue
// (fof::groups_from_labels, halo::find_haloes_from_labels) as from its own groups.
//
//   cells: a CUB radix sort of the particles by the cell of a search grid of side just above
//     the linking length l (the host's coarse cells are ~8 l wide at the default b = 0.2: in a
//     halo's core each holds hundreds of times more particles); the positions are gathered in
//     slot order, each with its host coarse cell (fof::grid_shape and fof::fine_axis: the
//     host's cells, bit for bit);
//   links: one thread per slot tests every later slot of the 27 neighbour search cells (each
//     unordered pair once) as the host would test the pair: only if their host cells are
//     adjacent, with the host's periodic image and order of operations; a pair within the
//     linking length is united in a lock-free union-find over slots whose roots are hooked onto
//     the smaller root with atomicCAS (Jaiganesh and Burtscher's ECL-CC), so that one pass
//     links every component, whatever the order the threads run in. With fewer than 3 host or
//     search cells per side (a few particles, or l near box/3) the host's own coarse cells are
//     searched instead, each neighbour at every periodic image the host tests;
//   labels: every slot points at its root, the root takes its members' smallest particle
//     index (atomicMin), and each particle gets its root's.
//
// Boundary pairs decide as on the host: the separation is computed with the host's
// arithmetic (fof.cpp's CellLinker: the neighbour cell's particle shifted by its periodic
// image, x_a - (x_b + shift) with a the cell whose half-shell neighbour b is, then
// dx^2 + dy^2 + dz^2 in that order, no FMA) and compared as there, <= l^2. So a pair at
// exactly the linking length, or one whose separation rounds differently across the box's
// faces, is linked on the device exactly when it is on the host. (The host's dense path
// links whole fine cells without testing their pairs: those are within l by a margin of
// 1e-9, so the test would pass.)
//
// Cost: in voids 27 cells of about (l / spacing)^3 particles each per particle, in haloes
// ~27 x (the density times l^3) / 2 tests per particle. Memory, from the stream-ordered pool
// for the length of a call: 52 bytes a particle (64-bit sort keys and 32-bit values twice,
// the positions and host cells in slot order) and CUB's sort space; fof_device_bytes says how
// much.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "core/vec3.hpp"

namespace orbis::gpu {

// Device bytes fof_labels takes at most for `count` particles.
std::size_t fof_device_bytes(std::size_t count, double box_mpc_h, double link_mpc_h);

// For each of the `count` particles at x, y, z (device arrays, positions in [0, box): an
// Error otherwise, as the host grid's) the smallest index of its friends-of-friends group
// with linking length link_mpc_h in a periodic box of box_mpc_h. Queued on `stream` and
// waited for. Invalid sizes (no particles, 2^32 - 1 or more, a linking length not in
// (0, box/2)): an Error, as the host's.
std::vector<std::uint32_t> fof_labels(const double* x, const double* y, const double* z, std::size_t count,
                                      double box_mpc_h, double link_mpc_h, cudaStream_t stream);

// Device bytes fof_labels_with_ghosts takes at most for `own` particles and `ghosts` ghosts.
std::size_t fof_with_ghosts_device_bytes(std::size_t own, std::size_t ghosts, double box_mpc_h, double link_mpc_h);

// One rank's share over several (analysis/fof_ranks.hpp): its `own` particles at x, y, z
// (device arrays, x | y | z blocks; any positions) and `ghost_count` ghosts at `ghosts`
// (host), copied into one device set, every coordinate wrapped into [0, box) on the way with
// periodic_wrap_position's operations each rounded on its own (core/vec3.hpp: bit for bit the
// host's wrap, so a particle outside the box is linked where the host would put it), then
// fof_labels on the set: for each own particle, then each ghost, the smallest index of its
// component in that order (fof::LocalLinker's form). The copy (24 bytes a particle) and
// fof_labels' arrays come from the pool for the call alone. No particles: no labels.
std::vector<std::uint32_t> fof_labels_with_ghosts(const double* x, const double* y, const double* z, std::size_t own,
                                                  const Vec3d* ghosts, std::size_t ghost_count, double box_mpc_h,
                                                  double link_mpc_h, cudaStream_t stream);

}  // namespace orbis::gpu
