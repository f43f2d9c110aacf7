// Rank domains as runs of the global ORB tree's top nodes (issue #17; the plan in
// docs/design.md, "Ranks: domains and ghosts"): the G leaves of the top tree
// (domain/global_top_tree.hpp, levels 0..d, G = 2^d when every depth-d node exists), numbered
// in tree order, are cut into one contiguous run per rank, rank r holding the groups
// [begin(r), end(r)). Tree order is spatially coherent (consecutive nodes are ORB siblings),
// so a run is a compact union of nodes. A run may be empty (more ranks than groups, or a
// rank's share of the weight smaller than its neighbours' groups).
//
// The runs balance the groups' weight (the measured work of their particles): the cut before
// rank r is the group boundary whose prefix weight comes nearest to r/P of the total, ties to
// the lower boundary; the same on every rank from the same weights. Within a memory limit:
// work balance gives the ranks of cheap (underdense) regions more particles, and every rank
// holds its particles (and their ghosts) in host and device memory planned for about the
// mean, so no rank may hold more than kMaxParticleShare times the mean particle count; where
// the work's runs would, the weight blends in the particle count, ever more strongly, until
// the runs keep the limit (counts alone, at worst: then a rank misses N/P by at most one
// group).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace orbis {

class NodeDomains {
 public:
  // One rank holding every group of a top tree of `groups` groups (0: none known yet).
  explicit NodeDomains(std::uint32_t groups = 0) : begin_{0, groups} {}

  // The most particles a rank may hold, as a multiple of the mean.
  static constexpr double kMaxParticleShare = 1.5;

  // The runs of `ranks` ranks over weight.size() groups (each weight >= 0; all zero: equal
  // group counts) holding count[g] particles each (count.size() == weight.size()).
  static NodeDomains balance(const std::vector<double>& weight, const std::vector<std::uint64_t>& count, int ranks);

  int ranks() const { return static_cast<int>(begin_.size()) - 1; }
  std::uint32_t groups() const { return begin_.back(); }
  std::uint32_t begin(int rank) const { return begin_[static_cast<std::size_t>(rank)]; }
  std::uint32_t end(int rank) const { return begin_[static_cast<std::size_t>(rank) + 1]; }
  // The rank whose run holds `group` (< groups()).
  int owner(std::uint32_t group) const;

  // The runs as bytes (checkpoints: a restart keeps the runs, which the measured work of
  // earlier steps decided) and back; from_bytes checks the layout and the rank count (an
  // Error naming `what` otherwise).
  std::string to_bytes() const;
  static NodeDomains from_bytes(const std::string& bytes, int ranks, const std::string& what);

  // The most particles any run holds, the groups holding count[g] each.
  std::uint64_t largest_count(const std::vector<std::uint64_t>& count) const;

  bool operator==(const NodeDomains& o) const { return begin_ == o.begin_; }

 private:
  // The runs balancing weight alone (no particle limit).
  static NodeDomains balance_weight(const std::vector<double>& weight, int ranks);

  std::vector<std::uint32_t> begin_;   // ranks() + 1 ascending boundaries, 0 .. groups()
};

}  // namespace orbis
