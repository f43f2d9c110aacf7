#include "tree/multipoles.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace orbis {

void Multipoles::compute(const OrbTree& tree, int order, const std::vector<unsigned char>* needed,
                         const std::vector<double>* weights) {
  if (!set_ || set_->order() != order) {
    set_.emplace(order);
    shift_ = shift_terms(*set_);
  }
  const MultiIndexSet& set = *set_;
  const int nc = set.size();
  const auto& nodes = tree.nodes();
  const auto& pos = tree.positions();
  const auto& levels = tree.levels();
  // Sized only: each computed node's moments are zeroed by the thread that computes them.
  m_.resize(nodes.size() * static_cast<std::size_t>(nc));
  if (needed && needed->size() != nodes.size())
    fail("multipoles: {} 'needed' flags for {} nodes", needed->size(), nodes.size());
  if (weights && weights->size() != pos.size())
    fail("multipoles: {} weights for {} particles", weights->size(), pos.size());
  // wanted: needed, or a descendant of a needed node (top-down over the levels).
  wanted_.resize(nodes.size());
  // (Small levels serially, here and below: a parallel region per level costs more than
  // its few nodes, most of all when the steps of block time steps come many and small.)
  for (std::size_t lev = 0; lev < levels.size(); ++lev) {
    const auto& list = levels[lev];
#pragma omp parallel for schedule(static) if (list.size() >= kParallelLevel)
    for (long q = 0; q < static_cast<long>(list.size()); ++q) {
      const auto i = static_cast<std::size_t>(list[static_cast<std::size_t>(q)]);
      const int parent = nodes[i].parent;
      wanted_[i] = !needed || (*needed)[i] || (parent >= 0 && wanted_[static_cast<std::size_t>(parent)]);
    }
  }

  // P2M: each leaf sums its own particles in tree order (deterministic for any thread count).
  const long n_leaves = static_cast<long>(tree.leaves().size());
#pragma omp parallel
  {
    std::vector<double> mono(static_cast<std::size_t>(nc));
#pragma omp for schedule(dynamic, 64)
    for (long l = 0; l < n_leaves; ++l) {
      const int node_index = tree.leaf_node()[static_cast<std::size_t>(l)];
      if (!wanted_[static_cast<std::size_t>(node_index)]) continue;
      const TreeNode& node = nodes[static_cast<std::size_t>(node_index)];
      double* m = m_.data() + static_cast<std::size_t>(node_index) * nc;
      std::fill_n(m, nc, 0.0);
      for (std::uint32_t t = node.first; t < node.first + node.count; ++t) {
        const Vec3d s = pos[t] - node.centre;
        scaled_monomials(set, s.x, s.y, s.z, mono.data());
        if (weights) {
          const double w = (*weights)[t];
          for (int i = 0; i < nc; ++i) m[i] += w * mono[static_cast<std::size_t>(i)];
        } else {
          for (int i = 0; i < nc; ++i) m[i] += mono[static_cast<std::size_t>(i)];
        }
      }
    }
  }

  // M2M, deepest level first: a parent sums its two children shifted to its centre,
  // M_n(parent) = sum_{k <= n} M_k(child) d^(n-k)/(n-k)!, d = z_child - z_parent (exact).
  for (std::size_t lev = levels.size(); lev-- > 0;) {
    const auto& list = levels[lev];
    const long n_here = static_cast<long>(list.size());
#pragma omp parallel if (list.size() >= kParallelLevel)
    {
      std::vector<double> mono(static_cast<std::size_t>(nc));
#pragma omp for schedule(static)
      for (long q = 0; q < n_here; ++q) {
        const int index = list[static_cast<std::size_t>(q)];
        const TreeNode& node = nodes[static_cast<std::size_t>(index)];
        if (node.is_leaf() || !wanted_[static_cast<std::size_t>(index)]) continue;
        double* m = m_.data() + static_cast<std::size_t>(index) * nc;
        std::fill_n(m, nc, 0.0);
        for (int child : {node.left, node.right}) {
          const TreeNode& c = nodes[static_cast<std::size_t>(child)];
          const Vec3d d = c.centre - node.centre;
          scaled_monomials(set, d.x, d.y, d.z, mono.data());
          const double* mc = m_.data() + static_cast<std::size_t>(child) * nc;
          for (const ShiftTerm& t : shift_) m[t.n] += mc[t.k] * mono[static_cast<std::size_t>(t.diff)];
        }
      }
    }
  }
}

}  // namespace orbis
