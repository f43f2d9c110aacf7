#include "io/id_order.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

#include "core/error.hpp"

namespace orbis {

std::vector<std::size_t> id_sort_order(const std::vector<std::uint64_t>& ids) {
  if (std::is_sorted(ids.begin(), ids.end())) return {};
  std::vector<std::size_t> order(ids.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return ids[a] < ids[b]; });
  return order;
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

}  // namespace orbis
