#include "domain/particle_exchange.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "core/error.hpp"

namespace orbis {
namespace {

struct ParticleRecord {
  Vec3d pos, mom;
  std::uint64_t id;
  std::uint64_t time_bin;   // a whole word: no padding bytes travel uninitialised
};

// Where x lies relative to c, in [-box/2, box/2): the nearest periodic image.
double wrapped(double x, double c, double box) {
  double d = x - c;
  d -= box * std::floor(d / box + 0.5);
  return d;
}

// The extent of a rank's particles around its domain centre; empty when it has none.
struct Extent {
  Vec3d centre, lo, hi;   // lo, hi relative to centre
  std::uint64_t empty;
};

// Squared distance from x to the extent, over the periodic images.
double distance2(const Vec3d& x, const Extent& e, double box) {
  double d2 = 0;
  for (int a = 0; a < 3; ++a) {
    const double u = wrapped(x[a], e.centre[a], box);
    double best = HUGE_VAL;
    for (int m = -1; m <= 1; ++m) {
      const double v = u + m * box;
      best = std::min(best, v < e.lo[a] ? e.lo[a] - v : (v > e.hi[a] ? v - e.hi[a] : 0.0));
    }
    d2 += best * best;
  }
  return d2;
}

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
                                 const Comm& comm) {
  if (comm.size() == 1) return {};
  Extent mine{centre, Vec3d{HUGE_VAL, HUGE_VAL, HUGE_VAL}, Vec3d{-HUGE_VAL, -HUGE_VAL, -HUGE_VAL}, pos.empty() ? 1u : 0u};
  for (const Vec3d& x : pos)
    for (int a = 0; a < 3; ++a) {
      const double u = wrapped(x[a], centre[a], box);
      mine.lo[a] = std::min(mine.lo[a], u);
      mine.hi[a] = std::max(mine.hi[a], u);
    }
  const std::vector<Extent> extents = comm.allgather(mine);
  const double r_cut2 = r_cut * r_cut;
  std::vector<std::vector<Vec3d>> outgoing(static_cast<std::size_t>(comm.size()));
  for (int r = 0; r < comm.size(); ++r) {
    const Extent& e = extents[static_cast<std::size_t>(r)];
    if (r == comm.rank() || e.empty) continue;
    for (const Vec3d& x : pos)
      if (distance2(x, e, box) <= r_cut2) outgoing[static_cast<std::size_t>(r)].push_back(x);
  }
  std::vector<Vec3d> send;
  std::vector<std::size_t> counts;
  for (const auto& list : outgoing) {
    counts.push_back(list.size());
    send.insert(send.end(), list.begin(), list.end());
  }
  return comm.alltoallv(send, counts);
}

}  // namespace orbis
