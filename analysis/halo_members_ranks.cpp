#include "analysis/halo_members_ranks.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"

namespace orbis::halo {
namespace {

struct MemberRecord {
  Vec3d pos, mom;
  std::uint64_t id;
};
// A group computed by a rank, as root receives it: its members' IDs follow, group after group.
struct GroupKey {
  std::uint64_t label, length;
};
// The canonical order of groups (fof.hpp): longest first, then by smallest member ID.
bool before(const GroupKey& a, const GroupKey& b) {
  return a.length != b.length ? a.length > b.length : a.label < b.label;
}

}  // namespace

MemberHaloes member_haloes_across_ranks(const Particles& local, const fof::RankGroups& share, double box, double a,
                                        double softening, double link, const Comm& comm) {
  const auto ranks = static_cast<std::size_t>(comm.size());
  const auto me = static_cast<std::size_t>(comm.rank());
  // This rank's shares: the groups on it alone, and the others (`split`).
  std::vector<std::uint64_t> first(share.groups.size() + 1, 0);   // each share's members in share.members
  std::uint64_t alone_members = 0;
  std::vector<std::size_t> split;
  for (std::size_t g = 0; g < share.groups.size(); ++g) {
    const fof::GroupShare& s = share.groups[g];
    first[g + 1] = first[g] + s.count;
    if (s.count == s.length) alone_members += s.count;
    else split.push_back(g);
  }
  std::vector<fof::GroupShare> my_split;
  for (std::size_t g : split) my_split.push_back(share.groups[g]);
  const std::vector<std::size_t> split_per_rank = comm.allgather(my_split.size());
  const std::vector<fof::GroupShare> all_split = comm.allgatherv(my_split);
  const std::vector<std::uint64_t> alone_work = comm.allgather(alone_members);

  // The groups on several ranks, largest first, each to the rank with the least work so far.
  // Every rank makes the same choice from the same numbers.
  std::vector<GroupKey> keys;
  for (const fof::GroupShare& s : all_split) keys.push_back({s.label, s.length});
  std::sort(keys.begin(), keys.end(), before);
  keys.erase(std::unique(keys.begin(), keys.end(),
                         [](const GroupKey& x, const GroupKey& y) { return x.label == y.label; }),
             keys.end());
  std::vector<std::uint64_t> work(alone_work);
  std::vector<std::size_t> owner(keys.size());
  for (std::size_t k = 0; k < keys.size(); ++k) {
    owner[k] = static_cast<std::size_t>(std::min_element(work.begin(), work.end()) - work.begin());
    work[owner[k]] += keys[k].length;
  }
  auto key_index = [&](const fof::GroupShare& s) {
    const GroupKey key{s.label, s.length};
    return static_cast<std::size_t>(std::lower_bound(keys.begin(), keys.end(), key, before) - keys.begin());
  };

  // Their members to their owners: by destination, each destination's in this rank's order.
  std::vector<std::size_t> counts(ranks, 0);
  std::vector<std::size_t> destination(split.size());
  for (std::size_t k = 0; k < split.size(); ++k) {
    destination[k] = owner[key_index(my_split[k])];
    counts[destination[k]] += my_split[k].count;
  }
  std::vector<std::size_t> next(ranks + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), next.begin() + 1);
  std::vector<MemberRecord> send(next[ranks]);
  for (std::size_t k = 0; k < split.size(); ++k)
    for (std::uint64_t m = first[split[k]]; m < first[split[k] + 1]; ++m) {
      const std::uint32_t i = share.members[m];
      send[next[destination[k]]++] = {fof::linked_position(local.pos[i], box), local.mom[i], local.id[i]};
    }
  const std::vector<MemberRecord> arrived = comm.alltoallv(send, counts);

