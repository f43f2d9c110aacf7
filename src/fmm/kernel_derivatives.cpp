#include "fmm/kernel_derivatives.hpp"

#include <cmath>

#include "core/error.hpp"

namespace orbis {

KernelDerivatives::KernelDerivatives(int order, double r_s, KernelKind kind, double cut_shift, double softening)
    : set_(order), r_s_(r_s), kind_(kind), cut_shift_(cut_shift), eps2_(softening * softening) {
  if (kind == KernelKind::truncated && !(r_s > 0)) fail("kernel derivatives: r_s = {} must be > 0", r_s);
  const int nc = set_.size();
  g_.resize(static_cast<std::size_t>(order) + 1);
  levels_.resize(static_cast<std::size_t>(order + 2) * nc);   // + 1: the unused level above the top
  steps_.resize(static_cast<std::size_t>(nc));
  for (int i = 1; i < nc; ++i) {
    auto n = set_[i];
    const int axis = n[0] > 0 ? 0 : (n[1] > 0 ? 1 : 2);
    auto m1 = n, m2 = n;
    m1[axis] -= 1;
    m2[axis] -= 2;
    steps_[static_cast<std::size_t>(i)] = {axis, set_.index(m1[0], m1[1], m1[2]),
                                           set_.index(m2[0], m2[1], m2[2]), static_cast<double>(n[axis] - 1)};
  }
}

void KernelDerivatives::evaluate(const Vec3d& R, double* out) {
  const int p = set_.order();
  const int nc = set_.size();
  radial_derivatives(kind_, norm(R), r_s_, p, g_.data(), cut_shift_, eps2_);
  // levels_[m * nc + i] = R^(m)_n for |n| <= p - m; m runs downward so R^(m+1) is ready.
  for (int m = p; m >= 0; --m) {
    double* cur = (m == 0) ? out : levels_.data() + static_cast<std::size_t>(m) * nc;
    const double* up = levels_.data() + static_cast<std::size_t>(m + 1) * nc;
    cur[0] = g_[static_cast<std::size_t>(m)];
    const int n_here = MultiIndexSet::count(p - m);
    for (int i = 1; i < n_here; ++i) {
      const Step& s = steps_[static_cast<std::size_t>(i)];
      double v = R[s.axis] * up[s.minus1];
      if (s.minus2 >= 0) v += s.factor * up[s.minus2];
      cur[i] = v;
    }
  }
}

}  // namespace orbis
