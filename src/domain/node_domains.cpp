#include "domain/node_domains.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.hpp"

namespace orbis {

NodeDomains NodeDomains::balance(const std::vector<double>& weight, const std::vector<std::uint64_t>& count,
                                 int ranks) {
  if (count.size() != weight.size())
    fail("internal: rank domains of {} group weights and {} group counts", weight.size(), count.size());
  NodeDomains d = balance_weight(weight, ranks);
  std::uint64_t n_total = 0;
  double w_total = 0;
  for (std::size_t g = 0; g < count.size(); ++g) {
    n_total += count[g];
    w_total += weight[g];
  }
  const double limit = kMaxParticleShare * static_cast<double>(n_total) / ranks;
  if (static_cast<double>(d.largest_count(count)) <= limit || n_total == 0) return d;
  // Blend in the count share, lambda times as much as the work share, doubling lambda until
  // the runs keep the limit; counts alone last. One sequence of choices from the same inputs:
  // the same runs on every rank.
  std::vector<double> blended(weight.size());
  for (double lambda = 0.125; lambda <= 64; lambda *= 2) {
    for (std::size_t g = 0; g < weight.size(); ++g)
      blended[g] = (w_total > 0 ? weight[g] / w_total : 0.0) + lambda * static_cast<double>(count[g]) / n_total;
    d = balance_weight(blended, ranks);
    if (static_cast<double>(d.largest_count(count)) <= limit) return d;
  }
  for (std::size_t g = 0; g < count.size(); ++g) blended[g] = static_cast<double>(count[g]);
  return balance_weight(blended, ranks);
}

std::uint64_t NodeDomains::largest_count(const std::vector<std::uint64_t>& count) const {
  std::uint64_t largest = 0;
  for (int r = 0; r < ranks(); ++r) {
    std::uint64_t held = 0;
    for (std::uint32_t g = begin(r); g < end(r); ++g) held += count[g];
    largest = std::max(largest, held);
  }
  return largest;
}

NodeDomains NodeDomains::balance_weight(const std::vector<double>& weight, int ranks) {
  if (ranks < 1) fail("internal: rank domains for {} ranks", ranks);
  const std::size_t g = weight.size();
  if (g > UINT32_MAX) fail("internal: {} top-tree groups (at most 2^32 - 1)", g);
  // Prefix sums in group order (one order on every rank: the same bits).
  std::vector<double> prefix(g + 1, 0.0);
  for (std::size_t k = 0; k < g; ++k) {
    if (!(weight[k] >= 0)) fail("internal: top-tree group {} weighs {}", k, weight[k]);
    prefix[k + 1] = prefix[k] + weight[k];
  }
  const bool counted = prefix[g] > 0;
  if (!counted)
    for (std::size_t k = 0; k <= g; ++k) prefix[k] = static_cast<double>(k);
  const double total = prefix[g];
  NodeDomains d;
  d.begin_.assign(static_cast<std::size_t>(ranks) + 1, 0);
  d.begin_.back() = static_cast<std::uint32_t>(g);
  std::size_t at = 0;
  for (int r = 1; r < ranks; ++r) {
    const double target = total * r / ranks;
    // The first boundary at or beyond the target, or the one before it if that is nearer.
    while (at < g && prefix[at] < target) ++at;
    std::size_t cut = at;
    if (cut > d.begin_[static_cast<std::size_t>(r) - 1] && target - prefix[cut - 1] <= prefix[cut] - target) --cut;
    d.begin_[static_cast<std::size_t>(r)] = static_cast<std::uint32_t>(cut);
  }
  return d;
}

int NodeDomains::owner(std::uint32_t group) const {
  // The last rank whose run begins at or before the group (empty runs share a boundary).
  return static_cast<int>(std::upper_bound(begin_.begin(), begin_.end() - 1, group) - begin_.begin()) - 1;
}

// Field by field: the rank count, then ranks + 1 boundaries (uint32 each).
std::string NodeDomains::to_bytes() const {
  std::string out;
  const auto put = [&out](const auto& value) { out.append(reinterpret_cast<const char*>(&value), sizeof value); };
  put(static_cast<std::uint32_t>(ranks()));
  for (std::uint32_t b : begin_) put(b);
  return out;
}

NodeDomains NodeDomains::from_bytes(const std::string& bytes, int ranks, const std::string& what) {
  std::size_t at = 0;
  const auto get = [&](auto& value) {
    if (at + sizeof value > bytes.size()) fail("{}: its rank domains are cut short ({} bytes)", what, bytes.size());
    std::memcpy(&value, bytes.data() + at, sizeof value);
    at += sizeof value;
  };
  std::uint32_t n = 0;
  get(n);
  if (n != static_cast<std::uint32_t>(ranks))
    fail("{}: its rank domains are for {} ranks, this run has {}", what, n, ranks);
  NodeDomains d;
  d.begin_.resize(static_cast<std::size_t>(n) + 1);
  for (std::uint32_t& b : d.begin_) get(b);
  if (at != bytes.size()) fail("{}: its rank domains are longer than this orbis expects", what);
  if (d.begin_.front() != 0 || !std::is_sorted(d.begin_.begin(), d.begin_.end()))
    fail("{}: its rank domains are not runs of top-tree nodes in order", what);
  return d;
}

}  // namespace orbis
