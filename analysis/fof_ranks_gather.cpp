// FoF across ranks, the third step (fof_ranks.hpp): the group labels merged through the
// ghosts, the groups' lengths over all ranks and the members of the kept groups gathered to
// root in the canonical order. Nothing here passes over all particles more than a few times
// in O(1) each, and only the members of kept groups and the labels of components linked
// across ranks travel:
//   merge: only ghosts linked to own particles here report to their owners (a link between
//     two other ranks' particles is seen by both owners), each round only the labels that
//     changed since they last went;
//   lengths: a component with no ghost is a whole group (its length its own count); only
//     the linked components' counts meet on a home rank per label;
//   gather: each rank puts its members of the kept groups in the canonical order itself
//     (threads over groups) and root merges the ranks' shares, group by group.
#include <algorithm>
#include <limits>
#include <numeric>

#include "analysis/fof_ranks.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/timer.hpp"

namespace orbis::fof {
namespace {

struct LabelCount {
  std::uint64_t label, count;
};
// A group's members on one rank as they travel to root: the group's key (length over all
// ranks, label) and how many of its members follow, group after group.
struct GroupHeader {
  std::uint64_t label, length, count;
};
struct MemberRecord {
  Vec3d pos, mom;
  std::uint64_t id;
};
// A ghost's component label for its owner: `index` into the owner's exports to this rank.
struct LabelUpdate {
  std::uint64_t label, index;
};

// The rank that adds up a label's members: labels are particle IDs, spread evenly.
std::size_t home_rank(std::uint64_t label, int ranks) { return static_cast<std::size_t>(label % static_cast<std::uint64_t>(ranks)); }

// Collective: the member count over all ranks of each label in `tally` (this rank's (label,
// members) pairs; a label may come more than once), in the order of `tally`. Each label's
// counts meet on its home rank, which answers with the sum.
std::vector<std::uint64_t> global_lengths(const std::vector<LabelCount>& tally, const Comm& comm) {
  const int ranks = comm.size();
  std::vector<std::size_t> counts(static_cast<std::size_t>(ranks), 0);
  for (const LabelCount& c : tally) ++counts[home_rank(c.label, ranks)];
  std::vector<std::size_t> next(counts.size(), 0);
  std::exclusive_scan(counts.begin(), counts.end(), next.begin(), std::size_t{0});
  std::vector<std::size_t> slot(tally.size());   // where tally[k] travels in `send`
  std::vector<LabelCount> send(tally.size());
  for (std::size_t k = 0; k < tally.size(); ++k) {
    slot[k] = next[home_rank(tally[k].label, ranks)]++;
    send[slot[k]] = tally[k];
  }
  std::vector<std::size_t> arrived;
  const std::vector<LabelCount> at_home = comm.alltoallv(send, counts, &arrived);
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
  const std::vector<LabelCount> back = comm.alltoallv(answer, arrived);   // in the order of `send`
  std::vector<std::uint64_t> totals(tally.size());
  for (std::size_t k = 0; k < tally.size(); ++k) totals[k] = back[slot[k]].count;
  return totals;
}

// This rank's members of the groups of >= min_members, ready to travel to root: the groups
// this rank holds members of in the canonical order (by length over all ranks, descending,
// then by label), each one's members here by ID. Collective (the lengths of the groups that
// reach other ranks). component: the local links (own particles, then ghosts); label: each
// component's final label (by its smallest index).
struct Share {
  std::vector<GroupHeader> headers;
  std::vector<MemberRecord> members;
};
Share kept_share(const Particles& local, const std::vector<std::uint32_t>& component,
                 const std::vector<std::uint64_t>& label, std::size_t ghosts, std::uint32_t min_members,
                 double box, const Comm& comm) {
  constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
  const std::size_t n = local.size();
  // Own particles per component. A component with own particles has its smallest index, its
  // root, among them (they come before the ghosts).
  std::vector<std::uint32_t> own(n, 0);
  for (std::size_t i = 0; i < n; ++i) ++own[component[i]];
  // A component linked to another rank's particles holds one of them as a ghost (a pair
  // within l is seen by both ends' ranks, see the header); any other is a whole group, its
  // length its own count. Only the linked ones' lengths are added up over the ranks.
  std::vector<char> linked(n, 0);
  for (std::size_t j = 0; j < ghosts; ++j) {
    const std::uint32_t c = component[n + j];
    if (c < n) linked[c] = 1;
  }
  struct Kept {
    std::uint64_t label, length;
    std::uint32_t root, own;
  };
  std::vector<Kept> kept;
  std::vector<std::uint32_t> shared;
  std::vector<LabelCount> tally;
  for (std::size_t c = 0; c < n; ++c) {
    if (component[c] != c) continue;
    const auto root = static_cast<std::uint32_t>(c);
    if (linked[c]) {
      shared.push_back(root);
      tally.push_back({label[c], own[c]});
    } else if (own[c] >= min_members) {
      kept.push_back({label[c], own[c], root, own[c]});
    }
  }
  const std::vector<std::uint64_t> totals = global_lengths(tally, comm);
  for (std::size_t k = 0; k < shared.size(); ++k)
    if (totals[k] >= min_members) kept.push_back({tally[k].label, totals[k], shared[k], own[shared[k]]});
  std::vector<char>().swap(linked);
  std::sort(kept.begin(), kept.end(), [](const Kept& a, const Kept& b) {
    if (a.length != b.length) return a.length > b.length;
    if (a.label != b.label) return a.label < b.label;
    return a.root < b.root;
  });
  // One header per label (components joined only through other ranks share one), and each
  // kept component's header (in `own`, no longer needed as counts).
  Share share;
  std::vector<std::uint32_t>& header_of = own;
  std::fill(header_of.begin(), header_of.end(), none);
  for (const Kept& k : kept) {
    if (share.headers.empty() || share.headers.back().label != k.label) share.headers.push_back({k.label, k.length, 0});
    header_of[k.root] = static_cast<std::uint32_t>(share.headers.size() - 1);
    share.headers.back().count += k.own;
  }
  const std::size_t groups = share.headers.size();
  std::vector<std::uint64_t> offset(groups + 1, 0);
  for (std::size_t g = 0; g < groups; ++g) offset[g + 1] = offset[g] + share.headers[g].count;
  std::vector<std::uint64_t> cursor(offset.begin(), offset.end() - 1);
  struct Member {
    std::uint64_t id;
    std::uint32_t index;
  };
  std::vector<Member> members(offset[groups]);   // (ID, index): sorted without looking IDs up
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t g = header_of[component[i]];
    if (g != none) members[cursor[g]++] = {local.id[i], static_cast<std::uint32_t>(i)};
  }
  share.members.resize(members.size());
#pragma omp parallel for schedule(dynamic, 16)
  for (std::size_t g = 0; g < groups; ++g) {
    std::sort(members.begin() + static_cast<std::ptrdiff_t>(offset[g]),
              members.begin() + static_cast<std::ptrdiff_t>(offset[g + 1]),
              [](const Member& a, const Member& b) { return a.id < b.id; });
    for (std::uint64_t k = offset[g]; k < offset[g + 1]; ++k) {
      const std::uint32_t i = members[k].index;
      const Vec3d& x = local.pos[i];   // as the linkers saw it: wrapped into the box
      share.members[k] = {{periodic_wrap_position(x.x, box), periodic_wrap_position(x.y, box),
                           periodic_wrap_position(x.z, box)},
                          local.mom[i],
                          local.id[i]};
    }
  }
  return share;
}

// On root: every rank's share (headers and members, concatenated in rank order; header_counts
// per rank) merged into the canonical order. Each rank's share is in that order already, so
// the groups are merged by key, and the members of a group held by several ranks by ID.
void assemble(const std::vector<GroupHeader>& headers, const std::vector<std::size_t>& header_counts,
              const std::vector<MemberRecord>& records, GatheredGroups& out) {
  const std::size_t ranks = header_counts.size();
  // Each rank's next header and next member.
  std::vector<std::size_t> head(ranks), head_end(ranks), member(ranks);
  std::size_t h = 0, m = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    head[r] = h;
    member[r] = m;
    for (head_end[r] = h + header_counts[r]; h < head_end[r]; ++h) m += headers[h].count;
  }
  if (h != headers.size() || m != records.size())
    fail("internal: fof_ranks_gather.cpp: {} group headers counting {} members arrived with {} headers and {} members", h, m,
         headers.size(), records.size());
  auto before = [](const GroupHeader& a, const GroupHeader& b) {
    return a.length != b.length ? a.length > b.length : a.label < b.label;
  };
  // The groups in order, each with its pieces (a rank's members of it: first record, count).
  struct Piece {
    std::size_t first, count;
  };
  std::vector<std::uint64_t> piece_offset{0};
  std::vector<Piece> pieces;
  std::vector<std::uint64_t> offset{0};
  for (;;) {
    const GroupHeader* best = nullptr;
    for (std::size_t r = 0; r < ranks; ++r)
      if (head[r] < head_end[r] && (!best || before(headers[head[r]], *best))) best = &headers[head[r]];
    if (!best) break;
    const GroupHeader key = *best;
    std::uint64_t members = 0;
    for (std::size_t r = 0; r < ranks; ++r) {
      if (head[r] == head_end[r] || headers[head[r]].label != key.label) continue;
      const GroupHeader& h = headers[head[r]++];
      if (h.length != key.length)
        fail("internal: fof_ranks_gather.cpp: group {} is {} long on one rank and {} on another", key.label, key.length,
             h.length);
      pieces.push_back({member[r], h.count});
      member[r] += h.count;
      members += h.count;
    }
    if (members != key.length)
      fail("internal: fof_ranks_gather.cpp: group {} of length {} arrived with {} members", key.label, key.length, members);
    piece_offset.push_back(pieces.size());
    out.groups.length.push_back(static_cast<std::uint32_t>(key.length));
    out.groups.offset.push_back(offset.back());
    offset.push_back(offset.back() + members);
  }
  const std::size_t groups = out.groups.length.size();
  out.members.resize(records.size());
  out.groups.members.resize(records.size());
#pragma omp parallel
  {
    std::vector<MemberRecord> merged;
#pragma omp for schedule(dynamic, 16)
    for (std::size_t g = 0; g < groups; ++g) {
      const MemberRecord* from = records.data() + pieces[piece_offset[g]].first;
      if (piece_offset[g + 1] - piece_offset[g] > 1) {   // held by several ranks: merged by ID
        merged.clear();
        for (std::uint64_t p = piece_offset[g]; p < piece_offset[g + 1]; ++p) {
          const auto middle = static_cast<std::ptrdiff_t>(merged.size());
          merged.insert(merged.end(), records.begin() + static_cast<std::ptrdiff_t>(pieces[p].first),
                        records.begin() + static_cast<std::ptrdiff_t>(pieces[p].first + pieces[p].count));
          std::inplace_merge(merged.begin(), merged.begin() + middle, merged.end(),
                             [](const MemberRecord& a, const MemberRecord& b) { return a.id < b.id; });
        }
        from = merged.data();
      }
      for (std::uint64_t k = offset[g]; k < offset[g + 1]; ++k) {
        const MemberRecord& m = from[k - offset[g]];
        out.members.pos[k] = m.pos;
        out.members.mom[k] = m.mom;
        out.members.id[k] = m.id;
        out.groups.members[k] = static_cast<std::uint32_t>(k);
      }
    }
  }
}

