// Internal to the tiled CPU P2P: one entry point per SIMD level's kernel file.
#pragma once
#include "fmm/p2p_cpu_tiled.hpp"

namespace orbis::p2p_tiled {

// x86-64-v4 (AVX-512F/VL/DQ/BW) kernels, orders 0..4; compiled in with GCC or Clang on x86-64.
bool have_avx512_kernels();
void run_avx512(int taylor_order, const Job& job);
// x86-64-v3 (AVX2 + FMA) kernels, orders 0..4; the same condition.
bool have_avx2_kernels();
void run_avx2(int taylor_order, const Job& job);

}  // namespace orbis::p2p_tiled
