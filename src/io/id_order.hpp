// The particles of all ranks in global ID order, without gathering them: a snapshot written
// over ranks puts consecutive pieces of the ID-sorted set into its files (io/snapshot.hpp),
// so every rank must know which of its particles fall into which piece.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/comm.hpp"

namespace orbis {

// Part p of `parts` equal shares of `total` items begins at equal_share_begin(total, parts, p)
// (p = parts: the end). total * p fits 64 bits: at most 8192^3 particles (2^39) times 2^16
// files or ranks.
inline std::uint64_t equal_share_begin(std::uint64_t total, int parts, int p) {
  return total * static_cast<std::uint64_t>(p) / static_cast<std::uint64_t>(parts);
}

// The order that sorts `ids` ascending (indices into ids; stable: equal IDs keep their order);
// empty when they are sorted already, which saves the permutation's memory then (one rank's
// particles in ID order; over ranks they are in the tree's order: domain/rank_domains.hpp).
// A few ascending runs (up to 16: what a snapshot writer receives, one sorted piece from each
// rank) are merged; anything else is radix-sorted: linear in the particles, both.
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

// Collective to make. Where this rank's particles (`ids`, in any order, unique over all
// ranks) fall in the ID order of every rank's particles, for consecutive pieces of it: piece
// p is the global positions [positions[p], positions[p + 1]) (ascending from 0 to the
// total). The pieces are what a snapshot's writers receive (io/snapshot_write.cpp).
// Dense IDs (every ID from the smallest to the largest present once: the grid ICs' 1..N,
// most IC files'), as is checked: a particle's position is its ID less the smallest, nothing
// is sorted. Otherwise this rank's particles are sorted by ID (id_sort_order) and the
// pieces' cuts found together (id_order_cuts).
class IdOrderPieces {
 public:
  IdOrderPieces(const std::vector<std::uint64_t>& ids, const std::vector<std::uint64_t>& positions, const Comm& comm);

  bool dense() const { return dense_; }
  // This rank's particles of piece p: member(p, k) for k in [0, count(p)), indices into ids,
  // in ID order unless the IDs are dense.
  std::size_t count(std::size_t p) const { return start_[p + 1] - start_[p]; }
  std::size_t member(std::size_t p, std::size_t k) const {
    return members_.empty() ? start_[p] + k : members_[start_[p] + k];
  }
  // The particles of every rank at the global positions [first, first + arrived.size()),
  // gathered in any order: row i of those positions is arrived[order[i]] (order empty: row i
  // is arrived[i]). An ID seen twice is an error naming `what`, and with dense IDs one
  // outside those positions.
  std::vector<std::size_t> order_of(const std::vector<std::uint64_t>& arrived, std::uint64_t first,
                                    const std::string& what) const;

 private:
  bool dense_ = false;
  std::uint64_t smallest_ = 0;                 // the smallest ID of all ranks
  std::vector<std::size_t> members_, start_;   // piece p: members_[start_[p] .. start_[p + 1])
};

}  // namespace orbis
