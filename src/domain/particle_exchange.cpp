#include "domain/particle_exchange.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "core/error.hpp"
#include "core/periodic_extent.hpp"

namespace orbis {
namespace {

struct ParticleRecord {
  Vec3d pos, mom;
  std::uint64_t id;
  std::uint64_t time_bin;   // a whole word: no padding bytes travel uninitialised
};

}  // namespace

void migrate_particles(Particles& particles, const OrbDomains& domains, const Comm& comm) {
  const std::size_t n = particles.size();
  if (domains.ranks() != comm.size())
    fail("internal: {} domains for {} ranks", domains.ranks(), comm.size());
  if (!particles.time_bin.empty() && particles.time_bin.size() != n)
    fail("internal: {} time bins for {} particles", particles.time_bin.size(), n);
  std::vector<int> dest(n);
  std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()), 0);
  for (std::size_t i = 0; i < n; ++i) ++counts[static_cast<std::size_t>(dest[i] = domains.owner(particles.pos[i]))];
  std::vector<std::size_t> offset(counts.size(), 0);
  std::exclusive_scan(counts.begin(), counts.end(), offset.begin(), std::size_t{0});
  std::vector<ParticleRecord> send(n);
  for (std::size_t i = 0; i < n; ++i)
    send[offset[static_cast<std::size_t>(dest[i])]++] =
        ParticleRecord{particles.pos[i], particles.mom[i], particles.id[i],
                       particles.time_bin.empty() ? 0u : particles.time_bin[i]};
  std::vector<ParticleRecord> mine = comm.alltoallv(send, counts);
  std::sort(mine.begin(), mine.end(), [](const ParticleRecord& a, const ParticleRecord& b) { return a.id < b.id; });
  particles.resize(mine.size());
  for (std::size_t i = 0; i < mine.size(); ++i) {
    particles.pos[i] = mine[i].pos;
    particles.mom[i] = mine[i].mom;
    particles.id[i] = mine[i].id;
    particles.time_bin[i] = static_cast<std::uint8_t>(mine[i].time_bin);
  }
}

std::vector<Vec3d> import_ghosts(const std::vector<Vec3d>& pos, const Vec3d& centre, double r_cut, double box,
                                 const Comm& comm, GhostRoutes* routes) {
  if (routes) *routes = GhostRoutes{{}, std::vector<std::size_t>(static_cast<std::size_t>(comm.size()), 0)};
  if (comm.size() == 1) return {};
  const std::vector<PeriodicExtent> extents = comm.allgather(PeriodicExtent::around(pos, centre, box));
  const double r_cut2 = r_cut * r_cut;
  std::vector<Vec3d> send;
  std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()), 0);
  for (int r = 0; r < comm.size(); ++r) {
    const PeriodicExtent& e = extents[static_cast<std::size_t>(r)];
    if (r == comm.rank() || e.empty) continue;
    for (std::size_t i = 0; i < pos.size(); ++i)
      if (e.distance2(pos[i], box) <= r_cut2) {
        send.push_back(pos[i]);
        ++counts[static_cast<std::size_t>(r)];
        if (routes) routes->sent.push_back(static_cast<std::uint32_t>(i));
      }
  }
  if (routes) routes->counts = counts;
  return comm.alltoallv(send, counts);
}

std::vector<Vec3d> refresh_ghosts(const std::vector<Vec3d>& pos, const GhostRoutes& routes, const Comm& comm) {
  std::vector<Vec3d> send(routes.sent.size());
  for (std::size_t k = 0; k < send.size(); ++k) send[k] = pos[routes.sent[k]];
  return comm.alltoallv(send, routes.counts);
}

}  // namespace orbis
