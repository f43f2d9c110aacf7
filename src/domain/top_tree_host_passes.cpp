#include "domain/top_tree_host_passes.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace orbis {
namespace {

using top_tree::compare_key;
using top_tree::from_ordered;
using top_tree::ordered_bits;
using top_tree::round_digit;
using top_tree::RoundNode;

// Per-particle passes run over fixed blocks of their index lists, one block per task; the
// lists they make are concatenated in block order and what they count or bound are integer
// sums and minima: the serial pass's result for any thread count.
constexpr std::size_t kBlock = std::size_t{1} << 15;

std::size_t blocks_of(std::size_t n) { return (n + kBlock - 1) / kBlock; }

// parts[b] (one per block) concatenated into out, in order, in parallel.
void concatenate(const std::vector<std::vector<std::uint32_t>>& parts, std::size_t n_parts,
                 std::vector<std::uint32_t>& out) {
  std::vector<std::size_t> at(n_parts + 1, 0);
  for (std::size_t b = 0; b < n_parts; ++b) at[b + 1] = at[b] + parts[b].size();
  out.resize(at[n_parts]);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t b = 0; b < static_cast<std::ptrdiff_t>(n_parts); ++b)
    std::copy(parts[static_cast<std::size_t>(b)].begin(), parts[static_cast<std::size_t>(b)].end(),
              out.begin() + static_cast<std::ptrdiff_t>(at[static_cast<std::size_t>(b)]));
}

// Per-thread scratch arrays of one size, summed or min-combined element-wise afterwards
// (exact in any order). team: the threads that ran (a smaller team leaves the rest unused).
template <typename T>
struct PerThread {
  std::vector<std::vector<T>> data;
  int team = 1;
  PerThread() : data(static_cast<std::size_t>(std::max(1, omp_get_max_threads()))) {}
};

// Three passes over the rank's members a level: the first round's histogram, its filter
// (which also sends every member that round decides to its child), and the late pass over
// the members it left; the later rounds read only the few candidates left.
class HostPasses final : public TopTreePasses {
 public:
  explicit HostPasses(const std::vector<Vec3d>& positions) : positions_(positions), n_(positions.size()) {}

  void start(bool root_splits, double* box) override;
  void begin_level(const std::vector<std::int32_t>& child_row, const std::vector<std::int32_t>& child_index) override;
  std::uint32_t* histogram(bool first, const std::vector<RoundNode>& rn, std::size_t bins) override;
  void filter(bool first, const std::vector<RoundNode>& rn) override;
  void candidates(bool any_round, std::vector<std::uint32_t>& index, std::vector<std::int32_t>& slot) override;
  void finish_level(bool any_round, const std::vector<int>& axis, const std::vector<std::uint64_t>& cut_key,
                    const std::vector<int>& settled, const std::vector<std::uint32_t>& tied,
                    const std::vector<std::uint8_t>& tie_side, std::vector<double>& box) override;
  std::vector<std::int32_t> take_particle_node() override { return std::move(particle_node_); }

