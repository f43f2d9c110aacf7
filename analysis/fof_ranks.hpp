// Friends-of-friends over the particles of several ranks without gathering them, in three
// steps, each written once here:
//   ghosts (import_ghosts): each rank receives the other ranks' particles within one linking
//     length of a cell that holds any of its own particles (fof_ghost_cells.hpp: cells a
//     little wider than the linking length, so a layer about one cell thick);
//   local links (a LocalLinker): each rank links its own particles and its ghosts together,
//     on the host (link_on_host) or where the particles are (the CUDA step engine links them
//     on the rank's GPU: StepEngine::fof_labels_with_ghosts, integrate/outputs.hpp's
//     engine_fof_links);
//   merge and gather (gather_groups): the group labels merged across ranks through the
//     ghosts, then the members of the groups of >= min_members gathered to one rank in
//     canonical order.
// find_groups_across_ranks runs the three in a row; a run's output imports the ghosts and
// links them on the GPU on the main thread, and merges on its writer thread, where the halo
// catalogue (halo_catalogue.hpp) gathers each group's properties rather than its members.
//
// Completeness: a pair within the linking length l with one end p on rank s is always found
// on s, since the other end lies within l of p and so of p's cell, which s marks, and
// travels to s.
// Merge: every particle's label starts as the smallest ID of its component on the rank that
// links it (own particles and ghosts); each round, the ranks holding a particle as a ghost
// send their component's label to its owner, which keeps the smaller. One direction is
// enough: a link between own particle p on r and ghost g from s is a link between own g
// and ghost p on s, so each of the two components hears from the other. When a round
// changes nothing anywhere, every component carries the smallest ID of its global group (a
// global union-find by minimum label; a group spanning k ranks in a row needs about k
// rounds).
// Only the members of groups of >= min_members then travel, to one rank, each rank's share
// already in the canonical order of fof.hpp, merged there into that order
// (fof_ranks_gather.cpp says what each step costs): the same groups, members and order as
// one rank's find_groups over all the particles, whichever linker linked them (the device
// linker makes the host's decisions bit for bit, gpu/fof_cuda.cuh).
//
// Positions: the ghosts travel wrapped into [0, box), and the linkers wrap the own particles'
// positions as they copy them (core/vec3.hpp periodic_wrap_position): a rank's particles may
// lie slightly outside the box (drifted since their last wrap).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "analysis/fof.hpp"
#include "core/comm.hpp"

