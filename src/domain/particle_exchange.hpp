// Particles to the ranks whose domains hold them (domain/node_domains.hpp), and the ghost
// particles a pair sum over ranks needs.
//
// The run's short-range ghosts are whole top-tree nodes (domain/rank_domains.hpp), sent by
// import routes and refreshed with refresh_ghosts. import_ghosts below selects particles
// instead, for the energy check's pair sum (integrate/energy.hpp): a rank's pair sums are
// complete when it holds, besides its own particles, every other particle within r_cut of
// one of them. Each rank publishes the extent of its particles (a box around a centre,
// unwrapped across the periodic boundary); every particle within r_cut of another rank's
// extent (nearest periodic image) goes there, its position as it is, in [0, box).
#pragma once
#include <cstdint>
#include <vector>

#include "core/comm.hpp"
#include "core/particles.hpp"
#include "core/vec3.hpp"
#include "domain/node_domains.hpp"

namespace orbis {

// Collective: every particle to domains.owner(group[i]) (group[i]: its top-tree group),
// with its group. Only the particles that leave travel: the staying ones keep their order,
// the arrivals follow them (by source rank, each source's in its order), and `group` is
// permuted with them. An empty time_bin means bin 0 for every particle; afterwards it holds
// one bin per particle. Returns how many left this rank.
std::uint64_t migrate_particles(Particles& particles, std::vector<std::uint32_t>& group, const NodeDomains& domains,
                                const Comm& comm);

// migrate_particles' parts, for a caller that keeps the particles elsewhere (the CUDA engine,
// on the device: gpu/domain_update_cuda.cuh). The indices of the particles whose group
// another rank than `rank` owns, ascending.
std::vector<std::uint32_t> leaving_indices(const std::vector<std::uint32_t>& group, const NodeDomains& domains,
                                           int rank);
// Particles with their top-tree groups (particles.time_bin: one per particle).
struct Migrants {
  Particles particles;
  std::vector<std::uint32_t> group;
};
// Collective: each of `leaving` to domains.owner(its group); returns the particles that
// arrive here, by source rank, each source's in its order.
Migrants exchange_migrants(const Migrants& leaving, const NodeDomains& domains, const Comm& comm);

// Which of this rank's particles go where as ghosts: sent[] holds local indices, grouped
// by destination rank, counts[r] of them for rank r; recv_counts[r]: how many ghosts rank r
// sends here (known to both sides, so a refresh exchanges no counts).
struct GhostRoutes {
  std::vector<std::uint32_t> sent;
  std::vector<std::size_t> counts;
  std::vector<std::size_t> recv_counts;
};

// Collective: the positions of the other ranks' particles within r_cut of this rank's
// particles' extent (above), by source rank and in their order there. `centre`: this rank's
// domain centre. One rank: none.
std::vector<Vec3d> import_ghosts(const std::vector<Vec3d>& pos, const Vec3d& centre, double r_cut, double box,
                                 const Comm& comm);

// Collective: the current positions of the particles `routes` names, sent to their ranks
// (the run's ghosts between their choices: domain/rank_domains.hpp): one exchange, of the
// positions alone (routes.recv_counts says what arrives). They are
// written into `out` from index `at` on (resized to hold them; what is before kept), packed
// in `send` (resized), so buffers reused between the sub-steps of a PM step cost no
// allocation.
void refresh_ghosts(const std::vector<Vec3d>& pos, const GhostRoutes& routes, const Comm& comm,
                    std::vector<Vec3d>& out, std::size_t at, std::vector<Vec3d>& send);

}  // namespace orbis