 private:
  // Combines the per-thread boxes (local_box_, `size` doubles each) into box.
  void combine_boxes(std::size_t size, std::vector<double>& box) const {
    box.assign(size, HUGE_VAL);
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t k = 0; k < static_cast<std::ptrdiff_t>(size); ++k)
      for (int t = 0; t < local_box_.team; ++t)
        box[static_cast<std::size_t>(k)] = std::min(
            box[static_cast<std::size_t>(k)], local_box_.data[static_cast<std::size_t>(t)][static_cast<std::size_t>(k)]);
  }
  // A member's side decided: its node if the child stops, else its place among the next
  // level's members.
  void place(std::uint32_t i, std::size_t child, std::vector<std::uint32_t>& next) {
    if (child_row_[child] < 0) {
      particle_node_[i] = child_index_[child];
    } else {
      slot_[i] = child_row_[child];
      next.push_back(i);
    }
  }
  // The same with the child's box (from the member's key: the exact coordinates, -0.0 read
  // as +0.0).
  void assign(std::uint32_t i, std::size_t child, double* bx, std::vector<std::uint32_t>& next) {
    double* b = bx + 6 * child;
    for (int d = 0; d < 3; ++d) {
      const double x = from_ordered(keys_[3 * i + static_cast<std::size_t>(d)]);
      b[d] = std::min(b[d], x);
      b[3 + d] = std::min(b[3 + d], -x);
    }
    place(i, child, next);
  }

  const std::vector<Vec3d>& positions_;
  std::size_t n_;
  std::vector<std::uint64_t> keys_;              // 3 a particle: ordered_bits of x, y, z
  std::vector<std::int32_t> particle_node_;
  std::vector<std::int32_t> slot_;               // a member's node: its index among its level's splitting nodes
  std::vector<std::uint8_t> tie_side_;           // written for the tied members only
  // members: this rank's particles of the level's splitting nodes, ascending; cand: those the
  // radix selection has not decided yet; first_left: those the first round left.
  std::vector<std::uint32_t> members_, cand_, first_left_;
  // Per block of a pass: the next level's members it found (parts) and the undecided
  // candidates of a round (left_parts).
  std::vector<std::vector<std::uint32_t>> parts_, left_parts_;
  std::size_t next_parts_used_ = 0;
  std::vector<std::int32_t> child_row_, child_index_;
  PerThread<std::uint32_t> local_hist_;
  std::vector<std::uint32_t> hist_;   // a round's counts (histogram())
  // This rank's part of each child's box at the current level: lo and -hi (so that one min
  // reduction, exact in any order, gives both).
  PerThread<double> local_box_;
};

void HostPasses::start(bool root_splits, double* box) {
  const std::size_t n = n_;
  keys_.resize(3 * n);
  particle_node_.assign(n, -1);
  slot_.assign(n, 0);
  tie_side_.assign(n, 0);
  const auto add = [](double* b, const Vec3d& x) {
    for (int d = 0; d < 3; ++d) b[d] = std::min(b[d], x[d]), b[3 + d] = std::min(b[3 + d], -x[d]);
  };
  const std::size_t nb = blocks_of(n);
#pragma omp parallel
  {
#pragma omp single
    local_box_.team = omp_get_num_threads();
    std::vector<double>& b = local_box_.data[static_cast<std::size_t>(omp_get_thread_num())];
    b.assign(6, HUGE_VAL);
#pragma omp for schedule(static)
    for (std::ptrdiff_t blk = 0; blk < static_cast<std::ptrdiff_t>(nb); ++blk) {
      const std::size_t end = std::min(n, (static_cast<std::size_t>(blk) + 1) * kBlock);
      for (std::size_t i = static_cast<std::size_t>(blk) * kBlock; i < end; ++i) {
        for (int d = 0; d < 3; ++d) keys_[3 * i + static_cast<std::size_t>(d)] = ordered_bits(positions_[i][d]);
        add(b.data(), positions_[i]);
      }
    }
  }
  std::vector<double> root;
  combine_boxes(6, root);
  std::copy(root.begin(), root.end(), box);
  if (root_splits) {
    members_.resize(n);
    for (std::size_t i = 0; i < n; ++i) members_[i] = static_cast<std::uint32_t>(i);
  } else {
    std::fill(particle_node_.begin(), particle_node_.end(), 0);
  }
}

void HostPasses::begin_level(const std::vector<std::int32_t>& child_row, const std::vector<std::int32_t>& child_index) {
  child_row_ = child_row;
  child_index_ = child_index;
  for (std::vector<double>& bx : local_box_.data) bx.assign(6 * child_row.size(), HUGE_VAL);
}

