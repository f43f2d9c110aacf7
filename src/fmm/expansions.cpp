#include "fmm/expansions.hpp"

namespace orbis {

FmmOperators::FmmOperators(int multipole_order, double r_s, KernelKind kind, double cut_shift, double softening)
    : multipole_set_(multipole_order),
      local_set_(multipole_order + 1),
      gradient_set_(multipole_order),
      r_s_(r_s),
      kind_(kind),
      cut_shift_(cut_shift),
      softening_(softening) {
  const int p_local = local_set_.order();
  for (int k = 0; k < local_set_.size(); ++k) {
    k_start_.push_back(static_cast<int>(m2l_terms_.size()));
    const auto& kk = local_set_[k];
    for (int n = 0; n < multipole_set_.size(); ++n) {
      const auto& nn = multipole_set_[n];
      if (local_set_.degree(k) + multipole_set_.degree(n) > p_local) continue;
      m2l_terms_.push_back({n, local_set_.index(kk[0] + nn[0], kk[1] + nn[1], kk[2] + nn[2])});
    }
  }
  k_start_.push_back(static_cast<int>(m2l_terms_.size()));
  for (int n = 0; n < multipole_set_.size(); ++n)
    multipole_sign_.push_back((multipole_set_.degree(n) % 2) ? -1.0 : 1.0);
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
  double* sm = scratch.signed_m.data();
  for (std::size_t n = 0; n < multipole_sign_.size(); ++n) sm[n] = multipole_sign_[n] * multipole[n];
  const M2LTerm* terms = m2l_terms_.data();
  const int nl = local_set_.size();
  for (int k = 0; k < nl; ++k) {
    // Four partial sums: a single one is bound by the latency of the dependent additions.
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int q = k_start_[static_cast<std::size_t>(k)];
    const int end = k_start_[static_cast<std::size_t>(k) + 1];
    for (; q + 4 <= end; q += 4) {
      a0 += sm[terms[q].n] * d[terms[q].kn];
      a1 += sm[terms[q + 1].n] * d[terms[q + 1].kn];
      a2 += sm[terms[q + 2].n] * d[terms[q + 2].kn];
      a3 += sm[terms[q + 3].n] * d[terms[q + 3].kn];
    }
    for (; q < end; ++q) a0 += sm[terms[q].n] * d[terms[q].kn];
    local[k] += (a0 + a1) + (a2 + a3);
  }
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

void FmmOperators::p2l(const Vec3d& R, double* local, Scratch& scratch) const {
  scratch.kernel.evaluate(R, scratch.d.data());
  const double* d = scratch.d.data();
  const int nl = local_set_.size();
  for (int k = 0; k < nl; ++k) local[k] += d[k];
}

Vec3d FmmOperators::m2p(const double* multipole, const Vec3d& R, Scratch& scratch) const {
  scratch.kernel.evaluate(R, scratch.d.data());
  const double* d = scratch.d.data();
  Vec3d g{0, 0, 0};
  for (std::size_t n = 0; n < multipole_sign_.size(); ++n) {
    const double sm = multipole_sign_[n] * multipole[n];
    g.x += sm * d[plus_e_[0][n]];
    g.y += sm * d[plus_e_[1][n]];
    g.z += sm * d[plus_e_[2][n]];
  }
  return g;
}

}  // namespace orbis
