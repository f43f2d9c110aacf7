#include "fmm/expansions.hpp"

namespace orbis {

FmmOperators::FmmOperators(int multipole_order, double r_s)
    : multipole_set_(multipole_order),
      local_set_(multipole_order + 1),
      gradient_set_(multipole_order),
      r_s_(r_s) {
  const int p_local = local_set_.order();
  for (int k = 0; k < local_set_.size(); ++k) {
    const auto& kk = local_set_[k];
    for (int n = 0; n < multipole_set_.size(); ++n) {
      const auto& nn = multipole_set_[n];
      if (local_set_.degree(k) + multipole_set_.degree(n) > p_local) continue;
      const int kn = local_set_.index(kk[0] + nn[0], kk[1] + nn[1], kk[2] + nn[2]);
      m2l_terms_.push_back({k, n, kn, (multipole_set_.degree(n) % 2) ? -1.0 : 1.0});
    }
  }
  l2l_terms_ = shift_terms(local_set_);
  for (int d = 0; d < 3; ++d) {
    plus_e_[d].resize(static_cast<std::size_t>(gradient_set_.size()));
    for (int i = 0; i < gradient_set_.size(); ++i) {
      auto n = gradient_set_[i];
      n[d] += 1;
      plus_e_[d][static_cast<std::size_t>(i)] = local_set_.index(n[0], n[1], n[2]);
    }
  }
}

void FmmOperators::m2l(const double* multipole, const Vec3d& R, double* local, Scratch& scratch) const {
  scratch.kernel.evaluate(R, scratch.d.data());
  const double* d = scratch.d.data();
  for (const M2LTerm& t : m2l_terms_) local[t.k] += t.sign * multipole[t.n] * d[t.kn];
}

void FmmOperators::l2l(const double* parent, const Vec3d& d, double* child) const {
  double mono[MultiIndexSet::count(MultiIndexSet::kMaxOrder)];
  scaled_monomials(local_set_, d.x, d.y, d.z, mono);
  for (const ShiftTerm& t : l2l_terms_) child[t.k] += parent[t.n] * mono[t.diff];
}

Vec3d FmmOperators::l2p(const double* local, const Vec3d& y) const {
  double mono[MultiIndexSet::count(MultiIndexSet::kMaxOrder)];
  scaled_monomials(gradient_set_, y.x, y.y, y.z, mono);
  Vec3d g{0, 0, 0};
  for (int i = 0; i < gradient_set_.size(); ++i) {
    const auto s = static_cast<std::size_t>(i);
    g.x += local[plus_e_[0][s]] * mono[i];
    g.y += local[plus_e_[1][s]] * mono[i];
    g.z += local[plus_e_[2][s]] * mono[i];
  }
  return g;
}

}  // namespace orbis
