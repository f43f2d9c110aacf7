// The Newtonian derivative tensor D_n(R) of 1/sqrt(r^2 + eps^2), |n| <= Q, one thread each,
// for the device's vacuum far field (gpu/fmm_cuda_vacuum.cu: M2L, P2L, M2P): the McMurchie-Davidson
// recurrence of fmm/derivative_recurrence_ct.hpp unrolled at compile time, so every entry
// lives in a register, and the entries of level 0 (the tensor itself) handed to the caller
// as each is made instead of being stored: only the level above is ever held (count(Q - 1)
// values), which keeps order 5 (p = 4) in registers. A warp then evaluates 32 pairs at once,
// where the warp-wide recurrence (fmm_cuda_kernels.cuh) evaluates one a level at a time.
#pragma once
#include <cstddef>
#include <type_traits>
#include <utility>

#include "core/vec3.hpp"
#include "fmm/derivative_recurrence_ct.hpp"
#include "fmm/multi_index_ct.hpp"

namespace orbis::gpu::fmm_detail {

// One step of the recurrence (ct::kRec<Q>[I]): a level >= 1 entry into lev, a level-0
// entry to emit(integral_constant<int, i>, D_i), i its index in the multi-index layout.
template <int Q, std::size_t I, typename Emit>
__device__ __forceinline__ void tensor_step(double* lev, const double* g, const double* R, Emit& emit) {
  constexpr ct::RecOp op = ct::kRec<Q>[I];
  double v;
  if constexpr (op.up1 < 0) {
    v = g[op.m];
  } else if constexpr (op.up2 < 0) {
    v = R[op.axis] * lev[op.up1];
  } else if constexpr (op.factor == 1.0) {
    v = R[op.axis] * lev[op.up1] + lev[op.up2];
  } else {
    v = R[op.axis] * lev[op.up1] + op.factor * lev[op.up2];
  }
  if constexpr (op.m == 0) {
    emit(std::integral_constant<int, op.dst>{}, v);   // level 0 is stored first: dst is the index
  } else {
    lev[op.dst] = v;
  }
}

template <int Q, typename Emit, std::size_t... I>
__device__ __forceinline__ void newtonian_tensor(const double* g, const double* R, Emit& emit, std::index_sequence<I...>) {
  double lev[ct::rec_total<Q>()];   // levels 1 .. Q are read; level 0's slots stay unused
  (tensor_step<Q, I>(lev, g, R, emit), ...);
}

// The radial factors g_m = (-1)^m (2m-1)!! / s^(2m+1), s^2 = r^2 + eps^2, m <= Q (those of
// fmm/kernel_derivatives.hpp's newtonian_radial_derivatives) from r^2 itself and one
// reciprocal square root: no square root, no division (the host's take one of each and
// another division; they agree to an ulp or two).
template <int Q>
__device__ __forceinline__ void newtonian_radial(double r2, double eps2, double* g) {
  const double s2 = r2 + eps2;
  const double inv_s = rsqrt(s2);
  const double inv_s2 = inv_s * inv_s;
  double b = inv_s;
  g[0] = b;
#pragma unroll
  for (int m = 1; m <= Q; ++m) {
    b = (2 * m - 1) * b * inv_s2;
    g[m] = m % 2 == 1 ? -b : b;
  }
}

// emit(i, D_i(R)) for every |i| <= Q, in the recurrence's order; eps2 the softening squared.
template <int Q, typename Emit>
__device__ __forceinline__ void newtonian_tensor(const Vec3d& R, double eps2, Emit&& emit) {
  double g[Q + 1];
  newtonian_radial<Q>(norm2(R), eps2, g);
  const double r[3] = {R.x, R.y, R.z};
  newtonian_tensor<Q>(g, r, emit, std::make_index_sequence<ct::rec_total<Q>()>{});
}

}  // namespace orbis::gpu::fmm_detail
