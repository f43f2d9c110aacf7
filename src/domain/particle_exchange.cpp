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
  std::uint32_t time_bin;   // whole words: no padding bytes travel uninitialised
  std::uint32_t group;
};

// Per-particle passes run over fixed blocks, in parallel; what they collect is concatenated
// in block order, so the result is the serial loop's for any thread count.
constexpr std::size_t kBlock = std::size_t{1} << 16;

// The indices i < n with keep(i), ascending.
template <typename F>
std::vector<std::uint32_t> indices_where(std::size_t n, F keep) {
  const std::size_t n_blocks = (n + kBlock - 1) / kBlock;
  std::vector<std::vector<std::uint32_t>> found(n_blocks);
#pragma omp parallel for schedule(dynamic, 1)
  for (std::ptrdiff_t b = 0; b < static_cast<std::ptrdiff_t>(n_blocks); ++b) {
    const std::size_t end = std::min(n, (static_cast<std::size_t>(b) + 1) * kBlock);
    for (std::size_t i = static_cast<std::size_t>(b) * kBlock; i < end; ++i)
      if (keep(i)) found[static_cast<std::size_t>(b)].push_back(static_cast<std::uint32_t>(i));
  }
  std::size_t total = 0;
  for (const auto& f : found) total += f.size();
  std::vector<std::uint32_t> out;
  out.reserve(total);
  for (const auto& f : found) out.insert(out.end(), f.begin(), f.end());
  return out;
}

}  // namespace

std::vector<std::uint32_t> leaving_indices(const std::vector<std::uint32_t>& group, const NodeDomains& domains,
                                           int rank) {
  return indices_where(group.size(), [&](std::size_t i) { return domains.owner(group[i]) != rank; });
}

Migrants exchange_migrants(const Migrants& leaving, const NodeDomains& domains, const Comm& comm) {
  const std::size_t n = leaving.particles.size();
  if (domains.ranks() != comm.size()) fail("internal: {} domains for {} ranks", domains.ranks(), comm.size());
  if (leaving.group.size() != n || leaving.particles.time_bin.size() != n)
    fail("internal: {} migrants with {} groups and {} time bins", n, leaving.group.size(),
         leaving.particles.time_bin.size());
  std::vector<int> dest(n);
  std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()), 0);
  for (std::size_t k = 0; k < n; ++k) ++counts[static_cast<std::size_t>(dest[k] = domains.owner(leaving.group[k]))];
  std::vector<std::size_t> offset(counts.size(), 0);
  std::exclusive_scan(counts.begin(), counts.end(), offset.begin(), std::size_t{0});
  std::vector<ParticleRecord> send(n);
  const Particles& p = leaving.particles;
  for (std::size_t k = 0; k < n; ++k)
    send[offset[static_cast<std::size_t>(dest[k])]++] =
        ParticleRecord{p.pos[k], p.mom[k], p.id[k], p.time_bin[k], leaving.group[k]};
  const std::vector<ParticleRecord> arriving = comm.alltoallv(send, counts);
  Migrants out;
  out.particles.mass = p.mass;
  out.particles.resize(arriving.size());
  out.group.resize(arriving.size());
  for (std::size_t j = 0; j < arriving.size(); ++j) {
    const ParticleRecord& r = arriving[j];
    out.particles.pos[j] = r.pos;
    out.particles.mom[j] = r.mom;
    out.particles.id[j] = r.id;
    out.particles.time_bin[j] = static_cast<std::uint8_t>(r.time_bin);
    out.group[j] = r.group;
  }
  return out;
}