std::uint32_t* HostPasses::histogram(bool first, const std::vector<RoundNode>& rn, std::size_t bins) {
  const std::vector<std::uint32_t>& list = first ? members_ : cand_;
  std::vector<std::uint32_t>& hist = hist_;
  hist.assign(bins, 0);
  const std::size_t nb = blocks_of(list.size());
  // Counted by runs of one bin (members come in tree order, so neighbours mostly share a
  // node and a digit): one add per run, not a chain of increments of one counter.
  const auto count = [&](std::uint32_t* h, std::size_t begin, std::size_t end) {
    std::size_t last = 0;
    std::uint32_t run = 0;
    for (std::size_t k = begin; k < end; ++k) {
      const std::uint32_t i = list[k];
      const auto q = static_cast<std::size_t>(slot_[i]);
      const RoundNode& r = rn[q];
      if (r.first_bin < 0) continue;   // not counted this round (settled, or at one position)
      const std::size_t at = static_cast<std::size_t>(r.first_bin) +
                             static_cast<std::size_t>(round_digit(keys_[3 * i + r.hw], keys_[3 * i + r.lw], r));
      if (at == last) {
        ++run;
      } else {
        if (run > 0) h[last] += run;
        last = at;
        run = 1;
      }
    }
    if (run > 0) h[last] += run;
  };
  if (nb <= 1) {
    count(hist.data(), 0, list.size());
    return hist.data();
  }
#pragma omp parallel
  {
#pragma omp single
    local_hist_.team = omp_get_num_threads();
    std::vector<std::uint32_t>& h = local_hist_.data[static_cast<std::size_t>(omp_get_thread_num())];
    h.assign(bins, 0);
#pragma omp for schedule(dynamic, 1)
    for (std::ptrdiff_t blk = 0; blk < static_cast<std::ptrdiff_t>(nb); ++blk)
      count(h.data(), static_cast<std::size_t>(blk) * kBlock,
            std::min(list.size(), (static_cast<std::size_t>(blk) + 1) * kBlock));
  }
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t k = 0; k < static_cast<std::ptrdiff_t>(bins); ++k) {
    std::uint32_t sum = 0;
    for (int t = 0; t < local_hist_.team; ++t) sum += local_hist_.data[static_cast<std::size_t>(t)][static_cast<std::size_t>(k)];
    hist[static_cast<std::size_t>(k)] = sum;
  }
  return hist.data();
}

// The candidates still undecided: in the bin holding the rank (or of a node at one
// position). The first round also assigns the decided members their children (into parts,
// block by block: the next level's members, ascending).
void HostPasses::filter(bool first, const std::vector<RoundNode>& rn) {
  const std::vector<std::uint32_t>& list = first ? members_ : cand_;
  const std::size_t nb = blocks_of(list.size());
  if (first) {
    if (parts_.size() < nb) parts_.resize(nb);
    next_parts_used_ = nb;
  }
  if (left_parts_.size() < nb) left_parts_.resize(nb);
#pragma omp parallel
  {
#pragma omp single
    if (first) local_box_.team = omp_get_num_threads();
    double* bx = local_box_.data[static_cast<std::size_t>(omp_get_thread_num())].data();
#pragma omp for schedule(dynamic, 1)
    for (std::ptrdiff_t blk = 0; blk < static_cast<std::ptrdiff_t>(nb); ++blk) {
      std::vector<std::uint32_t>& out = left_parts_[static_cast<std::size_t>(blk)];
      std::vector<std::uint32_t>* next = first ? &parts_[static_cast<std::size_t>(blk)] : nullptr;
      out.clear();
      if (next) next->clear();
      const std::size_t end = std::min(list.size(), (static_cast<std::size_t>(blk) + 1) * kBlock);
      // The box of the child the last members went to, kept in registers while the child
      // stays the same (min is exact: the same box in any order).
      std::size_t child_at = SIZE_MAX;
      double run_box[6];
      const auto flush = [&] {
        if (child_at == SIZE_MAX) return;
        double* b = bx + 6 * child_at;
        for (int d = 0; d < 6; ++d) b[d] = std::min(b[d], run_box[d]);
      };
      for (std::size_t k = static_cast<std::size_t>(blk) * kBlock; k < end; ++k) {
        const std::uint32_t i = list[k];
        const auto q = static_cast<std::size_t>(slot_[i]);
        const RoundNode& r = rn[q];
        if (r.first_bin < 0) {
          out.push_back(i);
          continue;
        }
        const int dg = round_digit(keys_[3 * i + r.hw], keys_[3 * i + r.lw], r);
        if (dg == r.cut && !r.done) {
          out.push_back(i);
        } else if (next) {
          const std::size_t child = 2 * q + (dg < r.cut ? 0 : 1);
          if (child != child_at) {
            flush();
            child_at = child;
            for (double& v : run_box) v = HUGE_VAL;
          }
          for (int d = 0; d < 3; ++d) {
            const double x = from_ordered(keys_[3 * i + static_cast<std::size_t>(d)]);
            run_box[d] = std::min(run_box[d], x);
            run_box[3 + d] = std::min(run_box[3 + d], -x);
          }
          place(i, child, *next);
        }
      }
      flush();
    }
  }
  concatenate(left_parts_, nb, cand_);
  if (first) first_left_ = cand_;
}