// Whether labels are a LocalLinker's answer for `count` particles.
bool well_formed(const std::vector<std::uint32_t>& label, std::size_t count) {
  if (label.size() != count) return false;
  bool ok = true;
#pragma omp parallel for reduction(&& : ok)
  for (std::size_t i = 0; i < count; ++i)
    if (label[i] > i || label[label[i]] != label[i]) ok = false;
  return ok;
}

// slot = min(slot, value), from any thread.
void atomic_min(std::uint64_t& slot, std::uint64_t value) {
  std::uint64_t seen = __atomic_load_n(&slot, __ATOMIC_RELAXED);
  while (value < seen && !__atomic_compare_exchange_n(&slot, &seen, value, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

// Collective: the merge rounds (fof_ranks.hpp): each ghost linked to own particles here sends
// its component's label to its owner, which keeps the smaller, until no label changes
// anywhere; each round sends only the labels that are smaller than what went before (at
// first, than the ghost's own ID: its owner's label is no larger). Returns the rounds.
// exported_to: how many of this rank's particles each rank holds as ghosts.
int merge_labels(const std::vector<std::uint32_t>& component, std::size_t n, const Ghosts& ghosts,
                 const std::vector<std::size_t>& from, const std::vector<std::size_t>& exported_to,
                 std::vector<std::uint64_t>& label, const Comm& comm) {
  const auto ranks = static_cast<std::size_t>(comm.size());
  struct Reporter {
    std::uint32_t ghost;        // index among the ghosts
    std::uint32_t source;       // its owner
    std::uint64_t index;        // in the owner's exports to this rank
    std::uint64_t sent;         // the smallest label sent so far
  };
  std::vector<Reporter> reporters;
  for (std::size_t s = 0, j = 0; s < ranks; ++s)
    for (std::size_t k = 0; k < from[s]; ++k, ++j)
      if (component[n + j] < n)
        reporters.push_back({static_cast<std::uint32_t>(j), static_cast<std::uint32_t>(s), k, ghosts.id[j]});
  std::vector<std::size_t> exported_from(ranks + 1, 0);   // where each rank's share of `exported` starts
  std::partial_sum(exported_to.begin(), exported_to.end(), exported_from.begin() + 1);
  int rounds = 0;
  std::vector<LabelUpdate> send;
  std::vector<std::size_t> counts(ranks), arrived;
  for (;;) {
    send.clear();
    std::fill(counts.begin(), counts.end(), 0);
    for (Reporter& r : reporters) {   // in ghost order: by owner
      const std::uint64_t l = label[component[n + r.ghost]];
      if (l >= r.sent) continue;
      r.sent = l;
      send.push_back({l, r.index});
      ++counts[r.source];
    }
    const std::vector<LabelUpdate> updates = comm.alltoallv(send, counts, &arrived);
    bool changed = false, in_range = true;
    for (std::size_t s = 0, k = 0; s < ranks; ++s)
      for (std::size_t e = k + arrived[s]; k < e; ++k) {
        const LabelUpdate& u = updates[k];
        if (u.index >= exported_to[s]) {
          in_range = false;
          continue;
        }
        std::uint64_t& mine = label[component[ghosts.exported[exported_from[s] + u.index]]];
        if (u.label < mine) mine = u.label, changed = true;
      }
    ++rounds;
    if (!comm.all(in_range)) fail("internal: fof_ranks_gather.cpp: a label update for a particle never exported");
    if (!comm.any(changed)) return rounds;
  }
}

}  // namespace

GatheredGroups gather_groups(const Particles& local, const LocalLinks& links, std::uint32_t min_members,
                             const Comm& comm, int root) {
  const std::size_t n = local.size();
  const Ghosts& ghosts = links.ghosts;
  const std::size_t count = n + ghosts.size();
  const double link = links.link_mpc_h;
  Stopwatch phase;
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
                     from.size() == static_cast<std::size_t>(comm.size()) &&
                     Comm::total(from) == ghosts.size() && count <= std::numeric_limits<std::uint32_t>::max();
  if (!comm.all(valid))
    fail("internal: fof_ranks_gather.cpp: the local links of a rank are malformed ({} labels for {} particles and {} "
         "ghosts here)", component.size(), n, ghosts.size());
  const std::vector<std::size_t> exported_to = comm.alltoall_counts(from, ghosts.size());
  if (!comm.all(Comm::total(exported_to) == ghosts.exported.size()))
    fail("internal: fof_ranks_gather.cpp: the ranks hold other ghosts than they were sent");

  // Each component's label (indexed by its smallest index): its members' smallest ID.
  std::vector<std::uint64_t> label(count, std::numeric_limits<std::uint64_t>::max());
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < count; ++i) atomic_min(label[component[i]], i < n ? local.id[i] : ghosts.id[i - n]);
  out.merge_rounds = merge_labels(component, n, ghosts, from, exported_to, label, comm);
  const double t_merge = phase.seconds();

  // The kept groups' members, each rank's in the canonical order, to root, which merges them.
  phase.restart();
  const Share share = kept_share(local, component, label, ghosts.size(), min_members, links.box_mpc_h, comm);
  const double t_share = phase.seconds();
  phase.restart();
  const std::vector<std::size_t> header_counts = comm.allgather(share.headers.size());
  const std::vector<GroupHeader> headers = comm.gatherv(share.headers, root);
  const std::vector<MemberRecord> records = comm.gatherv(share.members, root);
  const double t_gather = phase.seconds();
  out.members.mass = comm.max(local.mass);
  out.groups.link_mpc_h = link;
  if (comm.rank() != root) return out;
  phase.restart();
  assemble(headers, header_counts, records, out);
  const std::size_t grouped = out.members.size();
  log::info("fof: {} groups of >= {} particles hold {} of {} particles ({:.1f}%); linking length {:.5g} Mpc/h; "
            "largest group {} particles; {} ranks, {} label rounds",
            out.groups.size(), min_members, grouped, out.total_particles,
            100.0 * static_cast<double>(grouped) / static_cast<double>(std::max<std::uint64_t>(out.total_particles, 1)),
            link, out.groups.size() ? out.groups.length[0] : 0, comm.size(), out.merge_rounds);
  log::info("fof over ranks, on root: labels checked and merged {:.3f} s, kept members ordered {:.3f} s, gathered "
            "{:.3f} s, merged into the canonical order {:.3f} s", t_merge, t_share, t_gather, phase.seconds());
  return out;
}

}  // namespace orbis::fof
