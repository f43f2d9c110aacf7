// The particles of all ranks in global ID order, without gathering them: a snapshot written
// over ranks puts consecutive pieces of the ID-sorted set into its files (io/snapshot.hpp),
// so every rank must know which of its particles fall into which piece.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/comm.hpp"

namespace orbis {

// Part p of `parts` equal shares of `total` items begins at equal_share_begin(total, parts, p)
// (p = parts: the end). total * p fits 64 bits: at most 8192^3 particles (2^39) times 2^16
// files or ranks.
inline std::uint64_t equal_share_begin(std::uint64_t total, int parts, int p) {
  return total * static_cast<std::uint64_t>(p) / static_cast<std::uint64_t>(parts);
}

// The order that sorts `ids` ascending (indices into ids); empty when they are sorted
// already, which saves the permutation's memory then (one rank's particles in ID order;
// over ranks they are in the tree's order: domain/rank_domains.hpp).
std::vector<std::size_t> id_sort_order(const std::vector<std::uint64_t>& ids);

// Collective. sorted_ids: this rank's IDs, ascending, unique over all ranks (particle IDs).
// positions: global positions in the ID order of the whole set, ascending, each in
// [0, total]. Returns, for each position b, how many of this rank's IDs are among the b
// smallest of all ranks: the particles [cut[f], cut[f + 1]) of this rank are then exactly
// its part of the global positions [positions[f], positions[f + 1]). Every rank gets its
// own cuts; their sum over the ranks is b. Cost: one reduction of positions.size() counts
// per bisection step over the ID range (at most 64 steps, about log2(ID range)).
std::vector<std::size_t> id_order_cuts(const std::vector<std::uint64_t>& sorted_ids,
                                       const std::vector<std::uint64_t>& positions, const Comm& comm);

}  // namespace orbis
