// The batched, unrolled M2L (fmm/m2l_batch.hpp) against the plain operator
// FmmOperators::m2l applied one source at a time, for every multipole order, batch sizes
// that leave padding lanes, and R from close (|R| ~ r_s / 10) to beyond the cut; for the
// truncated and the Newtonian (vacuum) kernel.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "fmm/expansions.hpp"
#include "fmm/m2l_batch.hpp"

using namespace orbis;

TEST_CASE("M2LBatch equals FmmOperators::m2l summed over the sources") {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> uni(-1, 1);
  const double r_s = 0.7;
  MESSAGE("M2L batch build: " << M2LBatch::simd_variant());
  for (KernelKind kind : {KernelKind::truncated, KernelKind::newtonian}) {
    for (int p = 1; p <= 6; ++p) {
      FmmOperators ops(p, r_s, kind);
      FmmOperators::Scratch scratch(ops);
      M2LBatch batch(p, r_s, kind);
      REQUIRE(batch.local_size() == ops.local_size());
      const int nm = ops.multipole_set().size();
      for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{21}}) {
        std::vector<std::vector<double>> moments(n, std::vector<double>(static_cast<std::size_t>(nm)));
        std::vector<const double*> ptr(n);
        std::vector<Vec3d> R(n);
        for (std::size_t q = 0; q < n; ++q) {
          for (double& m : moments[q]) m = uni(rng);
          ptr[q] = moments[q].data();
          Vec3d d{uni(rng), uni(rng), uni(rng)};
          const double dist = r_s * std::pow(10.0, -1 + 2.3 * (uni(rng) + 1) / 2);   // r_s/10 .. 20 r_s
          R[q] = d * (dist / norm(d));
        }
        std::vector<double> ref(static_cast<std::size_t>(ops.local_size()), 0.5), got = ref;
        for (std::size_t q = 0; q < n; ++q) ops.m2l(ptr[q], R[q], ref.data(), scratch);
        batch.apply(ptr.data(), R.data(), n, got.data());
        // Per degree of k, relative to the largest term of that degree.
        double worst = 0;
        for (int deg = 0; deg <= p + 1; ++deg) {
          double scale = 0, err = 0;
          for (int k = 0; k < ops.local_size(); ++k) {
            if (ops.local_set().degree(k) != deg) continue;
            scale = std::max(scale, std::fabs(ref[static_cast<std::size_t>(k)] - 0.5));
            err = std::max(err, std::fabs(got[static_cast<std::size_t>(k)] - ref[static_cast<std::size_t>(k)]));
          }
          if (scale > 0) worst = std::max(worst, err / scale);
        }
        INFO("p = " << p << ", n = " << n << (kind == KernelKind::newtonian ? ", Newtonian" : ", truncated"));
        CHECK(worst < 1e-12);
      }
    }
  }
}
