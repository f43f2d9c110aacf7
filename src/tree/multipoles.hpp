// Multipole moments of the ORB tree nodes (P2M at the leaves, M2M upward).
//
// Convention: full (not traceless) Cartesian moments about the node's centre z (the tree's
// centre of its particles, counted equally),
//   M_n = sum_j m_j (x_j - z)^n / n!,   |n| <= p,
// with masses in units of the particle mass (so M_0 = count; with weights, the reference
// mass: M_0 = the sum of the weights). Traceless (detraced) moments
// would save storage, but they rely on the kernel being harmonic (Laplace's equation
// removes the traces of its derivative tensors); the short-range kernel erfc(r/2r_s)/r is
// not harmonic, so its derivative tensors have traces and the full moments are required
// for an expansion that converges to the truncated sum. The dipole M_(1) vanishes about the
// centre of mass up to round-off; it is kept, so the expansion centre could change freely:
// with individual masses (weights) z is not the centre of mass and the dipole is not zero,
// and the expansions stay exact to order p all the same.
#pragma once
#include <optional>
#include <vector>

#include "tree/multi_index.hpp"
#include "tree/orb_tree.hpp"

namespace orbis {

class Multipoles {
 public:
  // P2M for every leaf, then M2M level by level up to the root. order p in 0..kMaxOrder.
  // With `needed` (one flag per node): only the nodes flagged and their descendants (what
  // M2M needs); the moments of the other nodes are left unspecified. With `weights` (tree
  // order, one per particle): particle j's mass is weights[j] (isolated systems of
  // individual masses); null: 1 each.
  void compute(const OrbTree& tree, int order, const std::vector<unsigned char>* needed = nullptr,
               const std::vector<double>* weights = nullptr);

  // Tree levels with fewer nodes than this are processed by one thread.
  static constexpr std::size_t kParallelLevel = 256;

  int order() const { return set_ ? set_->order() : -1; }
  const MultiIndexSet& set() const { return *set_; }
  int stride() const { return set_->size(); }
  const double* of(int node) const { return m_.data() + static_cast<std::size_t>(node) * stride(); }

 private:
  std::vector<double> m_;
  std::vector<ShiftTerm> shift_;
  std::optional<MultiIndexSet> set_;   // rebuilt only when the order changes
  std::vector<unsigned char> wanted_;  // needed or below a needed node
};

}  // namespace orbis
