// FoF across ranks, the third step (fof_ranks.hpp): merge_groups (the group labels merged
// through the ghosts, the groups' lengths over all ranks, each rank's share of the kept
// groups in the canonical order) and gather_groups (the shares' members to root, in that
// order). Nothing here passes over all particles more than a few times in O(1) each, and
// only the members of kept groups and the labels of components linked across ranks travel:
//   merge: only ghosts linked to own particles here report to their owners (a link between
//     two other ranks' particles is seen by both owners), each round only the labels that
//     changed since they last went;
//   lengths: a component with no ghost is a whole group (its length its own count); only
//     the linked components' counts meet on a home rank per label;
//   shares: each rank puts its members of the kept groups in the canonical order itself
//     (threads over groups); root merges the ranks' shares group by group (canonical_order),
//     the members of a group on several ranks by ID.
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
// A ghost's component label for its owner: `index` into the owner's exports to this rank.
struct LabelUpdate {
  std::uint64_t label, index;
};

// The rank that adds up a label's members: labels are particle IDs, spread evenly.
std::size_t home_rank(std::uint64_t label, int ranks) {
  return static_cast<std::size_t>(label % static_cast<std::uint64_t>(ranks));
}

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
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return at_home[a].label < at_home[b].label; });
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

// This rank's share of the groups of >= min_members (RankGroups' groups and members).
// Collective (the lengths of the groups that reach other ranks). component: the local links
// (own particles, then ghosts); label: each component's final label (by its smallest index).
void share_of(const Particles& local, const std::vector<std::uint32_t>& component,
              const std::vector<std::uint64_t>& label, std::size_t ghosts, std::uint32_t min_members,
              const Comm& comm, RankGroups& out) {
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
  // One share per label (components joined only through other ranks have one), and each
  // kept component's share (in `own`, no longer needed as counts).
  std::vector<std::uint32_t>& share_of_root = own;
  std::fill(share_of_root.begin(), share_of_root.end(), none);
  for (const Kept& k : kept) {
    if (out.groups.empty() || out.groups.back().label != k.label) out.groups.push_back({k.label, k.length, 0});
    share_of_root[k.root] = static_cast<std::uint32_t>(out.groups.size() - 1);
    out.groups.back().count += k.own;
  }
  const std::size_t groups = out.groups.size();
  std::vector<std::uint64_t> offset(groups + 1, 0);
  for (std::size_t g = 0; g < groups; ++g) offset[g + 1] = offset[g] + out.groups[g].count;
  std::vector<std::uint64_t> cursor(offset.begin(), offset.end() - 1);
  struct Member {
    std::uint64_t id;
    std::uint32_t index;
  };
  std::vector<Member> members(offset[groups]);   // (ID, index): sorted without looking IDs up
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t g = share_of_root[component[i]];
    if (g != none) members[cursor[g]++] = {local.id[i], static_cast<std::uint32_t>(i)};
  }
  out.members.resize(members.size());
#pragma omp parallel for schedule(dynamic, 16)
  for (std::size_t g = 0; g < groups; ++g) {
    std::sort(members.begin() + static_cast<std::ptrdiff_t>(offset[g]),
              members.begin() + static_cast<std::ptrdiff_t>(offset[g + 1]),
              [](const Member& a, const Member& b) { return a.id < b.id; });
    for (std::uint64_t k = offset[g]; k < offset[g + 1]; ++k) out.members[k] = members[k].index;
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

RankGroups merge_groups(const Particles& local, const LocalLinks& links, std::uint32_t min_members, const Comm& comm) {
  const std::size_t n = local.size();
  const Ghosts& ghosts = links.ghosts;
  const std::size_t count = n + ghosts.size();
  Stopwatch phase;
  RankGroups out;
  out.total_particles = comm.sum<std::uint64_t>(n);
  out.ghosts = ghosts.size();
  std::vector<std::uint32_t> host_label;
  if (links.label.empty() && count > 0)
    host_label = link_on_host(local.pos, ghosts.pos, links.box_mpc_h, links.link_mpc_h);
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
  out.merge_seconds = phase.seconds();
  phase.restart();
  share_of(local, component, label, ghosts.size(), min_members, comm, out);
  out.share_seconds = phase.seconds();
  return out;
}

SharedOrder canonical_order(const std::vector<GroupShare>& shares, const std::vector<std::size_t>& per_rank) {
  const std::size_t ranks = per_rank.size();
  // Each rank's shares are in the canonical order: merge them by key, group by group.
  std::vector<std::size_t> head(ranks), end(ranks);
  std::size_t next = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    head[r] = next;
    next += per_rank[r];
    end[r] = next;
  }
  if (next != shares.size())
    fail("internal: fof_ranks_gather.cpp: {} group shares arrived, the ranks sent {}", shares.size(), next);
  auto before = [](const GroupShare& a, const GroupShare& b) {
    return a.length != b.length ? a.length > b.length : a.label < b.label;
  };
  SharedOrder order;
  for (;;) {
    const GroupShare* best = nullptr;
    for (std::size_t r = 0; r < ranks; ++r)
      if (head[r] < end[r] && (!best || before(shares[head[r]], *best))) best = &shares[head[r]];
    if (!best) return order;
    const GroupShare key = *best;
    std::uint64_t members = 0;
    for (std::size_t r = 0; r < ranks; ++r) {
      if (head[r] == end[r] || shares[head[r]].label != key.label) continue;
      if (shares[head[r]].length != key.length)
        fail("internal: fof_ranks_gather.cpp: group {} is {} long on one rank and {} on another", key.label,
             key.length, shares[head[r]].length);
      members += shares[head[r]].count;
      order.piece.push_back(head[r]++);
    }
    if (members != key.length)
      fail("internal: fof_ranks_gather.cpp: group {} of length {} has {} members on the ranks", key.label, key.length,
           members);
    order.length.push_back(key.length);
    order.piece_begin.push_back(order.piece.size());
  }
}

