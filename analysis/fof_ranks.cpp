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

// `pos` itself when every position lies in [0, box), else a copy wrapped into it (in `storage`).
const std::vector<Vec3d>& inside_box(const std::vector<Vec3d>& pos, double box, std::vector<Vec3d>& storage) {
  const bool inside = std::all_of(pos.begin(), pos.end(), [box](const Vec3d& x) {
    return x.x >= 0 && x.x < box && x.y >= 0 && x.y < box && x.z >= 0 && x.z < box;
  });
  if (inside) return pos;
  storage.resize(pos.size());
  for (std::size_t i = 0; i < pos.size(); ++i)
    for (int d = 0; d < 3; ++d) storage[i][d] = periodic_wrap_position(pos[i][d], box);
  return storage;
}

// Whether labels are a LocalLinker's answer for `count` particles.
bool well_formed(const std::vector<std::uint32_t>& label, std::size_t count) {
  if (label.size() != count) return false;
  for (std::size_t i = 0; i < count; ++i)
    if (label[i] > i || label[label[i]] != label[i]) return false;
  return true;
}

}  // namespace

Ghosts import_ghosts(const Particles& local, double box, double link, const Comm& comm) {
  std::vector<Vec3d> storage;
  const std::vector<Vec3d>& pos = inside_box(local.pos, box, storage);
  const std::size_t n = pos.size();
  // This rank's particles within one linking length of another rank's extent go there.
  const std::vector<PeriodicExtent> extents = comm.allgather(PeriodicExtent::of(pos, box));
  const double l2 = link * link;
  Ghosts g;
  std::vector<GhostRecord> send;
  std::vector<std::size_t> send_counts(static_cast<std::size_t>(comm.size()), 0);
  for (int r = 0; r < comm.size(); ++r) {
    const PeriodicExtent& e = extents[static_cast<std::size_t>(r)];
    if (r == comm.rank() || e.empty) continue;
    for (std::size_t i = 0; i < n; ++i)
      if (e.distance2(pos[i], box) <= l2) {
        g.exported.push_back(static_cast<std::uint32_t>(i));
        send.push_back({pos[i], local.id[i]});
        ++send_counts[static_cast<std::size_t>(r)];
      }
  }
  const std::vector<GhostRecord> ghosts = comm.alltoallv(send, send_counts, &g.from);
  g.pos.reserve(ghosts.size());
  g.id.reserve(ghosts.size());
  for (const GhostRecord& r : ghosts) g.pos.push_back(r.pos), g.id.push_back(r.id);
  return g;
}

std::vector<std::uint32_t> link_on_host(const std::vector<Vec3d>& own, const std::vector<Vec3d>& ghosts, double box,
                                        double link) {
  std::vector<Vec3d> storage;
  std::vector<Vec3d> pos(inside_box(own, box, storage));
  pos.insert(pos.end(), ghosts.begin(), ghosts.end());
  if (pos.empty()) return {};
  const CellGrid grid(pos, box, link);
  DisjointSets sets(grid.size());
  link_particles(grid, pos, sets);
  sets.flatten();
  // Each root slot's smallest particle index, then each particle's.
  const std::vector<std::uint32_t>& order = grid.order();
  std::vector<std::uint32_t> smallest(pos.size(), std::numeric_limits<std::uint32_t>::max());
  for (std::size_t s = 0; s < order.size(); ++s) {
    std::uint32_t& m = smallest[sets.root(static_cast<std::uint32_t>(s))];
    m = std::min(m, order[s]);
  }
  std::vector<std::uint32_t> label(pos.size());
  for (std::size_t s = 0; s < order.size(); ++s) label[order[s]] = smallest[sets.root(static_cast<std::uint32_t>(s))];
  return label;
}

LocalLinks link_locally(const Particles& local, double box, double link, const Comm& comm, const LocalLinker& linker) {
  LocalLinks links;
  links.box_mpc_h = box;
  links.link_mpc_h = link;
  links.ghosts = import_ghosts(local, box, link, comm);
  links.label = linker(local.pos, links.ghosts.pos, box, link);
  return links;
}

