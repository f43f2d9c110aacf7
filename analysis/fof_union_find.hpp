// Disjoint sets (union-find) with union by rank and path halving: near-constant amortised
// cost per operation. Indices are 32-bit, so one set holds at most 2^32 - 1 elements (one
// rank's particles); 5 bytes per element.
//
// Threads may share one DisjointSets if each thread only ever unites elements whose sets
// no other thread touches at the same time (fof.cpp links disjoint slabs in parallel and
// the slab boundaries afterwards, serially). A set's contents never depend on the order of
// the unions, only its root does; fof.cpp derives everything it reports from the contents.
#pragma once
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

namespace orbis::fof {

class DisjointSets {
 public:
  explicit DisjointSets(std::size_t n) : parent_(n), rank_(n, 0) {
    std::iota(parent_.begin(), parent_.end(), std::uint32_t{0});
  }

  std::size_t size() const { return parent_.size(); }

  // Root of i's set; halves the path on the way (each visited node skips its parent).
  std::uint32_t find(std::uint32_t i) {
    while (parent_[i] != i) {
      parent_[i] = parent_[parent_[i]];
      i = parent_[i];
    }
    return i;
  }
  // Root without modifying anything: safe to call from many threads at once.
  std::uint32_t find_const(std::uint32_t i) const {
    while (parent_[i] != i) i = parent_[i];
    return i;
  }
  bool same(std::uint32_t i, std::uint32_t j) { return find(i) == find(j); }

  // Merges the sets of i and j; returns false when they were one set already.
  bool unite(std::uint32_t i, std::uint32_t j) {
    i = find(i);
    j = find(j);
    if (i == j) return false;
    if (rank_[i] < rank_[j]) std::swap(i, j);
    parent_[j] = i;
    if (rank_[i] == rank_[j]) ++rank_[i];
    return true;
  }

  // Points every element straight at its root and frees the ranks: linking is over, and
  // unite() must not be called again.
  void flatten() {
    for (std::size_t i = 0; i < parent_.size(); ++i) parent_[i] = find(static_cast<std::uint32_t>(i));
    std::vector<std::uint8_t>().swap(rank_);
  }
  // Valid after flatten().
  std::uint32_t root(std::uint32_t i) const { return parent_[i]; }

 private:
  std::vector<std::uint32_t> parent_;
  std::vector<std::uint8_t> rank_;
};

}  // namespace orbis::fof
