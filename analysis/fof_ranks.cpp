#include "analysis/fof_ranks.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/periodic_extent.hpp"

namespace orbis::fof {
namespace {

struct GhostRecord {
  Vec3d pos;
  std::uint64_t id;
};
struct LabelCount {
  std::uint64_t label, count;
};
struct MemberRecord {
  Vec3d pos, mom;
  std::uint64_t id, label, length;
};

// The rank that adds up a label's members: labels are particle IDs, spread evenly.
std::size_t home_rank(std::uint64_t label, int ranks) { return static_cast<std::size_t>(label % static_cast<std::uint64_t>(ranks)); }

// Orders records by destination: returns the counts per rank and permutes `records` so that
// each rank's share is contiguous (stable within a rank).
template <typename T, typename Dest>
std::vector<std::size_t> by_destination(std::vector<T>& records, int ranks, Dest dest) {
  std::vector<std::size_t> counts(static_cast<std::size_t>(ranks), 0);
  for (const T& r : records) ++counts[dest(r)];
  std::vector<std::size_t> next(counts.size(), 0);
  std::exclusive_scan(counts.begin(), counts.end(), next.begin(), std::size_t{0});
  std::vector<T> sorted(records.size());
  for (const T& r : records) sorted[next[dest(r)]++] = r;
  records.swap(sorted);
  return counts;
}

// The global member count of each label this rank holds, as (label, count) sorted by label.
std::vector<LabelCount> global_lengths(const std::vector<std::uint64_t>& labels, const Comm& comm) {
  std::vector<std::uint64_t> sorted(labels);
  std::sort(sorted.begin(), sorted.end());
  std::vector<LabelCount> tally;
  for (std::uint64_t l : sorted) {
    if (!tally.empty() && tally.back().label == l) ++tally.back().count;
    else tally.push_back({l, 1});
  }
  const std::vector<std::size_t> counts =
      by_destination(tally, comm.size(), [&](const LabelCount& c) { return home_rank(c.label, comm.size()); });
  std::vector<std::size_t> arrived;
  std::vector<LabelCount> at_home = comm.alltoallv(tally, counts, &arrived);
  // Sum per label at home, then answer each record with its label's total, in arrival order.
  std::vector<std::size_t> order(at_home.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return at_home[a].label < at_home[b].label; });
  std::vector<LabelCount> answer(at_home.size());
  for (std::size_t k = 0; k < order.size();) {
    std::size_t e = k;
    std::uint64_t total = 0;
    while (e < order.size() && at_home[order[e]].label == at_home[order[k]].label) total += at_home[order[e++]].count;
    for (; k < e; ++k) answer[order[k]] = {at_home[order[k]].label, total};
  }
  std::vector<LabelCount> totals = comm.alltoallv(answer, arrived);   // in the order of `tally`
  std::sort(totals.begin(), totals.end(), [](const LabelCount& a, const LabelCount& b) { return a.label < b.label; });
  return totals;
}

}  // namespace