  // This rank's groups: those on it alone, then the groups it owns, members by ID.
  Particles mine;
  mine.mass = comm.max(local.mass);
  fof::FofGroups groups;
  groups.link_mpc_h = link;
  std::vector<GroupKey> computed;
  const std::size_t members_here = alone_members + arrived.size();
  mine.pos.reserve(members_here);
  mine.mom.reserve(members_here);
  mine.id.reserve(members_here);
  auto open_group = [&](std::uint64_t label, std::uint64_t length) {
    groups.offset.push_back(mine.id.size());
    groups.length.push_back(static_cast<std::uint32_t>(length));
    computed.push_back({label, length});
  };
  for (std::size_t g = 0; g < share.groups.size(); ++g) {
    const fof::GroupShare& s = share.groups[g];
    if (s.count != s.length) continue;
    open_group(s.label, s.length);
    for (std::uint64_t m = first[g]; m < first[g + 1]; ++m) {
      const std::uint32_t i = share.members[m];
      mine.pos.push_back(fof::linked_position(local.pos[i], box));
      mine.mom.push_back(local.mom[i]);
      mine.id.push_back(local.id[i]);
    }
  }
  // The pieces that arrived, by source rank, each source's in its order: per owned group.
  std::vector<std::vector<std::size_t>> piece_first(keys.size()), piece_count(keys.size());
  for (std::size_t s = 0, k = 0, at = 0; s < ranks; ++s)
    for (std::size_t e = k + split_per_rank[s]; k < e; ++k) {
      const std::size_t key = key_index(all_split[k]);
      if (owner[key] != me) continue;
      piece_first[key].push_back(at);
      piece_count[key].push_back(all_split[k].count);
      at += all_split[k].count;
    }
  std::vector<std::uint64_t> arrived_id(arrived.size());
  for (std::size_t k = 0; k < arrived.size(); ++k) arrived_id[k] = arrived[k].id;
  bool complete = true;
  std::size_t owned = 0;
  for (std::size_t key = 0; key < keys.size(); ++key) {
    if (owner[key] != me) continue;
    ++owned;
    const std::vector<std::size_t> merged = fof::merge_pieces_by_id(arrived_id, piece_first[key], piece_count[key]);
    complete = complete && merged.size() == keys[key].length;
    open_group(keys[key].label, keys[key].length);
    for (std::size_t m : merged) {
      mine.pos.push_back(arrived[m].pos);
      mine.mom.push_back(arrived[m].mom);
      mine.id.push_back(arrived[m].id);
    }
  }
  if (!comm.all(complete)) fail("internal: halo_members_ranks.cpp: a group's members on the ranks miss its length");
  groups.members.resize(mine.id.size());
  std::iota(groups.members.begin(), groups.members.end(), 0u);
  const std::vector<HaloProperties> haloes = member_properties(mine, groups, box, a, softening);

  // To root: each computed group's key, properties and members' IDs.
  const std::vector<GroupKey> all_keys = comm.gatherv(computed);
  const std::vector<HaloProperties> all_haloes = comm.gatherv(haloes);
  const std::vector<std::uint64_t> all_ids = comm.gatherv(mine.id);
  const std::uint64_t several = comm.sum<std::uint64_t>(owned);
  MemberHaloes out;
  out.particle_mass = mine.mass;
  out.groups.link_mpc_h = link;
  out.on_several_ranks = several;
  if (!comm.is_root()) return out;
  std::vector<std::uint64_t> id_first(all_keys.size() + 1, 0);
  for (std::size_t k = 0; k < all_keys.size(); ++k) id_first[k + 1] = id_first[k] + all_keys[k].length;
  if (id_first.back() != all_ids.size())
    fail("internal: halo_members_ranks.cpp: {} member IDs arrived for groups of {} members", all_ids.size(),
         id_first.back());
  std::vector<std::size_t> order(all_keys.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return before(all_keys[x], all_keys[y]); });
  out.ids.resize(all_ids.size());
  out.haloes.resize(order.size());
  out.groups.length.resize(order.size());
  out.groups.offset.resize(order.size());
  for (std::size_t g = 0, at = 0; g < order.size(); ++g) {
    const std::size_t k = order[g];
    if (g > 0 && all_keys[order[g - 1]].label == all_keys[k].label)
      fail("internal: halo_members_ranks.cpp: group {} computed twice", all_keys[k].label);
    out.groups.length[g] = static_cast<std::uint32_t>(all_keys[k].length);
    out.groups.offset[g] = at;
    out.haloes[g] = all_haloes[k];
    std::copy(all_ids.begin() + static_cast<std::ptrdiff_t>(id_first[k]),
              all_ids.begin() + static_cast<std::ptrdiff_t>(id_first[k + 1]),
              out.ids.begin() + static_cast<std::ptrdiff_t>(at));
    at += all_keys[k].length;
  }
  return out;
}

}  // namespace orbis::halo
