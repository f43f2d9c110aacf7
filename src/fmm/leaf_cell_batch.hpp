// The two halves of the vacuum walk's leaf-cell pairs (fmm/walk_pair.hpp) eight particles at
// a time in SIMD lanes, for the CPU far field: the operators of FmmOperators::p2l and ::m2p
// (fmm/expansions.hpp; the Newtonian kernel, the same multi-index layouts and truncation),
// written for speed. Per batch of eight separations R: the radial factors of 1/r, then the
// derivative tensors D_n(R), |n| <= p + 1, by the recurrence of fmm/kernel_derivatives.hpp
// (unrolled at compile time for each order, as fmm/m2l_batch.cpp's, the eight lanes at
// once), then
//   P2L  lane sums of D_k(R) for every local index k, added to the expansion in a fixed
//        order at the end of the call;
//   M2P  per lane, sum_n (-1)^|n| M_n D_(n+e)(R): the field of one node at eight particles.
// The result depends on the order of the R's alone (not on the thread count); in the last
// bits on the CPU's build of the loop (x86-64-v4, v3 or baseline, fused multiply-adds).
#pragma once
#include <cstddef>
#include <vector>

#include "core/vec3.hpp"

namespace orbis {

class LeafCellBatch {
 public:
  static constexpr int kLanes = 8;

  // multipole_order p in 1..6 (multipoles to p, local expansions to p + 1); softening: the
  // Plummer eps of the Newtonian kernel 1/sqrt(r^2 + eps^2) (fmm/kernel_derivatives.hpp).
  explicit LeafCellBatch(int multipole_order, double softening = 0);

  int multipole_order() const { return order_; }

  // P2L: local[k] += sum_q w_q D_k(R[q]) for every local index k (order p + 1 layout):
  // masses w_q (in units of the reference mass; weights null: all 1) at z - R[q] expanded
  // about z; |R[q]| > 0.
  void p2l(const Vec3d* R, std::size_t n, double* local, const double* weights = nullptr) const;
  // M2P: out[q] += sum_n (-1)^|n| M_n D_(n+e)(R[q]) (e = x, y, z): grad phi of `multipole`
  // (order p layout, about z) at z + R[q]; |R[q]| > 0.
  void m2p(const double* multipole, const Vec3d* R, std::size_t n, Vec3d* out) const;

  using P2LKernel = void (*)(const Vec3d*, const double*, std::size_t, double*, double);
  using M2PKernel = void (*)(const double*, const Vec3d*, std::size_t, Vec3d*, double);

 private:
  int order_;
  double eps2_;   // softening squared
  P2LKernel p2l_ = nullptr;   // the order's unrolled kernels, for the CPU's build
  M2PKernel m2p_ = nullptr;
};

}  // namespace orbis