GatheredGroups gather_groups(const Particles& local, const LocalLinks& links, std::uint32_t min_members,
                             const Comm& comm, int root) {
  const std::size_t n = local.size();
  const Ghosts& ghosts = links.ghosts;
  const std::size_t count = n + ghosts.size();
  const double link = links.link_mpc_h;
  GatheredGroups out;
  out.total_particles = comm.sum<std::uint64_t>(n);
  out.ghosts = ghosts.size();
  std::vector<std::uint32_t> host_label;
  if (links.label.empty() && count > 0) host_label = link_on_host(local.pos, ghosts.pos, links.box_mpc_h, link);
  const std::vector<std::uint32_t>& component = host_label.empty() ? links.label : host_label;
  // No ghosts at all (one rank's links): none from anywhere.
  const std::vector<std::size_t> from =
      ghosts.from.empty() && ghosts.size() == 0 ? std::vector<std::size_t>(static_cast<std::size_t>(comm.size()), 0)
                                                : ghosts.from;
  // Checked on every rank at once: a rank that failed alone would leave the others waiting.
  const bool valid = well_formed(component, count) && ghosts.id.size() == ghosts.size() &&
                     from.size() == static_cast<std::size_t>(comm.size());
  if (!comm.all(valid))
    fail("internal: fof_ranks.cpp: the local links of a rank are malformed ({} labels for {} particles and {} "
         "ghosts here)", component.size(), n, ghosts.size());

  // Each component's label (indexed by its smallest index): its members' smallest ID.
  std::vector<std::uint64_t> label(count, std::numeric_limits<std::uint64_t>::max());
  for (std::size_t i = 0; i < count; ++i) {
    std::uint64_t& l = label[component[i]];
    l = std::min(l, i < n ? local.id[i] : ghosts.id[i - n]);
  }

  // Merge rounds (see the header): each ghost's label to its owner.
  for (;;) {
    bool changed = false;
    std::vector<std::uint64_t> back(ghosts.size());
    for (std::size_t j = 0; j < ghosts.size(); ++j) back[j] = label[component[n + j]];
    const std::vector<std::uint64_t> replies = comm.alltoallv(back, from);   // in `exported` order
    if (replies.size() != ghosts.exported.size())
      fail("internal: fof_ranks.cpp: {} labels came back for {} ghosts sent", replies.size(), ghosts.exported.size());
    for (std::size_t k = 0; k < replies.size(); ++k) {
      std::uint64_t& mine = label[component[ghosts.exported[k]]];
      if (replies[k] < mine) mine = replies[k], changed = true;
    }
    ++out.merge_rounds;
    if (!comm.any(changed)) break;
  }

  // Group lengths over all ranks; the members of the kept groups travel to root.
  std::vector<std::uint64_t> own(n);
  for (std::size_t i = 0; i < n; ++i) own[i] = label[component[i]];
  const std::vector<LabelCount> totals = global_lengths(own, comm);
  std::vector<MemberRecord> kept;
  for (std::size_t i = 0; i < n; ++i) {
    const auto it = std::lower_bound(totals.begin(), totals.end(), own[i],
                                     [](const LabelCount& c, std::uint64_t l) { return c.label < l; });
    if (it == totals.end() || it->label != own[i]) fail("internal: fof_ranks.cpp: label {} has no total", own[i]);
    if (it->count < min_members) continue;
    const Vec3d& x = local.pos[i];   // as the linkers saw it: wrapped into the box
    const Vec3d wrapped{periodic_wrap_position(x.x, links.box_mpc_h), periodic_wrap_position(x.y, links.box_mpc_h),
                        periodic_wrap_position(x.z, links.box_mpc_h)};
    kept.push_back({wrapped, local.mom[i], local.id[i], own[i], it->count});
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

GatheredGroups find_groups_across_ranks(const Particles& local, double box, double link, std::uint32_t min_members,
                                        const Comm& comm, int root, const LocalLinker& linker) {
  return gather_groups(local, link_locally(local, box, link, comm, linker), min_members, comm, root);
}

}  // namespace orbis::fof
