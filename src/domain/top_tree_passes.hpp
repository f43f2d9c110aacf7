// The passes of the global top tree's build (domain/global_top_tree.hpp) over this rank's
// particles: what reads or writes them, on the host (domain/top_tree_host_passes.hpp) or on
// the device (gpu/global_top_tree_cuda.cuh). The build itself (GlobalTopTree::build with
// passes) takes every decision (boxes, axes, the radix selection's digits and thresholds,
// the tie rule, the children) from what the passes return, one code for both, so the same
// positions give the same tree either way.
//
// Words: a level's members are this rank's particles in its splitting nodes; a member's
// slot is its node's position among them (q); the candidates of a round are the members
// whose side the selection has not decided yet. Per splitting node q the children are 2q
// (left) and 2q + 1, in the order the next level holds them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "domain/top_tree_keys.hpp"

namespace orbis {

class TopTreePasses {
 public:
  virtual ~TopTreePasses() = default;
  // The particles' keys (ordered_bits of each coordinate) and this rank's box of all of
  // them into box[0..5] (lo, then -hi: +inf without particles). Every particle a member of
  // the root (slot 0) if root_splits, else placed in node 0.
  virtual void start(bool root_splits, double* box) = 0;
  // A level of splitting nodes begins: child_row[c] is child c's slot at the next level, or
  // -1 if it stops (its members are then placed in node child_index[c]); 2 entries a node.
  virtual void begin_level(const std::vector<std::int32_t>& child_row,
                           const std::vector<std::int32_t>& child_index) = 0;
  // A round's histograms, `bins` counts: for each candidate of a node q with rn[q].first_bin
  // >= 0 (first round: every member), one in [first_bin + its digit] (every other bin 0).
  // Host memory of the passes', valid until the next call; the build sums it over the ranks
  // in place (no copy of up to 2^19 counts a round on the host).
  virtual std::uint32_t* histogram(bool first, const std::vector<top_tree::RoundNode>& rn, std::size_t bins) = 0;
  // After the round's decisions (rn[q].cut, rn[q].done): the candidates left are those of
  // the nodes not counted (first_bin < 0) and those whose digit is the cut of an undecided node.
  // The first round sends every other member to its child (digit below the cut: left), with
  // its box; the later rounds only drop them.
  virtual void filter(bool first, const std::vector<top_tree::RoundNode>& rn) = 0;
  // The candidates after the last round (every member if no round ran), ascending, and
  // their slots.
  virtual void candidates(bool any_round, std::vector<std::uint32_t>& index, std::vector<std::int32_t>& slot) = 0;
  // The members the first round left (every member if no round ran) to their children by
  // node q's threshold cut_key[3q..3q+2] (rotated to axis[q]): below left, above right,
  // equal right if settled[q], else tie_side[k] for the candidate tied[k]. Then this rank's
  // boxes of all 2s children into box (per child lo, then -hi, +inf where it has none).
  virtual void finish_level(bool any_round, const std::vector<int>& axis, const std::vector<std::uint64_t>& cut_key,
                            const std::vector<int>& settled, const std::vector<std::uint32_t>& tied,
                            const std::vector<std::uint8_t>& tie_side, std::vector<double>& box) = 0;
  // Each particle's node (the shape index of the deepest node of depth <= d holding it).
  virtual std::vector<std::int32_t> take_particle_node() = 0;
};

}  // namespace orbis
