// Friends-of-friends on the device, from positions already there (the CUDA step engine's):
// exactly the groups of analysis/fof.hpp's host linker, as one label per particle (the
// smallest index of its group's members), from which the host makes the catalogue
// (fof::groups_from_labels, halo::find_haloes_from_labels) as from its own groups.
//
//   cells: every particle goes to the host grid's coarse cell (fof::grid_shape and
//     fof::fine_axis: the same cells, bit for bit); a CUB radix sort by cell gives the cells'
//     slot ranges, and the positions are gathered in slot order;
//   links: one thread per slot tests every later slot of the 27 neighbour cells (each
//     unordered pair once; over 1 or 2 cells per side the same cell at several periodic
//     images, as the host does), and unites the pair when its separation is within the
//     linking length: a lock-free union-find over slots whose roots are hooked onto the
//     smaller root with atomicCAS (Jaiganesh and Burtscher's ECL-CC), so that one pass links
//     every component, whatever the order the threads run in;
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
// Cost: the pairs of adjacent coarse cells (about 4 particles each on average, so ~54
// tests per particle in voids, more in haloes), on the GPU. Memory, from the stream-ordered
// pool for the length of a call: 40 bytes a particle (sort keys and values twice, the
// positions in slot order) plus 8 bytes a coarse cell and CUB's sort space;
// fof_device_bytes says how much.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "analysis/fof_grid.hpp"

namespace orbis::gpu {

// Device bytes fof_labels takes at most for `count` particles on a grid of this shape.
std::size_t fof_device_bytes(std::size_t count, const fof::GridShape& shape);

// For each of the `count` particles at x, y, z (device arrays, positions in [0, box): an
// Error otherwise, as the host grid's) the smallest index of its friends-of-friends group
// with linking length link_mpc_h in a periodic box of box_mpc_h. Queued on `stream` and
// waited for. Invalid sizes (no particles, 2^32 - 1 or more, a linking length not in
// (0, box/2)): an Error, as the host's.
std::vector<std::uint32_t> fof_labels(const double* x, const double* y, const double* z, std::size_t count,
                                      double box_mpc_h, double link_mpc_h, cudaStream_t stream);

}  // namespace orbis::gpu
