// Issue #5's accuracy check on the GPU machine: the whole TreePM force (PM long range + FMM
// short range, as the run loop computes it) against an exact Ewald sum, with the P2P on
// the CPU backend and on the CUDA backend (tree, walk and P2P on the device), float and
// double kernels. The error percentiles must be the same with either backend (within 10%):
// the backends evaluate the same task lists with the same interaction code. The same
// clustered set as tests/physics/test_treepm_ewald.cpp. Returns 77 without a usable GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "core/params.hpp"
#include "integrate/step_engine.hpp"
#include "support/engine_forces.hpp"
#include "support/clustered_particles.hpp"
#include "support/ewald.hpp"
#include "support/gpu_skip.hpp"

using namespace orbis;

TEST_CASE("TreePM vs Ewald: the same error with the CUDA and the CPU backend") {
  test::require_gpu_or_skip();
  const int n_side = 32;
  const double box = 100.0;
  const Particles p = test::clustered_particle_set(n_side, box, 2024);
  const test::EwaldSample reference = test::ewald_sample(p.pos, p.mass, box, 23);

  auto errors = [&](const std::string& backend, const std::string& precision) {
    const Params params = Params::parse(
        "[box]\nsize_mpc_h = " + std::to_string(box) + "\nparticles_per_side = " + std::to_string(n_side) +
            "\n[gpu]\nbackend = \"" + backend + "\"\np2p_precision = \"" + precision +
            "\"\n[gravity]\nsolver = \"treepm\"\nsoftening_over_spacing = 0.0\n",
        "treepm_ewald_cuda.toml");
    auto engine = make_step_engine(params);
    ForceStats stats;
    const std::vector<Vec3d> acc = test::engine_accelerations(*engine, p, stats);
    const test::ForceErrors e = test::relative_force_errors(acc, reference);
    std::printf("  %-5s %-7s %10.3e %10.3e %10.3e   %s\n", backend.c_str(), precision.c_str(), e.median, e.p99,
                e.max, stats.p2p_where.c_str());
    return e;
  };
  std::printf("TreePM vs Ewald, %d^3 clustered particles, %zu sampled; relative error of the total force\n"
              "  backend P2P       median        99%%        max   where\n",
              n_side, reference.index.size());
  const test::ForceErrors cpu_float = errors("cpu", "float");
  const test::ForceErrors cuda_float = errors("cuda", "float");
  const test::ForceErrors cpu_double = errors("cpu", "double");
  const test::ForceErrors cuda_double = errors("cuda", "double");
  std::fflush(stdout);

  auto same = [](double a, double b) { return std::fabs(a / b - 1.0) < 0.1; };
  CHECK(same(cuda_float.median, cpu_float.median));
  CHECK(same(cuda_float.p99, cpu_float.p99));
  CHECK(same(cuda_double.median, cpu_double.median));
  CHECK(same(cuda_double.p99, cpu_double.p99));
  // The bar of the defaults (99% of particles < 1e-3) holds on the GPU too.
  CHECK(cuda_float.p99 < 1e-3);
  CHECK(cuda_float.median < 2e-4);
}
