// The member properties of FoF groups over ranks (halo_properties.hpp's member_properties:
// length, mass, centre, velocities; not the overdensity masses, which need every particle
// around a centre): each group's by one rank, root collects them in the canonical order.
//
// Who computes a group is chosen so that the ranks' work (the potential's pair evaluations,
// estimated from the lengths) stays even: a group that lies on one rank alone (most of them)
// is computed there while that rank's work stays within the mean (its groups largest first);
// the others (the rest, and the groups on several ranks), largest first, each on the rank with
// the least work so far (ties: the lowest rank), to which their members travel (positions,
// momenta, IDs) and which merges them by ID. Every rank makes the same choice from the same
// numbers. A group's properties depend on its members in their canonical order alone
// (halo_potential.hpp's sums included), so they are bit for bit those of one rank's finder,
// whichever rank computes them. Root receives each group's properties and its members' IDs
// (8 bytes a member), not the members.
#pragma once
#include <cstdint>
#include <vector>

#include "analysis/fof_ranks.hpp"
#include "analysis/halo_properties.hpp"
#include "core/comm.hpp"

namespace orbis::halo {

struct MemberHaloes {                 // on root; empty elsewhere
  fof::FofGroups groups;              // lengths and offsets in the canonical order (members: unused)
  std::vector<std::uint64_t> ids;     // the members' IDs, group after group, by ID
  std::vector<HaloProperties> haloes; // the overdensity fields 0
  std::size_t moved = 0;              // groups computed on a rank that does not hold all members
  double particle_mass = 0;           // every rank
};

// Collective over the comm `share` was made on; each rank passes the particles it linked
// (positions wrapped into the box as the linkers wrap them) and its share (fof::merge_groups).
// softening_mpc_h: the potential's (halo_potential.hpp); link_mpc_h goes to groups.link_mpc_h.
MemberHaloes member_haloes_across_ranks(const Particles& local, const fof::RankGroups& share, double box_mpc_h,
                                        double a, double softening_mpc_h, double link_mpc_h, const Comm& comm);

}  // namespace orbis::halo
