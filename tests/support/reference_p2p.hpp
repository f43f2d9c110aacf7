// Test-only exact P2P evaluator: the truncated pair force with exact erfc/exp in double,
// a plain loop per target leaf, tasks read in list order. It implements P2PEvaluator so the
// short-range solver can be tested before (and independently of) the production CPU/CUDA
// backends; those are compared against it in their own tests.
//   g_i = g_mass sum_j (x_j + image L - x_i) T(s/2r_s) / s^3,  s^2 = r^2 + eps^2,  0 < r < r_cut,
// T(x) = erfc(x) + (2x/sqrt(pi)) e^(-x^2), eps the Plummer softening length (on the whole
// truncated kernel, the form of fmm/p2p_kernel.hpp); T = 1 for the Newtonian kernel
// (P2PSettings::kernel, vacuum boundaries).
#pragma once
#include <string>
#include <vector>

#include "fmm/p2p.hpp"

namespace orbis::test {

class ReferenceP2P final : public P2PEvaluator {
 public:
  P2PStats evaluate(const P2PSettings& settings, const P2PInput& input, std::vector<Vec3d>& acc) override;
  std::string name() const override { return "reference (exact erfc, double)"; }
  bool accepts_weights() const override { return true; }   // sources weighed by P2PInput::weights
};

// T(x) = erfc(x) + (2x/sqrt(pi)) exp(-x^2), exact.
double truncation_exact(double x);

// The exact truncated short-range acceleration of particle `i` of `positions` (minimal
// image, pairs with 0 < r < r_cut, no softening, G m = g_mass): the independent reference
// for the FMM. O(N) per target.
Vec3d direct_short_range(const std::vector<Vec3d>& positions, std::size_t i, double box, double r_s,
                         double r_cut, double g_mass);

}  // namespace orbis::test
