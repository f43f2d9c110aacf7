#include "io/id_order.hpp"

#include <algorithm>
#include <limits>
#include <utility>

#include "core/error.hpp"

namespace orbis {

namespace {

// Sorts `items` stably by key(item) < 2^key_bits: an LSD radix sort, 11 bits a pass, only as
// many passes as the keys need. A few sequential sweeps; a comparison sort through indices
// (what id_sort_order was) jumps about the IDs ~log2(n) times an element: several seconds
// for the 8M particles of a rank.
template <typename T, typename Key>
void radix_sort(std::vector<T>& items, int key_bits, const Key& key) {
  constexpr int kBits = 11;
  constexpr std::size_t kBuckets = std::size_t{1} << kBits;
  std::vector<T> spare(items.size());
  std::vector<std::size_t> start(kBuckets);
  for (int shift = 0; shift < key_bits; shift += kBits) {
    std::fill(start.begin(), start.end(), std::size_t{0});
    for (const T& item : items) ++start[(key(item) >> shift) & (kBuckets - 1)];
    std::size_t running = 0;
    for (std::size_t& s : start) running += std::exchange(s, running);
    for (const T& item : items) spare[start[(key(item) >> shift) & (kBuckets - 1)]++] = item;
    items.swap(spare);
  }
}

int bits_for(std::uint64_t value) {
  int bits = 0;
  while (bits < 64 && (value >> bits) != 0) ++bits;
  return bits;
}

// The order of IDs in no useful order: radix-sorted, each ID less the smallest packed with
// its index in one word where both fit (half the memory traffic of pairs).
std::vector<std::size_t> radix_order(const std::vector<std::uint64_t>& ids) {
  const std::size_t n = ids.size();
  const auto [lo, hi] = std::minmax_element(ids.begin(), ids.end());
  const std::uint64_t smallest = *lo;
  const int key_bits = bits_for(*hi - *lo), index_bits = bits_for(n - 1);
  std::vector<std::size_t> order(n);
  if (key_bits + index_bits <= 64) {
    std::vector<std::uint64_t> packed(n);
    for (std::size_t i = 0; i < n; ++i) packed[i] = (ids[i] - smallest) << index_bits | i;
    radix_sort(packed, key_bits, [&](std::uint64_t w) { return w >> index_bits; });
    const std::uint64_t mask = index_bits == 0 ? 0 : ~std::uint64_t{0} >> (64 - index_bits);
    for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<std::size_t>(packed[i] & mask);
  } else {
    struct Keyed {
      std::uint64_t key;
      std::size_t index;
    };
    std::vector<Keyed> pairs(n);
    for (std::size_t i = 0; i < n; ++i) pairs[i] = {ids[i] - smallest, i};
    radix_sort(pairs, key_bits, [](const Keyed& k) { return k.key; });
    for (std::size_t i = 0; i < n; ++i) order[i] = pairs[i].index;
  }
  return order;
}

// The order of IDs made of a few ascending runs beginning at `runs` (a snapshot writer's
// arrivals: one sorted piece from each rank): the runs merged pairwise, log2(runs) sweeps.
std::vector<std::size_t> merged_order(const std::vector<std::uint64_t>& ids, std::vector<std::size_t> runs) {
  const std::size_t n = ids.size();
  std::vector<std::size_t> order(n), spare(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  auto by_id = [&](std::size_t a, std::size_t b) { return ids[a] < ids[b]; };
  while (runs.size() > 1) {
    std::vector<std::size_t> merged;
    for (std::size_t r = 0; r < runs.size(); r += 2) {
      const std::size_t begin = runs[r], middle = r + 1 < runs.size() ? runs[r + 1] : n,
                        end = r + 2 < runs.size() ? runs[r + 2] : n;
      std::merge(order.begin() + begin, order.begin() + middle, order.begin() + middle, order.begin() + end,
                 spare.begin() + begin, by_id);   // stable
      merged.push_back(begin);
    }
    order.swap(spare);
    runs.swap(merged);
  }
  return order;
}

}  // namespace

std::vector<std::size_t> id_sort_order(const std::vector<std::uint64_t>& ids) {
  // Where the ascending runs begin, while they are few enough to merge.
  constexpr std::size_t kMergedRuns = 16;
  std::vector<std::size_t> runs{0};
  for (std::size_t i = 1; i < ids.size() && runs.size() <= kMergedRuns; ++i)
    if (ids[i] < ids[i - 1]) runs.push_back(i);
  if (runs.size() == 1) return {};
  return runs.size() <= kMergedRuns ? merged_order(ids, std::move(runs)) : radix_order(ids);
}

std::vector<std::size_t> id_order_cuts(const std::vector<std::uint64_t>& sorted_ids,
                                       const std::vector<std::uint64_t>& positions, const Comm& comm) {
  const std::uint64_t total = comm.sum(static_cast<std::uint64_t>(sorted_ids.size()));
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t id_min = comm.min(sorted_ids.empty() ? kMax : sorted_ids.front());
  const std::uint64_t id_max = comm.max(sorted_ids.empty() ? std::uint64_t{0} : sorted_ids.back());
  const std::size_t m = positions.size();
  // How many local IDs are <= t.
  auto at_most = [&](std::uint64_t t) {
    return static_cast<std::size_t>(std::upper_bound(sorted_ids.begin(), sorted_ids.end(), t) - sorted_ids.begin());
  };
  // Position b (0 < b < total) cuts just below the ID of global rank b (0-based), the
  // smallest t with count(id <= t) >= b + 1 over all ranks: bisection on [id_min, id_max],
  // all positions at once. Positions 0 and total need no search.
  std::vector<std::uint64_t> lo(m, id_min), hi(m, id_max);
  std::vector<char> searching(m, 0);
  for (std::size_t f = 0; f < m; ++f) {
    if (positions[f] > total || (f > 0 && positions[f] < positions[f - 1]))
      fail("internal: id_order_cuts: positions must ascend within [0, {}]", total);
    searching[f] = positions[f] > 0 && positions[f] < total;
  }
  std::vector<std::uint64_t> counts(m);
  // Every rank holds the same lo, hi and searching (they follow from reduced counts), so
  // every rank runs the same steps.
  while (std::any_of(searching.begin(), searching.end(), [](char s) { return s != 0; })) {
    for (std::size_t f = 0; f < m; ++f) {
      const std::uint64_t mid = lo[f] + (hi[f] - lo[f]) / 2;
      counts[f] = searching[f] ? at_most(mid) : 0;
    }
    comm.reduce(counts, Comm::Op::sum);
    for (std::size_t f = 0; f < m; ++f) {
      if (!searching[f]) continue;
      const std::uint64_t mid = lo[f] + (hi[f] - lo[f]) / 2;
      if (counts[f] >= positions[f] + 1) hi[f] = mid;
      else lo[f] = mid + 1;
      searching[f] = lo[f] < hi[f];
    }
  }
  std::vector<std::size_t> cuts(m);
  for (std::size_t f = 0; f < m; ++f) {
    if (positions[f] == 0) cuts[f] = 0;
    else if (positions[f] == total) cuts[f] = sorted_ids.size();
    else cuts[f] = static_cast<std::size_t>(std::lower_bound(sorted_ids.begin(), sorted_ids.end(), lo[f]) -
                                            sorted_ids.begin());
  }
  return cuts;
}

IdOrderPieces::IdOrderPieces(const std::vector<std::uint64_t>& ids, const std::vector<std::uint64_t>& positions,
                             const Comm& comm) {
  const std::size_t n = ids.size();
  const std::uint64_t total = comm.sum(static_cast<std::uint64_t>(n));
  if (positions.size() < 2 || positions.front() != 0 || positions.back() != total)
    fail("internal: IdOrderPieces: the positions must run from 0 to the total, {}", total);
  const std::size_t pieces = positions.size() - 1;
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t lo = kMax, hi = 0;
  for (std::uint64_t id : ids) {
    lo = std::min(lo, id);
    hi = std::max(hi, id);
  }
  smallest_ = comm.min(lo);
  const std::uint64_t largest = comm.max(hi);
  // Duplicates could pass this test (one ID twice, another missing): order_of finds them.
  dense_ = total > 0 && largest - smallest_ == total - 1;
  start_.assign(pieces + 1, 0);
  if (dense_) {
    // Counting sort by piece: a particle's position is its ID less the smallest.
    std::vector<std::uint32_t> piece_of(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t at = ids[i] - smallest_;
      piece_of[i] = static_cast<std::uint32_t>(std::upper_bound(positions.begin(), positions.end(), at) -
                                               positions.begin() - 1);
      ++start_[piece_of[i] + 1];
    }
    for (std::size_t p = 0; p < pieces; ++p) start_[p + 1] += start_[p];
    members_.resize(n);
    std::vector<std::size_t> next(start_.begin(), start_.end() - 1);
    for (std::size_t i = 0; i < n; ++i) members_[next[piece_of[i]]++] = i;
    return;
  }
  members_ = id_sort_order(ids);
  std::vector<std::uint64_t> sorted;
  if (!members_.empty()) {
    sorted.resize(n);
    for (std::size_t k = 0; k < n; ++k) sorted[k] = ids[members_[k]];
  }
  start_ = id_order_cuts(members_.empty() ? ids : sorted, positions, comm);
}

std::vector<std::size_t> IdOrderPieces::order_of(const std::vector<std::uint64_t>& arrived, std::uint64_t first,
                                                 const std::string& what) const {
  const std::size_t n = arrived.size();
  auto not_unique = [&] {
    fail("{}: the particles of positions [{}, {}) of the ID order are not one each: particle IDs are not unique", what,
         first, first + n);
  };
  if (!dense_) {
    std::vector<std::size_t> order = id_sort_order(arrived);
    for (std::size_t i = 1; i < n; ++i) {
      const std::size_t a = order.empty() ? i - 1 : order[i - 1], b = order.empty() ? i : order[i];
      if (arrived[a] == arrived[b]) not_unique();
    }
    return order;
  }
  constexpr std::size_t kEmpty = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> order(n, kEmpty);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t at = arrived[i] - smallest_ - first;   // wraps to large below first
    if (arrived[i] < smallest_ || at >= n || order[at] != kEmpty) not_unique();
    order[at] = i;
  }
  return order;
}

}  // namespace orbis
