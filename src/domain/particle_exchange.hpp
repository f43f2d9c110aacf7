// Particles to the ranks whose domains hold them (domain/orb_domains.hpp), and the ghost
// particles each rank needs for its short-range forces.
//
// Ghosts: a rank's short-range sums are complete when it holds, besides its own particles,
// every other particle within r_cut of one of them. Each rank publishes the extent of its
// particles (a box around its domain's centre, unwrapped across the periodic boundary, so a
// particle that drifted out of its domain since the last migration still counts); every
// particle within r_cut of another rank's extent (nearest periodic image) goes there. Its
// position is sent as it is, in [0, box): the short-range solver takes the nearest image
// itself. Volume per step: the particles of a shell of thickness r_cut around each domain,
// 24 bytes each, against the whole top tree and its remote leaves for a distributed tree:
// for r_cut of a few mesh cells the shell is the smaller (and needs one exchange, no
// round trips).
#pragma once
#include <cstdint>
#include <vector>

#include "core/comm.hpp"
#include "core/particles.hpp"
#include "core/vec3.hpp"
#include "domain/orb_domains.hpp"

namespace orbis {

// Collective: every particle to domains.owner(pos); afterwards this rank holds exactly the
// particles of its domain, sorted by id (the same order whatever the rank count and the
// order of arrival). An empty time_bin means bin 0 for every particle; afterwards it holds
// one bin per particle. Returns how many left this rank. Only those travel: the others keep
// their places (sorted by id already after the first migration) and the arrivals are merged
// in, so a PM step that moves a few particles costs a pass over the positions, not a sort.
std::uint64_t migrate_particles(Particles& particles, const OrbDomains& domains, const Comm& comm);

// Which of this rank's particles went where as ghosts: sent[] holds local indices, grouped
// by destination rank, counts[r] of them for rank r.
struct GhostRoutes {
  std::vector<std::uint32_t> sent;
  std::vector<std::size_t> counts;
};

// Collective: the positions of the other ranks' particles within r_cut of this rank's
// particles' extent (above), by source rank and in their order there. `centre`: this rank's
// domain centre. One rank: none. `routes` (if given) receives what this rank sent.
std::vector<Vec3d> import_ghosts(const std::vector<Vec3d>& pos, const Vec3d& centre, double r_cut, double box,
                                 const Comm& comm, GhostRoutes* routes = nullptr);

// Collective: the current positions of the same ghosts as the import that made `routes`
// (the particles have moved, none has changed rank): one exchange, no selection. They are
// written into `out` from index `at` on (resized to hold them; what is before kept), so a
// buffer reused between the sub-steps of a PM step costs no allocation.
void refresh_ghosts(const std::vector<Vec3d>& pos, const GhostRoutes& routes, const Comm& comm,
                    std::vector<Vec3d>& out, std::size_t at);

}  // namespace orbis
