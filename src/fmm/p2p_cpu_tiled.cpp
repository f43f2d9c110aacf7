// Tiled CPU P2P kernels: table layout and dispatch (the kernels: p2p_cpu_tiled_kernel.inl,
// instantiated per instruction set in p2p_cpu_tiled_<isa>.cpp).
#include "fmm/p2p_cpu_tiled.hpp"

#include "fmm/p2p_cpu_tiled_impl.hpp"

namespace orbis::p2p_tiled {

void CoefLayout::build(const TruncationTable<float>& table) {
  size = table.size();
  t = table.t();
  c01.resize(2 * std::size_t(size));
  te.resize(2 * std::size_t(size));
  for (int i = 0; i < size; ++i) {
    c01[2 * i] = table.coef(0)[i];
    c01[2 * i + 1] = table.coef(1)[i];
    te[2 * i] = table.t()[i];
    te[2 * i + 1] = static_cast<float>(double(table.e()[i]) * table.spacing());
  }
}

bool available(int simd_level, int taylor_order) {
  if ((taylor_order < 0 || taylor_order > 4) && taylor_order != kNoTruncation) return false;
  return (simd_level == 4 && have_avx512_kernels()) || (simd_level == 3 && have_avx2_kernels());
}

void run(int simd_level, int taylor_order, const Job& job) {
  if (simd_level == 4) run_avx512(taylor_order, job);
  else run_avx2(taylor_order, job);
}

}  // namespace orbis::p2p_tiled