std::vector<std::size_t> merge_pieces_by_id(const std::vector<std::uint64_t>& id, const std::vector<std::size_t>& first,
                                            const std::vector<std::size_t>& count) {
  std::vector<std::size_t> merged;
  for (std::size_t p = 0; p < first.size(); ++p) {
    const auto middle = static_cast<std::ptrdiff_t>(merged.size());
    for (std::size_t k = first[p]; k < first[p] + count[p]; ++k) merged.push_back(k);
    std::inplace_merge(merged.begin(), merged.begin() + middle, merged.end(),
                       [&](std::size_t a, std::size_t b) { return id[a] < id[b]; });
  }
  return merged;
}

GatheredGroups gather_groups(const Particles& local, const LocalLinks& links, std::uint32_t min_members,
                             const Comm& comm, int root) {
  const RankGroups share = merge_groups(local, links, min_members, comm);
  Stopwatch phase;
  const double box = links.box_mpc_h;
  Particles mine;
  mine.pos.resize(share.members.size());
  mine.mom.resize(share.members.size());
  mine.id.resize(share.members.size());
#pragma omp parallel for schedule(static)
  for (std::size_t k = 0; k < share.members.size(); ++k) {
    const std::uint32_t i = share.members[k];
    mine.pos[k] = linked_position(local.pos[i], box);
    mine.mom[k] = local.mom[i];
    mine.id[k] = local.id[i];
  }
  const std::vector<std::size_t> per_rank = comm.allgather(share.groups.size());
  const std::vector<GroupShare> shares = comm.gatherv(share.groups, root);
  const std::vector<Vec3d> pos = comm.gatherv(mine.pos, root);
  const std::vector<Vec3d> mom = comm.gatherv(mine.mom, root);
  const std::vector<std::uint64_t> id = comm.gatherv(mine.id, root);
  const double t_gather = phase.seconds();
  GatheredGroups out;
  out.total_particles = share.total_particles;
  out.merge_rounds = share.merge_rounds;
  out.ghosts = share.ghosts;
  out.members.mass = comm.max(local.mass);
  out.groups.link_mpc_h = links.link_mpc_h;
  if (comm.rank() != root) return out;

  // Root: the groups in the canonical order, the members of each from the shares' pieces.
  phase.restart();
  const SharedOrder order = canonical_order(shares, per_rank);
  std::vector<std::size_t> share_first(shares.size() + 1, 0);   // each share's first member in pos/mom/id
  for (std::size_t k = 0; k < shares.size(); ++k) share_first[k + 1] = share_first[k] + shares[k].count;
  const std::size_t groups = order.size();
  out.groups.length.resize(groups);
  out.groups.offset.resize(groups);
  for (std::size_t g = 0, next = 0; g < groups; next += order.length[g++]) {
    out.groups.length[g] = static_cast<std::uint32_t>(order.length[g]);
    out.groups.offset[g] = next;
  }
  out.members.resize(id.size());
  out.groups.members.resize(id.size());
#pragma omp parallel for schedule(dynamic, 16)
  for (std::size_t g = 0; g < groups; ++g) {
    const std::size_t p0 = order.piece_begin[g], p1 = order.piece_begin[g + 1];
    std::vector<std::size_t> merged;
    if (p1 - p0 > 1) {   // held by several ranks: their members merged by ID
      std::vector<std::size_t> first, count;
      for (std::size_t p = p0; p < p1; ++p) {
        first.push_back(share_first[order.piece[p]]);
        count.push_back(shares[order.piece[p]].count);
      }
      merged = merge_pieces_by_id(id, first, count);
    }
    const std::size_t from = share_first[order.piece[p0]];
    for (std::uint64_t k = 0; k < order.length[g]; ++k) {
      const std::size_t src = merged.empty() ? from + k : merged[k];
      const std::uint64_t dst = out.groups.offset[g] + k;
      out.members.pos[dst] = pos[src];
      out.members.mom[dst] = mom[src];
      out.members.id[dst] = id[src];
      out.groups.members[dst] = static_cast<std::uint32_t>(dst);
    }
  }
  const std::size_t grouped = out.members.size();
  log::info("fof: {} groups of >= {} particles hold {} of {} particles ({:.1f}%); linking length {:.5g} Mpc/h; "
            "largest group {} particles; {} ranks, {} label rounds",
            out.groups.size(), min_members, grouped, out.total_particles,
            100.0 * static_cast<double>(grouped) / static_cast<double>(std::max<std::uint64_t>(out.total_particles, 1)),
            links.link_mpc_h, out.groups.size() ? out.groups.length[0] : 0, comm.size(), out.merge_rounds);
  log::info("fof over ranks, on root: labels checked and merged {:.3f} s, kept members ordered {:.3f} s, gathered "
            "{:.3f} s, put in the canonical order {:.3f} s", share.merge_seconds, share.share_seconds, t_gather,
            phase.seconds());
  return out;
}

}  // namespace orbis::fof
