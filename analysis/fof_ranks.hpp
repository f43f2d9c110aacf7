// Friends-of-friends over the particles of several ranks without gathering them: each rank
// links its own particles plus ghosts (the other ranks' particles within one linking length
// of its own particles' extent, core/periodic_extent.hpp), then the group labels are merged
// across ranks through the ghosts.
//
// Completeness: a pair within the linking length l with one end p on rank s is always found
// on s, since the other end lies within l of p and so of s's extent and travels to s.
// Merge: every particle's label starts as the smallest ID of its component on the rank that
// links it (own particles and ghosts); each round, the ranks holding a particle as a ghost
// send their component's label to its owner, which keeps the smaller. One direction is
// enough: a link between own particle p on r and ghost g from s is a link between own g
// and ghost p on s, so each of the two components hears from the other. When a round
// changes nothing anywhere, every component carries the smallest ID of its global group (a
// global union-find by minimum label; a group spanning k ranks in a row needs about k
// rounds).
// Only the members of groups of >= min_members then travel, to one rank, where they are
// put in the canonical order of fof.hpp: the same groups, members and order as one rank's
// find_groups over all the particles.
#pragma once
#include <cstdint>

#include "analysis/fof.hpp"
#include "core/comm.hpp"

namespace orbis::fof {

struct GatheredGroups {
  Particles members;    // on root: every group member (pos, mom, id), group after group
  FofGroups groups;     // on root: the groups in canonical order, indexing `members`
  std::uint64_t total_particles = 0;   // over all ranks (every rank)
  int merge_rounds = 0;                // label exchange rounds until nothing changed
  std::uint64_t ghosts = 0;            // ghosts this rank imported
};

// Collective over comm; each rank passes its own particles (any split, some ranks may have
// none). link: the linking length for the whole set (linking_length() of the total count).
GatheredGroups find_groups_across_ranks(const Particles& local, double box_mpc_h, double link_mpc_h,
                                        std::uint32_t min_members, const Comm& comm, int root = 0);

}  // namespace orbis::fof