void HostPasses::candidates(bool any_round, std::vector<std::uint32_t>& index, std::vector<std::int32_t>& slot) {
  if (!any_round) cand_ = members_;   // every node at one position
  index = cand_;
  slot.resize(cand_.size());
  for (std::size_t k = 0; k < cand_.size(); ++k) slot[k] = slot_[cand_[k]];
}

// The members the first round left (all of them if no round ran): many at the top levels
// (the first digit there is mostly the exponent), so over blocks in parallel too. Then the
// next level's members: both ascending lists merged.
void HostPasses::finish_level(bool any_round, const std::vector<int>& axis, const std::vector<std::uint64_t>& cut_key,
                              const std::vector<int>& settled, const std::vector<std::uint32_t>& tied,
                              const std::vector<std::uint8_t>& tie_side, std::vector<double>& box) {
  for (std::size_t k = 0; k < tied.size(); ++k) tie_side_[tied[k]] = tie_side[k];
  const std::vector<std::uint32_t>& late = any_round ? first_left_ : members_;
  if (!any_round) next_parts_used_ = 0;
  const std::size_t n_late_blocks = blocks_of(late.size());
  if (left_parts_.size() < n_late_blocks) left_parts_.resize(n_late_blocks);
  int late_team = 1;
#pragma omp parallel
  {
#pragma omp single
    late_team = omp_get_num_threads();
    double* bx = local_box_.data[static_cast<std::size_t>(omp_get_thread_num())].data();
#pragma omp for schedule(dynamic, 1)
    for (std::ptrdiff_t blk = 0; blk < static_cast<std::ptrdiff_t>(n_late_blocks); ++blk) {
      std::vector<std::uint32_t>& next = left_parts_[static_cast<std::size_t>(blk)];
      next.clear();
      const std::size_t end = std::min(late.size(), (static_cast<std::size_t>(blk) + 1) * kBlock);
      for (std::size_t k = static_cast<std::size_t>(blk) * kBlock; k < end; ++k) {
        const std::uint32_t i = late[k];
        const auto q = static_cast<std::size_t>(slot_[i]);
        const int c = compare_key(&keys_[3 * i], axis[q], &cut_key[3 * q]);
        const int side = c < 0 ? 0 : (c > 0 || settled[q] ? 1 : tie_side_[i]);
        assign(i, 2 * q + static_cast<std::size_t>(side), bx, next);
      }
    }
  }
  // Every thread's boxes were reset at the level's start: combine all that may hold some.
  local_box_.team = std::max(any_round ? local_box_.team : 1, late_team);
  std::vector<std::uint32_t> late_next;
  concatenate(left_parts_, n_late_blocks, late_next);
  combine_boxes(6 * child_row_.size(), box);
  concatenate(parts_, next_parts_used_, cand_);
  members_.resize(cand_.size() + late_next.size());
  std::merge(cand_.begin(), cand_.end(), late_next.begin(), late_next.end(), members_.begin());
}

}  // namespace

std::unique_ptr<TopTreePasses> host_top_tree_passes(const std::vector<Vec3d>& positions) {
  return std::make_unique<HostPasses>(positions);
}

}  // namespace orbis
