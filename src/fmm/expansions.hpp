// The FMM translation operators of the short-range solver (Cartesian, full moments):
//   M2L  L_k += sum_n (-1)^|n| M_n D_(n+k)(R),  R = z_target - z_source (image applied),
//   L2L  L'_k = sum_(n >= k) L_n d^(n-k)/(n-k)!, d = z_child - z_parent (exact),
//   L2P  grad phi(z + y) = sum_k L_(k+e) y^k/k!.
// and the two halves of a leaf-cell pair (vacuum boundaries, fmm/walk_pair.hpp), M2L with
// a point mass on one side:
//   P2L  L_k += D_k(R),  R = z_target - x_source (a unit mass at x_source), |k| <= p + 1,
//   M2P  grad phi(x) = sum_n (-1)^|n| M_n D_(n+e)(R),  R = x - z_source, |n| <= p
// (M2L into an order-1 expansion at x, read by L2P at y = 0). Both keep M2L's truncation
// |n| + |k| <= p + 1, so a leaf-cell pair too gives exactly opposite total forces.
// The potential of the sources near a target centre z is phi(z + y) = sum_k L_k y^k/k! with
// phi = sum_j m_j psi(|x - x_j|), psi = erfc(r/2r_s)/r (truncated) or 1/r (Newtonian,
// fmm/kernel_kind.hpp: only D differs); the acceleration is G grad phi.
//
// Orders: multipoles to p (|n| <= p), local expansion to p + 1, and terms |n| + |k| <= p + 1,
// so the force at a target uses every multipole up to order p (the convention of Dehnen
// 2002 and PKDGRAV's "order p"): D is needed to order p + 1. Applied to both members of a
// pair, this truncation gives exactly opposite total forces (momentum is conserved).
#pragma once
#include <vector>

#include "core/vec3.hpp"
#include "fmm/kernel_derivatives.hpp"
#include "tree/multi_index.hpp"

namespace orbis {

class FmmOperators {
 public:
  // r_s > 0 (Mpc/h) for the truncated kernel; not read for the Newtonian one. cut_shift: the
  // truncated kernel's shifted cut (fmm/kernel_derivatives.hpp; 0: sharp).
  // softening: the Newtonian kernel's Plummer eps (fmm/kernel_derivatives.hpp).
  FmmOperators(int multipole_order, double r_s, KernelKind kind = KernelKind::truncated, double cut_shift = 0,
               double softening = 0);

  int multipole_order() const { return multipole_set_.order(); }
  int local_order() const { return local_set_.order(); }
  const MultiIndexSet& multipole_set() const { return multipole_set_; }
  const MultiIndexSet& local_set() const { return local_set_; }
  int local_size() const { return local_set_.size(); }

  // Per-thread scratch for m2l (the derivative tensors and their recurrence levels).
  struct Scratch {
    explicit Scratch(const FmmOperators& ops)
        : kernel(ops.local_order(), ops.r_s_, ops.kind_, ops.cut_shift_, ops.softening_),
          d(static_cast<std::size_t>(ops.local_size())),
          signed_m(static_cast<std::size_t>(ops.multipole_set().size())) {}
    KernelDerivatives kernel;
    std::vector<double> d, signed_m;
  };

  // local[0 .. local_size()) += the M2L of `multipole` (multipole_set layout) over R.
  void m2l(const double* multipole, const Vec3d& R, double* local, Scratch& scratch) const;
  // child[...] += parent[...] translated by d = z_child - z_parent.
  void l2l(const double* parent, const Vec3d& d, double* child) const;
  // grad phi at offset y from the expansion centre.
  Vec3d l2p(const double* local, const Vec3d& y) const;
  // P2L: local[0 .. local_size()) += D_k(R), a unit mass at R from the expansion centre's
  // opposite side (R = z_target - x_source != 0).
  void p2l(const Vec3d& R, double* local, Scratch& scratch) const;
  // M2P: grad phi at x of `multipole` (multipole_set layout) about z, R = x - z != 0.
  Vec3d m2p(const double* multipole, const Vec3d& R, Scratch& scratch) const;

 private:
  // M2L terms grouped by local index k: terms [k_start_[k], k_start_[k+1]) hold, for each
  // multipole index n with |n| + |k| <= p + 1, n and the local-set index of n + k. Grouping
  // lets each L_k be summed in a register (the scattered form was 3x slower).
  struct M2LTerm {
    int n, kn;
  };
  MultiIndexSet multipole_set_, local_set_;
  MultiIndexSet gradient_set_;    // order p: the y^k/k! that multiply L_(k+e) in L2P
  double r_s_;
  KernelKind kind_;
  double cut_shift_;
  double softening_;
  std::vector<M2LTerm> m2l_terms_;
  std::vector<int> k_start_;
  std::vector<double> multipole_sign_;   // (-1)^|n|
  std::vector<ShiftTerm> l2l_terms_;
  // plus_e_[d][i]: local index of gradient_set_[i] + e_d (gradient_set_ is laid out as the
  // multipole set: M2P reads it with multipole indices too)
  std::vector<int> plus_e_[3];
};

}  // namespace orbis
