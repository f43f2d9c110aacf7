// The CPU (OpenMP) P2P evaluator: the reference the CUDA kernel is tested against and the
// fallback where no GPU is usable. It computes the same sums as the GPU (same pair code,
// p2p_kernel.hpp; positions relative to the target leaf's centre), grouped by target leaf
// so that each particle is written once by one thread: results are bitwise identical for
// any thread count on the same machine (the SIMD variant is chosen by the CPU, see .cpp).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "fmm/p2p.hpp"
#include "fmm/p2p_prepare.hpp"
#include "fmm/truncation.hpp"

namespace orbis {

class CpuP2PEvaluator : public P2PEvaluator {
 public:
  P2PStats evaluate(const P2PSettings& settings, const P2PInput& input,
                    std::vector<Vec3d>& acc) override;
  std::string name() const override { return "cpu"; }

  // The SIMD variant this CPU runs: "x86-64-v4 (AVX-512)", "x86-64-v3 (AVX2)" or "baseline".
  static std::string simd_variant();

 private:
  template <typename R>
  void run(const P2PSettings& settings, const P2PInput& input, std::vector<Vec3d>& acc);

  // Reused between calls (the run loop calls evaluate every step).
  LeafRelativePositions<float> rel_f_;
  LeafRelativePositions<double> rel_d_;
  std::unique_ptr<TruncationTable<float>> table_f_;
  std::unique_ptr<TruncationTable<double>> table_d_;
};

}  // namespace orbis
