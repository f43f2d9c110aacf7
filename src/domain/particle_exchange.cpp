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

// Whether ids[0..n) ascend strictly (as migration leaves them).
bool strictly_ascending(const std::vector<std::uint64_t>& ids) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(ids.size());
  int ascending = 1;
#pragma omp parallel for schedule(static) reduction(min : ascending)
  for (std::ptrdiff_t i = 1; i < n; ++i)
    if (!(ids[static_cast<std::size_t>(i - 1)] < ids[static_cast<std::size_t>(i)])) ascending = 0;
  return ascending != 0;
}

// The particles reordered by id (the arrays permuted together).
void sort_by_id(Particles& p) {
  std::vector<std::uint32_t> order(p.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return p.id[a] < p.id[b]; });
  const auto permute = [&order](auto& values) {
    auto out = values;
    for (std::size_t k = 0; k < order.size(); ++k) out[k] = values[order[k]];
    values.swap(out);
  };
  permute(p.pos);
  permute(p.mom);
  permute(p.id);
  permute(p.time_bin);
}

// A run of staying particles [begin, end) (indices before the update) that moves by `shift`.
struct Segment {
  std::size_t begin, end;
  std::ptrdiff_t shift;
};

// In place: the particles at the ascending indices `leaving` removed, `arriving` (sorted by
// id) inserted, the rest kept in their order; with the ids ascending before, they ascend
// after. Each run of staying particles between two removals or insertions moves as a block
// (memmove): the runs moving left in ascending order, then those moving right in descending
// order, so that no run is overwritten before it has moved (every run's new place lies
// beyond the old places of the runs not yet moved).
void remove_and_insert(Particles& p, const std::vector<std::uint32_t>& leaving,
                       const std::vector<ParticleRecord>& arriving) {
  const std::size_t n = p.size();
  // Where each arrival goes among the old indices: before the first larger id.
  std::vector<std::size_t> before(arriving.size());
  for (std::size_t j = 0; j < arriving.size(); ++j)
    before[j] = static_cast<std::size_t>(std::upper_bound(p.id.begin(), p.id.end(), arriving[j].id) - p.id.begin());
  // The runs: cut at every removal and every insertion point.
  std::vector<Segment> runs;
  std::size_t l = 0, a = 0, start = 0;
  for (;;) {
    // The next cut at or after `start`: a removal (which the run excludes) or an insertion.
    const std::size_t next_leave = l < leaving.size() ? leaving[l] : n;
    std::size_t next_insert = a < before.size() ? before[a] : n;
    if (next_insert < start) next_insert = start;   // several arrivals before one index
    const std::size_t end = std::min(next_leave, next_insert);
    if (end > start)
      runs.push_back(Segment{start, end, static_cast<std::ptrdiff_t>(a) - static_cast<std::ptrdiff_t>(l)});
    if (end == n && l == leaving.size() && a == before.size()) break;
    if (next_insert <= next_leave && a < before.size()) {
      ++a;   // arrivals at the same point: one after another, runs of length 0 between them
      start = end;
    } else {
      ++l;
      start = end + 1;
    }
  }
  const std::size_t m = n - leaving.size() + arriving.size();
  if (m > n) p.resize(m);
  const auto move_run = [&p](const Segment& s) {
    const auto shift_all = [&s](auto& values) {
      const auto first = values.begin() + static_cast<std::ptrdiff_t>(s.begin);
      const auto last = values.begin() + static_cast<std::ptrdiff_t>(s.end);
      if (s.shift < 0) std::move(first, last, first + s.shift);
      else std::move_backward(first, last, last + s.shift);
    };
    shift_all(p.pos);
    shift_all(p.mom);
    shift_all(p.id);
    shift_all(p.time_bin);
  };
  for (const Segment& s : runs)
    if (s.shift < 0) move_run(s);
  for (auto s = runs.rbegin(); s != runs.rend(); ++s)
    if (s->shift > 0) move_run(*s);
  // Arrival j: after the staying particles of smaller id and the j arrivals before it.
  l = 0;
  for (std::size_t j = 0; j < arriving.size(); ++j) {
    while (l < leaving.size() && leaving[l] < before[j]) ++l;
    const std::size_t at = before[j] - l + j;
    const ParticleRecord& r = arriving[j];
    p.pos[at] = r.pos;
    p.mom[at] = r.mom;
    p.id[at] = r.id;
    p.time_bin[at] = static_cast<std::uint8_t>(r.time_bin);
  }
  if (m < n) p.resize(m);
}

}  // namespace

