#include "domain/orb_domains.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "core/error.hpp"

namespace orbis {
namespace {

constexpr int kBins = 256;    // per histogram round
constexpr int kRounds = 3;    // 256^3 ~ 1.7e7: the cut to 6e-8 of the piece's side

// A piece of the box still to be cut (or, with one rank, a domain).
struct Piece {
  DomainBox box;
  int r0 = 0, r1 = 1;             // its ranks [r0, r1)
  int parent = -1;                // the cut that made it (-1: the whole box)
  bool right = false;             // which side of that cut
  int ranks() const { return r1 - r0; }
  int left_ranks() const { return ranks() / 2; }
  int longest_axis() const {
    const Vec3d side = box.hi - box.lo;
    int axis = 0;
    for (int d = 1; d < 3; ++d)
      if (side[d] > side[axis]) axis = d;
    return axis;
  }
};

}  // namespace

OrbDomains::OrbDomains(double box_mpc_h) : box_(box_mpc_h), boxes_{DomainBox{Vec3d{}, Vec3d{box_mpc_h, box_mpc_h, box_mpc_h}}} {}

OrbDomains OrbDomains::build(const std::vector<Vec3d>& pos, const std::vector<double>& weight, double box_mpc_h,
                             const Comm& comm) {
  if (!weight.empty() && weight.size() != pos.size())
    fail("internal: ORB domains got {} weights for {} particles", weight.size(), pos.size());
  const int ranks = comm.size();
  OrbDomains result(box_mpc_h);
  result.boxes_.assign(static_cast<std::size_t>(ranks), DomainBox{});
  const auto weight_of = [&](std::size_t i) { return weight.empty() ? 1.0 : weight[i]; };

  std::vector<Piece> pieces{Piece{DomainBox{Vec3d{}, Vec3d{box_mpc_h, box_mpc_h, box_mpc_h}}, 0, ranks, -1, false}};
  std::vector<int> piece_of(pos.size(), 0);   // each particle's piece at this level (-1: its domain is known)
  while (!pieces.empty()) {
    // This level's cuts: one per piece of more than one rank; the others are domains.
    const std::size_t k_count = pieces.size();
    std::vector<int> cut_of(k_count, -1);
    for (std::size_t k = 0; k < k_count; ++k) {
      const Piece& p = pieces[k];
      int node = -(p.r0 + 1);
      if (p.ranks() > 1) {
        node = static_cast<int>(result.cuts_.size());
        cut_of[k] = node;
        result.cuts_.push_back(Cut{p.longest_axis(), 0, -1, -1});
      } else {
        result.boxes_[static_cast<std::size_t>(p.r0)] = p.box;
      }
      if (p.parent >= 0) (p.right ? result.cuts_[p.parent].right : result.cuts_[p.parent].left) = node;
    }

    // The weight of each piece, then the histogram rounds narrowing [lo, hi) onto the cut.
    std::vector<double> total(k_count, 0.0);
    for (std::size_t i = 0; i < pos.size(); ++i)
      if (piece_of[i] >= 0) total[static_cast<std::size_t>(piece_of[i])] += weight_of(i);
    comm.reduce(total, Comm::Op::sum);
    std::vector<double> lo(k_count), hi(k_count), below(k_count, 0.0), target(k_count), at(k_count);
    for (std::size_t k = 0; k < k_count; ++k) {
      const Piece& p = pieces[k];
      const int axis = cut_of[k] >= 0 ? result.cuts_[cut_of[k]].axis : 0;
      lo[k] = p.box.lo[axis];
      hi[k] = p.box.hi[axis];
      target[k] = total[k] * p.left_ranks() / std::max(1, p.ranks());
    }
    std::vector<double> bin_weight(k_count, 0.0);
    for (int round = 0; round < kRounds; ++round) {
      std::vector<double> hist(k_count * kBins, 0.0);
      for (std::size_t i = 0; i < pos.size(); ++i) {
        if (piece_of[i] < 0) continue;
        const std::size_t k = static_cast<std::size_t>(piece_of[i]);
        if (cut_of[k] < 0) continue;
        const double x = pos[i][result.cuts_[cut_of[k]].axis];
        if (x < lo[k] || x >= hi[k]) continue;
        const int b = std::min(kBins - 1, static_cast<int>((x - lo[k]) / (hi[k] - lo[k]) * kBins));
        hist[k * kBins + static_cast<std::size_t>(b)] += weight_of(i);
      }
      comm.reduce(hist, Comm::Op::sum);
      for (std::size_t k = 0; k < k_count; ++k) {
        if (cut_of[k] < 0 || !(hi[k] > lo[k])) continue;
        int b = 0;
        double cumulative = below[k];
        while (b < kBins - 1 && cumulative + hist[k * kBins + static_cast<std::size_t>(b)] < target[k])
          cumulative += hist[k * kBins + static_cast<std::size_t>(b++)];
        const double width = (hi[k] - lo[k]) / kBins;
        below[k] = cumulative;
        bin_weight[k] = hist[k * kBins + static_cast<std::size_t>(b)];
        lo[k] += width * b;
        hi[k] = lo[k] + width;
      }
    }
    for (std::size_t k = 0; k < k_count; ++k) {
      if (cut_of[k] < 0) continue;
      const Piece& p = pieces[k];
      const int axis = result.cuts_[cut_of[k]].axis;
      if (!(total[k] > 0)) {
        at[k] = p.box.lo[axis] + (p.box.hi[axis] - p.box.lo[axis]) * p.left_ranks() / p.ranks();   // empty: by volume
      } else {
        // Within the last bin, as if its weight were spread evenly.
        const double f = bin_weight[k] > 0 ? std::clamp((target[k] - below[k]) / bin_weight[k], 0.0, 1.0) : 0.0;
        at[k] = std::clamp(lo[k] + (hi[k] - lo[k]) * f, p.box.lo[axis], p.box.hi[axis]);
      }
    }
    // Rank 0's cuts for everyone: the reductions' sums could in principle round differently
    // on different ranks, and the domains must be the same everywhere.
    comm.broadcast(at);

    std::vector<Piece> next;
    std::vector<int> child_index(2 * k_count, -1);
    for (std::size_t k = 0; k < k_count; ++k) {
      if (cut_of[k] < 0) continue;
      Cut& cut = result.cuts_[cut_of[k]];
      cut.at = at[k];
      const Piece& p = pieces[k];
      Piece left = p, right = p;
      left.box.hi[cut.axis] = cut.at;
      right.box.lo[cut.axis] = cut.at;
      left.r1 = right.r0 = p.r0 + p.left_ranks();
      left.parent = right.parent = cut_of[k];
      left.right = false;
      right.right = true;
      child_index[2 * k] = static_cast<int>(next.size());
      next.push_back(left);
      child_index[2 * k + 1] = static_cast<int>(next.size());
      next.push_back(right);
    }
    for (std::size_t i = 0; i < pos.size(); ++i) {
      if (piece_of[i] < 0) continue;
      const std::size_t k = static_cast<std::size_t>(piece_of[i]);
      if (cut_of[k] < 0) {
        piece_of[i] = -1;
        continue;
      }
      const Cut& cut = result.cuts_[cut_of[k]];
      piece_of[i] = child_index[2 * k + (pos[i][cut.axis] < cut.at ? 0 : 1)];
    }
    pieces = std::move(next);
  }
  return result;
}

int OrbDomains::owner(const Vec3d& x) const {
  if (cuts_.empty()) return 0;
  int node = 0;
  for (;;) {
    const Cut& cut = cuts_[static_cast<std::size_t>(node)];
    const int child = x[cut.axis] < cut.at ? cut.left : cut.right;
    if (child < 0) return -(child + 1);
    node = child;
  }
}

// Field by field (no struct padding in the bytes): box, cut count, cuts (axis, at, left,
// right), box count, boxes (lo, hi).
std::string OrbDomains::to_bytes() const {
  std::string out;
  const auto put = [&out](const auto& value) { out.append(reinterpret_cast<const char*>(&value), sizeof value); };
  put(box_);
  put(static_cast<std::uint64_t>(cuts_.size()));
  for (const Cut& c : cuts_) {
    put(static_cast<std::int32_t>(c.axis));
    put(c.at);
    put(static_cast<std::int32_t>(c.left));
    put(static_cast<std::int32_t>(c.right));
  }
  put(static_cast<std::uint64_t>(boxes_.size()));
  for (const DomainBox& b : boxes_) {
    put(b.lo);
    put(b.hi);
  }
  return out;
}

OrbDomains OrbDomains::from_bytes(const std::string& bytes, int ranks, const std::string& what) {
  std::size_t at = 0;
  const auto get = [&](auto& value) {
    if (at + sizeof value > bytes.size()) fail("{}: its rank domains are cut short ({} bytes)", what, bytes.size());
    std::memcpy(&value, bytes.data() + at, sizeof value);
    at += sizeof value;
  };
  OrbDomains d;
  get(d.box_);
  std::uint64_t n_cuts = 0, n_boxes = 0;
  get(n_cuts);
  if (n_cuts + 1 != static_cast<std::uint64_t>(ranks) && !(ranks == 1 && n_cuts == 0))
    fail("{}: its rank domains have {} cuts, {} ranks need {}", what, n_cuts, ranks, ranks - 1);
  d.cuts_.resize(n_cuts);
  for (Cut& c : d.cuts_) {
    std::int32_t axis = 0, left = 0, right = 0;
    get(axis);
    get(c.at);
    get(left);
    get(right);
    c.axis = axis;
    c.left = left;
    c.right = right;
    const auto valid_child = [&](int child) {
      return child < 0 ? -(child + 1) < ranks : child < static_cast<int>(n_cuts);
    };
    if (axis < 0 || axis > 2 || !valid_child(left) || !valid_child(right) || !(c.at >= 0 && c.at <= d.box_))
      fail("{}: its rank domains hold an invalid cut", what);
  }
  get(n_boxes);
  if (n_boxes != static_cast<std::uint64_t>(ranks))
    fail("{}: its rank domains are for {} ranks, this run has {}", what, n_boxes, ranks);
  d.boxes_.resize(n_boxes);
  for (DomainBox& b : d.boxes_) {
    get(b.lo);
    get(b.hi);
  }
  if (at != bytes.size()) fail("{}: its rank domains are longer than this orbis expects", what);
  return d;
}

}  // namespace orbis
