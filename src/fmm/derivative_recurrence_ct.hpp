// The McMurchie-Davidson recurrence of the derivative tensors (fmm/kernel_derivatives.hpp) as
// compile-time steps, for the CPU's batched far-field loops (fmm/m2l_batch.cpp,
// fmm/leaf_cell_batch.cpp): R^(m)_n = R_axis R^(m+1)_(n-e) + (n_axis - 1) R^(m+1)_(n-2e),
// R^(m)_0 = g_m, levels m = Q .. 0 stored one after the other (level 0 first: D_n). Each step's
// indices are constants, so the compiler unrolls the whole recurrence over any vector type V
// (a GCC vector of lanes) with no index arithmetic.
#pragma once
#include <array>
#include <cstddef>
#include <utility>

#include "fmm/multi_index_ct.hpp"

namespace orbis::ct {

struct RecOp {
  int dst = 0, up1 = -1, up2 = -1, axis = 0, m = 0;
  double factor = 0;
};

template <int Q>
constexpr int rec_total() {
  int t = 0;
  for (int m = 0; m <= Q; ++m) t += count(Q - m);
  return t;
}

template <int Q>
constexpr std::array<RecOp, rec_total<Q>()> make_rec() {
  std::array<RecOp, rec_total<Q>()> ops{};
  int off[Q + 2] = {};
  for (int m = 0; m <= Q; ++m) off[m + 1] = off[m] + count(Q - m);
  int o = 0;
  for (int m = Q; m >= 0; --m)
    for (int i = 0; i < count(Q - m); ++i) {
      RecOp op;
      op.dst = off[m] + i;
      op.m = m;
      if (i > 0) {
        const MI n = kAll[static_cast<std::size_t>(i)];
        const int axis = n.a > 0 ? 0 : (n.b > 0 ? 1 : 2);
        int v[3] = {n.a, n.b, n.c};
        op.axis = axis;
        op.factor = v[axis] - 1;
        v[axis] -= 1;
        op.up1 = off[m + 1] + index(v[0], v[1], v[2]);
        if (v[axis] >= 1) {
          v[axis] -= 1;
          op.up2 = off[m + 1] + index(v[0], v[1], v[2]);
        }
      }
      ops[static_cast<std::size_t>(o++)] = op;
    }
  return ops;
}
template <int Q> inline constexpr auto kRec = make_rec<Q>();

#if defined(__GNUC__)
#define ORBIS_REC_INLINE [[gnu::always_inline]] inline
#else
#define ORBIS_REC_INLINE inline
#endif

template <int Q, std::size_t I, typename V>
ORBIS_REC_INLINE void rec_step(V* lev, const V* g, const V* R) {
  constexpr RecOp op = kRec<Q>[I];
  if constexpr (op.up1 < 0) {
    lev[op.dst] = g[op.m];
  } else if constexpr (op.up2 < 0) {
    lev[op.dst] = R[op.axis] * lev[op.up1];
  } else if constexpr (op.factor == 1.0) {
    lev[op.dst] = R[op.axis] * lev[op.up1] + lev[op.up2];
  } else {
    lev[op.dst] = R[op.axis] * lev[op.up1] + op.factor * lev[op.up2];
  }
}

// Every level of the recurrence for the order-Q tensors: lev holds rec_total<Q>() vectors, g
// the radial factors g_0 .. g_Q, R the three components.
template <int Q, typename V, std::size_t... I>
ORBIS_REC_INLINE void recurrence(V* lev, const V* g, const V* R, std::index_sequence<I...>) {
  (rec_step<Q, I>(lev, g, R), ...);
}
template <int Q, typename V>
ORBIS_REC_INLINE void recurrence(V* lev, const V* g, const V* R) {
  recurrence<Q>(lev, g, R, std::make_index_sequence<rec_total<Q>()>{});
}

#undef ORBIS_REC_INLINE

}  // namespace orbis::ct