std::uint64_t migrate_particles(Particles& particles, std::vector<std::uint32_t>& group, const NodeDomains& domains,
                                const Comm& comm) {
  const std::size_t n = particles.size();
  if (!particles.time_bin.empty() && particles.time_bin.size() != n)
    fail("internal: {} time bins for {} particles", particles.time_bin.size(), n);
  if (group.size() != n) fail("internal: {} groups for {} particles", group.size(), n);
  if (n > UINT32_MAX) fail("internal: {} particles on one rank (at most 2^32 - 1)", n);
  if (particles.time_bin.empty()) particles.time_bin.assign(n, 0);
  const std::vector<std::uint32_t> leaving = leaving_indices(group, domains, comm.rank());
  Migrants leavers;
  leavers.particles.resize(leaving.size());
  leavers.group.resize(leaving.size());
  for (std::size_t k = 0; k < leaving.size(); ++k) {
    const std::uint32_t i = leaving[k];
    leavers.particles.pos[k] = particles.pos[i];
    leavers.particles.mom[k] = particles.mom[i];
    leavers.particles.id[k] = particles.id[i];
    leavers.particles.time_bin[k] = particles.time_bin[i];
    leavers.group[k] = group[i];
  }
  const Migrants arriving = exchange_migrants(leavers, domains, comm);
  // The staying particles close up in their order (in place), each run between two leavers
  // moved at once (a memmove per array: leavers are few).
  std::size_t kept = 0, from = 0;
  const auto close_up = [&](std::size_t to) {   // [from, to) to [kept, ...)
    if (kept != from) {
      const auto move = [&](auto& v) {
        std::copy(v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(to),
                  v.begin() + static_cast<std::ptrdiff_t>(kept));
      };
      move(particles.pos);
      move(particles.mom);
      move(particles.id);
      move(particles.time_bin);
      move(group);
    }
    kept += to - from;
  };
  for (std::uint32_t i : leaving) {
    close_up(i);
    from = static_cast<std::size_t>(i) + 1;
  }
  close_up(n);
  const std::size_t m = arriving.particles.size();
  particles.resize(kept + m);
  group.resize(kept + m);
  const auto append = [&](auto& to, const auto& from_arrivals) {
    std::copy(from_arrivals.begin(), from_arrivals.end(), to.begin() + static_cast<std::ptrdiff_t>(kept));
  };
  append(particles.pos, arriving.particles.pos);
  append(particles.mom, arriving.particles.mom);
  append(particles.id, arriving.particles.id);
  append(particles.time_bin, arriving.particles.time_bin);
  append(group, arriving.group);
  return leaving.size();
}

std::vector<Vec3d> import_ghosts(const std::vector<Vec3d>& pos, const Vec3d& centre, double r_cut, double box,
                                 const Comm& comm) {
  if (comm.size() == 1) return {};
  const std::vector<PeriodicExtent> extents = comm.allgather(PeriodicExtent::around(pos, centre, box));
  const double r_cut2 = r_cut * r_cut;
  std::vector<std::uint32_t> sent;
  std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()), 0);
  // A rank whose extent lies beyond r_cut of this rank's gets nothing, and its particles
  // are not tested: with many ranks most are far. The margin covers the rounding of the
  // particles' distances (~1e-16 box), so no particle that the test would take is skipped.
  const PeriodicExtent& own = extents[static_cast<std::size_t>(comm.rank())];
  const double beyond = r_cut + 1e-9 * box;
  for (int r = 0; r < comm.size(); ++r) {
    const PeriodicExtent& e = extents[static_cast<std::size_t>(r)];
    if (r == comm.rank() || e.empty || own.gap2(e, box) > beyond * beyond) continue;
    const std::vector<std::uint32_t> to_r =
        indices_where(pos.size(), [&](std::size_t i) { return e.distance2(pos[i], box) <= r_cut2; });
    counts[static_cast<std::size_t>(r)] = to_r.size();
    sent.insert(sent.end(), to_r.begin(), to_r.end());
  }
  std::vector<Vec3d> send(sent.size());
  const std::ptrdiff_t n_sent = static_cast<std::ptrdiff_t>(sent.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t k = 0; k < n_sent; ++k) send[static_cast<std::size_t>(k)] = pos[sent[static_cast<std::size_t>(k)]];
  return comm.alltoallv(send, counts);
}

void refresh_ghosts(const std::vector<Vec3d>& pos, const GhostRoutes& routes, const Comm& comm,
                    std::vector<Vec3d>& out, std::size_t at, std::vector<Vec3d>& send) {
  send.resize(routes.sent.size());
  const std::ptrdiff_t n_sent = static_cast<std::ptrdiff_t>(send.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t k = 0; k < n_sent; ++k)
    send[static_cast<std::size_t>(k)] = pos[routes.sent[static_cast<std::size_t>(k)]];
  out.resize(at + Comm::total(routes.recv_counts));
  comm.alltoallv_known(send.data(), routes.counts, out.data() + at, routes.recv_counts, sizeof(Vec3d));
}

}  // namespace orbis
