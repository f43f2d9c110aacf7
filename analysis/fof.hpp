// Periodic friends-of-friends (Davis et al. 1985): two particles are friends when their
// minimum-image separation is <= the linking length l = b * (mean inter-particle spacing),
// spacing = box / N^(1/3); groups are the connected components of the friendship graph.
//
// Cost O(N) on average: a cell grid (fof_grid.hpp) proposes candidate pairs and a
// union-find (fof_union_find.hpp) joins them. Dense regions are handled per fine cell (side
// <= l/sqrt(3), so a fine cell's members are all friends): two fine cells are linked by the
// first pair found within l, and not examined at all when already in one set.
//
// Threads: the box is cut into slabs of x planes balanced by particle count; each thread
// links pairs inside one slab ("link within a set"), then the pairs across slab boundaries
// are linked serially ("merge sets"). A distributed run does the same with domains instead
// of slabs: each rank links its particles plus ghosts within l of its domain, then group
// labels (the smallest member ID) are merged across ranks through the ghosts.
//
// The result does not depend on the thread count: the components are unique, and the
// output order is canonical:
//   groups    by descending length, ties by ascending smallest member ID;
//   members   within a group by ascending particle ID (ties, for duplicate IDs, by index).
#pragma once
#include <cstdint>
#include <vector>

#include "analysis/fof_grid.hpp"
#include "analysis/fof_union_find.hpp"
#include "core/particles.hpp"

namespace orbis {
class Params;
}

namespace orbis::fof {

struct FofConfig {
  double linking_length_over_spacing = 0.2;   // b
  std::uint32_t min_members = 32;             // smallest group kept
};
// [analysis] fof_linking_length and fof_min_members.
FofConfig config_from_params(const Params& params);

// b * box / N^(1/3), Mpc/h.
double linking_length(std::size_t num_particles, double box_mpc_h, double b);

struct FofGroups {
  std::vector<std::uint32_t> length;    // members per group
  std::vector<std::uint64_t> offset;    // group g's members: members[offset[g] .. + length[g])
  std::vector<std::uint32_t> members;   // particle indices (into the Particles given)
  double link_mpc_h = 0;                // linking length used

  std::size_t size() const { return length.size(); }
};

// Unites every pair of particles within grid.link() (periodic minimum image). `sets` is
// indexed by grid slot (grid.order() maps a slot to its particle) and has grid.size()
// elements. Uses OpenMP threads.
void link_particles(const CellGrid& grid, const std::vector<Vec3d>& pos, DisjointSets& sets);

// The sets with >= min_members elements as groups in the canonical order. Flattens `sets`.
FofGroups collect_groups(const CellGrid& grid, DisjointSets& sets,
                         const std::vector<std::uint64_t>& ids, std::uint32_t min_members);

// The groups of particles linked elsewhere (the CUDA step engine's, gpu/fof_cuda.cuh): label[i]
// is the smallest index of particle i's group (so label[i] <= i and label[label[i]] =
// label[i]; anything else is an internal error); the groups with >= min_members in the
// canonical order, as collect_groups gives them.
FofGroups groups_from_labels(const std::vector<std::uint32_t>& label, const std::vector<std::uint64_t>& ids,
                             std::uint32_t min_members, double link_mpc_h);

// Both steps for one set of particles; the grid must have been built on particles.pos.
FofGroups find_groups(const CellGrid& grid, const Particles& particles, std::uint32_t min_members);

}  // namespace orbis::fof