namespace orbis::fof {

// One rank's ghosts: the other ranks' particles within one linking length of its cells.
struct Ghosts {
  std::vector<Vec3d> pos;                // in [0, box), grouped by the rank they came from
  std::vector<std::uint64_t> id;
  std::vector<std::size_t> from;         // how many came from each rank
  std::vector<std::uint32_t> exported;   // this rank's particles sent as ghosts (local index), by destination rank
  std::size_t size() const { return pos.size(); }
};

// Collective over comm: the ghosts of each rank's particles `local` (any positions: wrapped
// into the box as they are read, none copied) for linking length link. Each rank's part runs
// on its OpenMP threads; the ghosts are the same for any thread count.
Ghosts import_ghosts(const Particles& local, double box_mpc_h, double link_mpc_h, const Comm& comm);

// Links one rank's particles (`own`, in [0, box) or slightly outside) and its ghosts (in
// [0, box)) with linking length link_mpc_h: for each of own, then of ghosts, the smallest
// index of its component in that order (so label[i] <= i and label[label[i]] = label[i]:
// gpu::fof_labels' and fof::groups_from_labels' form). An empty answer for a non-empty set
// means "not linked here": gather_groups then links them on the host.
using LocalLinker = std::function<std::vector<std::uint32_t>(const std::vector<Vec3d>& own,
                                                             const std::vector<Vec3d>& ghosts, double box_mpc_h,
                                                             double link_mpc_h)>;

// x wrapped into [0, box) as the linkers see it (compiled without FMA contraction, each
// operation rounded on its own as on the device): the position a member of a group has in
// the catalogue over ranks.
Vec3d linked_position(const Vec3d& x, double box_mpc_h);

// The host linker (fof.hpp's grid and union-find, OpenMP threads).
std::vector<std::uint32_t> link_on_host(const std::vector<Vec3d>& own, const std::vector<Vec3d>& ghosts,
                                        double box_mpc_h, double link_mpc_h);

// A rank's particles linked with its ghosts: the first two steps' result.
struct LocalLinks {
  std::vector<std::uint32_t> label;   // LocalLinker's form over own then ghosts; empty: not linked yet
  Ghosts ghosts;                      // none on one rank
  double box_mpc_h = 0, link_mpc_h = 0;
};

// Collective over comm: import_ghosts, then `linker` on this rank's particles and ghosts.
LocalLinks link_locally(const Particles& local, double box_mpc_h, double link_mpc_h, const Comm& comm,
                        const LocalLinker& linker = link_on_host);

// The third step's parts, for a caller that gathers something else than the members (the
// halo catalogue: each group's properties, computed on one rank, halo_members_ranks.hpp).
// One rank's part of the groups of >= min_members after the merge: the groups it holds
// members of, in the canonical order, and its members of each, by ID.
struct GroupShare {
  std::uint64_t label = 0;    // the group's smallest member ID (over all ranks)
  std::uint64_t length = 0;   // its members over all ranks
  std::uint64_t count = 0;    // its members on this rank (== length: the group lies here alone)
};
struct RankGroups {
  std::vector<GroupShare> groups;
  std::vector<std::uint32_t> members;   // indices into the rank's particles, group after group
  std::uint64_t total_particles = 0;    // over all ranks
  int merge_rounds = 0;                 // label exchange rounds until nothing changed
  std::uint64_t ghosts = 0;             // ghosts this rank imported
  double merge_seconds = 0, share_seconds = 0;   // this rank's time in the two parts (for logs)
};

// Collective over comm (the ranks of the comm `links` were made on, in the same order; each
// rank passes the particles it linked, in the same order): links on the host where
// links.label is empty, merges the labels across ranks, adds up the groups' lengths and
// returns this rank's share. Malformed labels on any rank: an Error on every rank.
RankGroups merge_groups(const Particles& local, const LocalLinks& links, std::uint32_t min_members, const Comm& comm);

// The canonical order of the groups of all ranks' shares (`shares`: every rank's
// RankGroups::groups concatenated in rank order, per_rank of them from each): group g's
// length, and its shares shares[piece[k]] for k in [piece_begin[g], piece_begin[g + 1]), in
// rank order; their counts add up to the length (else an Error).
struct SharedOrder {
  std::vector<std::uint64_t> length;
  std::vector<std::size_t> piece_begin{0};
  std::vector<std::size_t> piece;
  std::size_t size() const { return length.size(); }
};
SharedOrder canonical_order(const std::vector<GroupShare>& shares, const std::vector<std::size_t>& per_rank);

// The members of groups held by several ranks in order: `first[k]`, `count[k]` delimit piece
// k's members among `id` (each piece by ID); returns their indices into `id` merged by ID.
std::vector<std::size_t> merge_pieces_by_id(const std::vector<std::uint64_t>& id, const std::vector<std::size_t>& first,
                                            const std::vector<std::size_t>& count);

struct GatheredGroups {
  Particles members;    // on root: every group member (pos, mom, id), group after group
  FofGroups groups;     // on root: the groups in canonical order, indexing `members`
  std::uint64_t total_particles = 0;   // over all ranks (every rank)
  int merge_rounds = 0;                // label exchange rounds until nothing changed
  std::uint64_t ghosts = 0;            // ghosts this rank imported
};

// Collective over comm, as merge_groups, whose shares' members (positions wrapped into the
// box, momenta, IDs) it then gathers to root in the canonical order.
GatheredGroups gather_groups(const Particles& local, const LocalLinks& links, std::uint32_t min_members,
                             const Comm& comm, int root = 0);

// Collective over comm; each rank passes its own particles (any split, some ranks may have
// none). link: the linking length for the whole set (linking_length() of the total count).
// The three steps, the local links by `linker`.
GatheredGroups find_groups_across_ranks(const Particles& local, double box_mpc_h, double link_mpc_h,
                                        std::uint32_t min_members, const Comm& comm, int root = 0,
                                        const LocalLinker& linker = link_on_host);

}  // namespace orbis::fof
