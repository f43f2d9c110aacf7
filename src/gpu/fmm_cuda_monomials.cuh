// The scaled monomials s^n / n! of one point, every |n| <= P in registers (P a template
// argument, the loop unrolled at compile time), for the device's per-thread P2M and L2P
// (gpu/fmm_cuda.cu). Each entry is made as the host's scaled_monomials (tree/multi_index.hpp)
// makes it: from the entry one lower in its first non-zero axis (x, then y, then z), one
// rounded multiply and one rounded divide, so a thread's monomials are the host's bits.
#pragma once
#include "fmm/multi_index_ct.hpp"

namespace orbis::gpu::fmm_detail {

template <int P>
__device__ __forceinline__ void scaled_monomials(double sx, double sy, double sz, double* out) {
  out[0] = 1.0;
  ct::unroll<ct::count(P)>([&](auto i) {
    constexpr int idx = static_cast<int>(decltype(i)::value);
    if constexpr (idx > 0) {
      constexpr ct::MI n = ct::kAll[idx];
      if constexpr (n.a > 0) {
        out[idx] = __dmul_rn(out[ct::index(n.a - 1, n.b, n.c)], sx) / n.a;
      } else if constexpr (n.b > 0) {
        out[idx] = __dmul_rn(out[ct::index(n.a, n.b - 1, n.c)], sy) / n.b;
      } else {
        out[idx] = __dmul_rn(out[ct::index(n.a, n.b, n.c - 1)], sz) / n.c;
      }
    }
  });
}

}  // namespace orbis::gpu::fmm_detail
