// Tiled CPU P2P kernels: layout, dispatch and the OpenMP driver (the kernels themselves are
// in p2p_cpu_tiled_avx512.cpp).
#include "fmm/p2p_cpu_tiled.hpp"

#include "fmm/p2p_cpu_tiled_impl.hpp"

namespace orbis::p2p_tiled {

void CoefLayout::build(const TruncationTable<float>& table) {
  size = table.size();
  c01.resize(2 * std::size_t(size));
  c23.resize(2 * std::size_t(size));
  for (int i = 0; i < size; ++i) {
    c01[2 * i] = table.coef(0)[i];
    c01[2 * i + 1] = table.coef(1)[i];
    c23[2 * i] = table.coef(2)[i];
    c23[2 * i + 1] = table.coef(3)[i];
  }
  c0 = table.coef(0);
  c2 = table.coef(2);
  c4 = table.coef(4);
}

bool available(int simd_level, int taylor_order) {
  return taylor_order >= 0 && taylor_order <= 4 && simd_level == 4 && have_avx512_kernels();
}

void run(int simd_level, int taylor_order, const Job& job) {
  (void)simd_level;
  run_avx512(taylor_order, job);
}

}  // namespace orbis::p2p_tiled