GatheredGroups find_groups_across_ranks(const Particles& local, double box, double link, std::uint32_t min_members,
                                        const Comm& comm, int root) {
  const std::size_t n = local.size();
  GatheredGroups out;
  out.total_particles = comm.sum<std::uint64_t>(n);

  // Ghosts: this rank's particles within one linking length of another rank's extent go there.
  const std::vector<PeriodicExtent> extents = comm.allgather(PeriodicExtent::of(local.pos, box));
  const double l2 = link * link;
  std::vector<std::uint32_t> exported;   // local index of each particle sent, by destination rank
  std::vector<GhostRecord> send;
  std::vector<std::size_t> send_counts(static_cast<std::size_t>(comm.size()), 0);
  for (int r = 0; r < comm.size(); ++r) {
    const PeriodicExtent& e = extents[static_cast<std::size_t>(r)];
    if (r == comm.rank() || e.empty) continue;
    for (std::size_t i = 0; i < n; ++i)
      if (e.distance2(local.pos[i], box) <= l2) {
        exported.push_back(static_cast<std::uint32_t>(i));
        send.push_back({local.pos[i], local.id[i]});
        ++send_counts[static_cast<std::size_t>(r)];
      }
  }
  std::vector<std::size_t> recv_counts;
  const std::vector<GhostRecord> ghosts = comm.alltoallv(send, send_counts, &recv_counts);
  out.ghosts = ghosts.size();

  // Link own particles and ghosts together.
  std::vector<Vec3d> pos(local.pos);
  std::vector<std::uint64_t> ids(local.id);
  pos.reserve(n + ghosts.size());
  ids.reserve(n + ghosts.size());
  for (const GhostRecord& g : ghosts) pos.push_back(g.pos), ids.push_back(g.id);
  const CellGrid grid(pos, box, link);
  DisjointSets sets(grid.size());
  link_particles(grid, pos, sets);
  sets.flatten();
  std::vector<std::uint32_t> slot_of(pos.size());
  for (std::size_t s = 0; s < grid.size(); ++s) slot_of[grid.order()[s]] = static_cast<std::uint32_t>(s);
  auto root_of = [&](std::size_t i) { return sets.root(slot_of[i]); };
  std::vector<std::uint64_t> label(pos.size(), std::numeric_limits<std::uint64_t>::max());   // by root slot
  for (std::size_t i = 0; i < pos.size(); ++i) label[root_of(i)] = std::min(label[root_of(i)], ids[i]);

  // Merge rounds (see the header): each ghost's label to its owner.
  for (;;) {
    bool changed = false;
    auto lower = [&](std::size_t i, std::uint64_t l) {
      std::uint64_t& mine = label[root_of(i)];
      if (l < mine) mine = l, changed = true;
    };
    std::vector<std::uint64_t> back(ghosts.size());
    for (std::size_t j = 0; j < ghosts.size(); ++j) back[j] = label[root_of(n + j)];
    const std::vector<std::uint64_t> replies = comm.alltoallv(back, recv_counts);   // in `exported` order
    for (std::size_t k = 0; k < exported.size(); ++k) lower(exported[k], replies[k]);
    ++out.merge_rounds;
    if (!comm.any(changed)) break;
  }

  // Group lengths over all ranks; the members of the kept groups travel to root.
  std::vector<std::uint64_t> own(n);
  for (std::size_t i = 0; i < n; ++i) own[i] = label[root_of(i)];
  const std::vector<LabelCount> totals = global_lengths(own, comm);
  std::vector<MemberRecord> kept;
  for (std::size_t i = 0; i < n; ++i) {
    const auto it = std::lower_bound(totals.begin(), totals.end(), own[i],
                                     [](const LabelCount& c, std::uint64_t l) { return c.label < l; });
    if (it == totals.end() || it->label != own[i]) fail("internal: fof_ranks.cpp: label {} has no total", own[i]);
    if (it->count >= min_members) kept.push_back({local.pos[i], local.mom[i], local.id[i], own[i], it->count});
  }
  std::vector<MemberRecord> all = comm.gatherv(kept, root);
  out.members.mass = comm.max(local.mass);
  out.groups.link_mpc_h = link;
  if (comm.rank() != root) return out;

  // Canonical order: longest group first, then by smallest member ID (the label); members by ID.
  std::sort(all.begin(), all.end(), [](const MemberRecord& a, const MemberRecord& b) {
    if (a.length != b.length) return a.length > b.length;
    if (a.label != b.label) return a.label < b.label;
    return a.id < b.id;
  });
  out.members.resize(all.size());
  out.groups.members.resize(all.size());
  for (std::size_t k = 0; k < all.size(); ++k) {
    out.members.pos[k] = all[k].pos;
    out.members.mom[k] = all[k].mom;
    out.members.id[k] = all[k].id;
    out.groups.members[k] = static_cast<std::uint32_t>(k);
    if (k == 0 || all[k].label != all[k - 1].label) {
      out.groups.offset.push_back(k);
      out.groups.length.push_back(static_cast<std::uint32_t>(all[k].length));
    }
  }
  log::info("fof: {} groups of >= {} particles hold {} of {} particles ({:.1f}%); linking length {:.5g} Mpc/h; "
            "largest group {} particles; {} ranks, {} label rounds",
            out.groups.size(), min_members, all.size(), out.total_particles,
            100.0 * static_cast<double>(all.size()) / static_cast<double>(std::max<std::uint64_t>(out.total_particles, 1)),
            link, out.groups.size() ? out.groups.length[0] : 0, comm.size(), out.merge_rounds);
  return out;
}

}  // namespace orbis::fof