std::uint64_t migrate_particles(Particles& particles, const OrbDomains& domains, const Comm& comm) {
  const std::size_t n = particles.size();
  if (domains.ranks() != comm.size())
    fail("internal: {} domains for {} ranks", domains.ranks(), comm.size());
  if (!particles.time_bin.empty() && particles.time_bin.size() != n)
    fail("internal: {} time bins for {} particles", particles.time_bin.size(), n);
  if (n > UINT32_MAX) fail("internal: {} particles on one rank (at most 2^32 - 1)", n);
  if (particles.time_bin.empty()) particles.time_bin.assign(n, 0);
  // The order by id first (a no-op but for the first migration of a run: afterwards every
  // rank's particles stay sorted), then only the particles that leave travel: the others
  // keep their order, and the arrivals are merged in by id.
  if (!strictly_ascending(particles.id)) sort_by_id(particles);
  const int me = comm.rank();
  const std::vector<std::uint32_t> leaving =
      indices_where(n, [&](std::size_t i) { return domains.owner(particles.pos[i]) != me; });
  std::vector<int> dest(leaving.size());
  std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()), 0);
  for (std::size_t k = 0; k < leaving.size(); ++k)
    ++counts[static_cast<std::size_t>(dest[k] = domains.owner(particles.pos[leaving[k]]))];
  std::vector<std::size_t> offset(counts.size(), 0);
  std::exclusive_scan(counts.begin(), counts.end(), offset.begin(), std::size_t{0});
  std::vector<ParticleRecord> send(leaving.size());
  for (std::size_t k = 0; k < leaving.size(); ++k) {
    const std::uint32_t i = leaving[k];
    send[offset[static_cast<std::size_t>(dest[k])]++] =
        ParticleRecord{particles.pos[i], particles.mom[i], particles.id[i], particles.time_bin[i]};
  }
  std::vector<ParticleRecord> arriving = comm.alltoallv(send, counts);
  std::sort(arriving.begin(), arriving.end(), [](const ParticleRecord& a, const ParticleRecord& b) { return a.id < b.id; });
  remove_and_insert(particles, leaving, arriving);
  return leaving.size();
}

std::vector<Vec3d> import_ghosts(const std::vector<Vec3d>& pos, const Vec3d& centre, double r_cut, double box,
                                 const Comm& comm, GhostRoutes* routes) {
  if (routes) *routes = GhostRoutes{{}, std::vector<std::size_t>(static_cast<std::size_t>(comm.size()), 0)};
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
  if (routes) {
    routes->sent = std::move(sent);
    routes->counts = counts;
  }
  return comm.alltoallv(send, counts);
}

void refresh_ghosts(const std::vector<Vec3d>& pos, const GhostRoutes& routes, const Comm& comm,
                    std::vector<Vec3d>& out, std::size_t at) {
  std::vector<Vec3d> send(routes.sent.size());
  const std::ptrdiff_t n_sent = static_cast<std::ptrdiff_t>(send.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t k = 0; k < n_sent; ++k)
    send[static_cast<std::size_t>(k)] = pos[routes.sent[static_cast<std::size_t>(k)]];
  comm.alltoallv_into(send, routes.counts, out, at);
}

}  // namespace orbis
