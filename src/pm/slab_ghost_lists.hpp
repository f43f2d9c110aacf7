// Which ghost planes of a distributed mesh (pm/fft_mesh.hpp) travel between which ranks, in
// the order FftMesh::add_ghost_planes and fetch_ghost_planes move them, as plain lists: for
// code that keeps its slabs elsewhere than in an FftMesh (the PM over ranks on the GPUs,
// gpu/pm_cuda_ranks.hpp, stages its device planes through pinned memory with them).
//
// Rank s holds ghost_plane_count(n, its slab, wanted) ghost planes after its slab, the global
// planes (x0_s + nx_s + g) mod n, at local plane numbers nx_s + g. Every rank derives every
// rank's list from the slab rule, so both sides of an all-to-all agree on what travels and in
// what order: a rank's ghost planes grouped by owner in rank order (ghost order within one
// owner), and the planes a rank owns grouped by the rank that holds them as ghosts, in that
// holder's ghost order. Adding ghost planes into their owners sends ghost -> owned; fetching
// the owners' values sends owned -> ghost. A plane may be owned-listed more than once (thin
// slabs: two ranks hold it as a ghost plane).
#pragma once
#include <cstddef>
#include <vector>

namespace orbis {

struct SlabGhostLists {
  std::vector<int> ghost_planes;           // local plane numbers (nx + g), grouped by owner
  std::vector<std::size_t> ghost_counts;   // per owner rank, in planes
  std::vector<int> owned_planes;           // local plane numbers (i - x0), grouped by holder
  std::vector<std::size_t> owned_counts;   // per holder rank, in planes
};

// The lists of rank `rank` of `ranks` on an n-plane axis, `wanted` ghost planes asked for.
SlabGhostLists slab_ghost_lists(int n, int ranks, int rank, int wanted);

}  // namespace orbis
