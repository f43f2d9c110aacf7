#include "analysis/halo_members_ranks.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "analysis/halo_potential.hpp"
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

// The work of a group's member properties, in pair evaluations of its potential: direct sums
// up to kPotentialDirectMax members, above it the octree's, which grows about as n^1.6
// (halo_potential.hpp: ~0.1 s for 6000 members, 6-14 s for 1e5, 7 ns a pair); continuous.
double potential_work(std::uint64_t members) {
  const double n = static_cast<double>(members), direct = kPotentialDirectMax;
  return members <= kPotentialDirectMax ? n * n : std::pow(direct, 0.4) * std::pow(n, 1.6);
}

}  // namespace

MemberHaloes member_haloes_across_ranks(const Particles& local, const fof::RankGroups& share, double box, double a,
                                        double softening, double link, const Comm& comm) {
  const auto ranks = static_cast<std::size_t>(comm.size());
  const auto me = static_cast<std::size_t>(comm.rank());
  // Every rank's shares, in rank order (each rank's in the canonical order).
  const std::vector<std::size_t> per_rank = comm.allgather(share.groups.size());
  const std::vector<fof::GroupShare> shares = comm.allgatherv(share.groups);
  std::vector<std::size_t> rank_first(ranks + 1, 0);
  std::partial_sum(per_rank.begin(), per_rank.end(), rank_first.begin() + 1);

  // Who computes each group; every rank makes the same choice from the same numbers. A
  // group alone on its rank stays there while that rank's work stays within the mean (its
  // groups largest first); the others, largest first, go to the rank with the least work.
  std::vector<GroupKey> keys;
  for (const fof::GroupShare& s : shares) keys.push_back({s.label, s.length});
  std::sort(keys.begin(), keys.end(), before);
  keys.erase(std::unique(keys.begin(), keys.end(),
                         [](const GroupKey& x, const GroupKey& y) { return x.label == y.label; }),
             keys.end());
  double total = 0;
  for (const GroupKey& k : keys) total += potential_work(k.length);
  auto key_of = [&](const fof::GroupShare& s) {
    const GroupKey key{s.label, s.length};
    return static_cast<std::size_t>(std::lower_bound(keys.begin(), keys.end(), key, before) - keys.begin());
  };
  constexpr std::size_t unassigned = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> owner(keys.size(), unassigned);
  std::vector<double> work(ranks, 0);
  const double mean = total / static_cast<double>(ranks);
  for (std::size_t r = 0; r < ranks; ++r)
    for (std::size_t k = rank_first[r]; k < rank_first[r + 1]; ++k) {
      const double w = potential_work(shares[k].length);
      if (shares[k].count != shares[k].length || (work[r] > 0 && work[r] + w > mean)) continue;
      owner[key_of(shares[k])] = r;
      work[r] += w;
    }
  for (std::size_t k = 0; k < keys.size(); ++k) {
    if (owner[k] != unassigned) continue;
    owner[k] = static_cast<std::size_t>(std::min_element(work.begin(), work.end()) - work.begin());
    work[owner[k]] += potential_work(keys[k].length);
  }

  // The members of the groups computed elsewhere (or on several ranks) to their owners: by
  // destination, each destination's in this rank's order.
  auto stays = [&](const fof::GroupShare& s, std::size_t r) { return s.count == s.length && owner[key_of(s)] == r; };
  std::vector<std::uint64_t> first(share.groups.size() + 1, 0);   // each share's members in share.members
  for (std::size_t g = 0; g < share.groups.size(); ++g) first[g + 1] = first[g] + share.groups[g].count;
  std::vector<std::size_t> counts(ranks, 0);
  for (const fof::GroupShare& s : share.groups)
    if (!stays(s, me)) counts[owner[key_of(s)]] += s.count;
  std::vector<std::size_t> next(ranks + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), next.begin() + 1);
  std::vector<MemberRecord> send(next[ranks]);
  for (std::size_t g = 0; g < share.groups.size(); ++g) {
    if (stays(share.groups[g], me)) continue;
    std::size_t& at = next[owner[key_of(share.groups[g])]];
    for (std::uint64_t m = first[g]; m < first[g + 1]; ++m) {
      const std::uint32_t i = share.members[m];
      send[at++] = {fof::linked_position(local.pos[i], box), local.mom[i], local.id[i]};
    }
  }
  const std::vector<MemberRecord> arrived = comm.alltoallv(send, counts);

  // This rank's groups: those that stay, then those that arrived, members by ID.
  Particles mine;
  mine.mass = comm.max(local.mass);
  fof::FofGroups groups;
  groups.link_mpc_h = link;
  std::vector<GroupKey> computed;
  const std::size_t members_here = first.back() - Comm::total(counts) + arrived.size();
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
    if (!stays(s, me)) continue;
    open_group(s.label, s.length);
    for (std::uint64_t m = first[g]; m < first[g + 1]; ++m) {
      const std::uint32_t i = share.members[m];
      mine.pos.push_back(fof::linked_position(local.pos[i], box));
      mine.mom.push_back(local.mom[i]);
      mine.id.push_back(local.id[i]);
    }
  }
  // The pieces that arrived, by source rank, each source's in its order: per group.
  std::vector<std::vector<std::size_t>> piece_first(keys.size()), piece_count(keys.size());
  for (std::size_t r = 0, at = 0; r < ranks; ++r)
    for (std::size_t k = rank_first[r]; k < rank_first[r + 1]; ++k) {
      const std::size_t key = key_of(shares[k]);
      if (owner[key] != me || stays(shares[k], r)) continue;
      piece_first[key].push_back(at);
      piece_count[key].push_back(shares[k].count);
      at += shares[k].count;
    }
  std::vector<std::uint64_t> arrived_id(arrived.size());
  for (std::size_t k = 0; k < arrived.size(); ++k) arrived_id[k] = arrived[k].id;
  bool complete = true;
  std::size_t moved = 0;
  for (std::size_t key = 0; key < keys.size(); ++key) {
    if (owner[key] != me || piece_first[key].empty()) continue;
    ++moved;
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
  const std::uint64_t travelled = comm.sum<std::uint64_t>(moved);
  MemberHaloes out;
  out.particle_mass = mine.mass;
  out.groups.link_mpc_h = link;
  out.moved = travelled;
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
