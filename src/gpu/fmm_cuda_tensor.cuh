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
// entry to emit(integral_constant<int, i>, D_i), i its index in the multi-index layout. T is
// the arithmetic: double, or float for the particle-node pairs (P2L, M2P).
template <int Q, std::size_t I, typename T, typename Emit>
__device__ __forceinline__ void tensor_step(T* lev, const T* g, const T* R, Emit& emit) {
  constexpr ct::RecOp op = ct::kRec<Q>[I];
  T v;
  if constexpr (op.up1 < 0) {
    v = g[op.m];
  } else if constexpr (op.up2 < 0) {
    v = R[op.axis] * lev[op.up1];
  } else if constexpr (op.factor == 1.0) {
    v = R[op.axis] * lev[op.up1] + lev[op.up2];
  } else {
    v = R[op.axis] * lev[op.up1] + static_cast<T>(op.factor) * lev[op.up2];
  }
  if constexpr (op.m == 0) {
    emit(std::integral_constant<int, op.dst>{}, v);   // level 0 is stored first: dst is the index
  } else {
    lev[op.dst] = v;
  }
}

template <int Q, typename T, typename Emit, std::size_t... I>
__device__ __forceinline__ void newtonian_tensor(const T* g, const T* R, Emit& emit, std::index_sequence<I...>) {
  T lev[ct::rec_total<Q>()];   // levels 1 .. Q are read; level 0's slots stay unused
  (tensor_step<Q, I>(lev, g, R, emit), ...);
}

__device__ __forceinline__ double reciprocal_sqrt(double x) { return rsqrt(x); }
__device__ __forceinline__ float reciprocal_sqrt(float x) { return rsqrtf(x); }

// The radial factors g_m = (-1)^m (2m-1)!! / s^(2m+1), s^2 = r^2 + eps^2, m <= Q (those of
// fmm/kernel_derivatives.hpp's newtonian_radial_derivatives) from r^2 itself and one
// reciprocal square root: no square root, no division (the host's take one of each and
// another division; in double they agree to an ulp or two).
template <int Q, typename T>
__device__ __forceinline__ void newtonian_radial(T r2, T eps2, T* g) {
  const T s2 = r2 + eps2;
  const T inv_s = reciprocal_sqrt(s2);
  const T inv_s2 = inv_s * inv_s;
  T b = inv_s;
  g[0] = b;
#pragma unroll
  for (int m = 1; m <= Q; ++m) {
    b = static_cast<T>(2 * m - 1) * b * inv_s2;
    g[m] = m % 2 == 1 ? -b : b;
  }
}

// emit(i, D_i(R)) for every |i| <= Q, in the recurrence's order, in T's arithmetic; eps2 the
// softening squared.
template <int Q, typename T, typename Emit>
__device__ __forceinline__ void newtonian_tensor(T rx, T ry, T rz, T eps2, Emit&& emit) {
  T g[Q + 1];
  newtonian_radial<Q>(rx * rx + ry * ry + rz * rz, eps2, g);
  const T r[3] = {rx, ry, rz};
  newtonian_tensor<Q>(g, r, emit, std::make_index_sequence<ct::rec_total<Q>()>{});
}

// D_n at a unit distance, s^2 = |u|^2 + eps^2/s^2 = 1 (g_m = (-1)^m (2m-1)!!): D_n(R) is
// s^-(|n|+1) times D_n at u = R / s, whose entries are at most (2Q-1)!! whatever the
// distance, so float holds them where D_n(R) itself would overflow (order 6 near s ~ 1e-3)
// or lose its digits to denormals (far away): the float pairs (fmm_cuda_vacuum.cu) scale
// their terms instead.
template <int Q, typename Emit>
__device__ __forceinline__ void newtonian_tensor_unit(float ux, float uy, float uz, Emit&& emit) {
  float g[Q + 1];
  float b = 1;
  g[0] = 1;
#pragma unroll
  for (int m = 1; m <= Q; ++m) {
    b *= static_cast<float>(2 * m - 1);
    g[m] = m % 2 == 1 ? -b : b;
  }
  const float u[3] = {ux, uy, uz};
  newtonian_tensor<Q>(g, u, emit, std::make_index_sequence<ct::rec_total<Q>()>{});
}

// The same in double from a vector (M2L).
template <int Q, typename Emit>
__device__ __forceinline__ void newtonian_tensor(const Vec3d& R, double eps2, Emit&& emit) {
  newtonian_tensor<Q>(R.x, R.y, R.z, eps2, emit);
}

}  // namespace orbis::gpu::fmm_detail
