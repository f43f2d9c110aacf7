// The CPU (OpenMP) P2P evaluator: the reference the CUDA kernel is tested against and the
// fallback where no GPU is usable. It computes the same sums as the GPU (same pair code,
// p2p_kernel.hpp; positions relative to the target leaf's centre), grouped by target leaf
// so that each particle is written once by one thread: results are bitwise identical for
// any thread count for a given SIMD level and kernel (chosen by the CPU, or forced with
// CpuP2POptions; see .cpp).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "fmm/p2p.hpp"
#include "fmm/p2p_cpu_tiled.hpp"
#include "fmm/p2p_prepare.hpp"
#include "fmm/truncation.hpp"

namespace orbis {

// Which code the evaluator runs. The defaults are what production uses; tests and benchmarks
// force the other variants to check and time them on one machine.
struct CpuP2POptions {
  int simd_level = -1;        // -1: the best this CPU runs; 0: baseline, 3: x86-64-v3 (AVX2),
                              // 4: x86-64-v4 (AVX-512). Above the CPU's level is an error.
  bool tiled_kernel = true;   // false: the generic loop even where a tiled kernel exists
};

class CpuP2PEvaluator : public P2PEvaluator {
 public:
  explicit CpuP2PEvaluator(CpuP2POptions options = {});
  P2PStats evaluate(const P2PSettings& settings, const P2PInput& input,
                    std::vector<Vec3d>& acc) override;
  std::string name() const override { return "cpu"; }
  bool accepts_weights() const override { return true; }

  // The SIMD variant this CPU runs: "x86-64-v4 (AVX-512)", "x86-64-v3 (AVX2)" or "baseline".
  static std::string simd_variant();
  // The best level this CPU runs (4, 3 or 0, as CpuP2POptions::simd_level).
  static int cpu_simd_level();
  // What this evaluator runs for float at the given Taylor order (or kNoTruncation, the
  // Newtonian kernel: p2p_order_of), e.g. "x86-64-v4 (AVX-512), tiled" or "baseline, generic".
  std::string variant(int taylor_order, bool double_precision) const;

 private:
  // Returns whether it computed only P2PInput::targets (the tiled kernels) or every particle.
  template <typename R>
  bool run(const P2PSettings& settings, const P2PInput& input, std::vector<Vec3d>& acc);

  CpuP2POptions options_;
  int level_ = 0;   // the SIMD level in use
  // Reused between calls (the run loop calls evaluate every step).
  LeafRelativePositions<float> rel_f_;
  LeafRelativePositions<double> rel_d_;
  std::unique_ptr<TruncationTable<float>> table_f_;
  std::unique_ptr<TruncationTable<double>> table_d_;
  p2p_tiled::CoefLayout coef_layout_;   // table_f_ in the tiled kernels' layout
  std::vector<float> weights_f_;        // P2PInput::weights in float, for the tiled kernels
};

}  // namespace orbis
