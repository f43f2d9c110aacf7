// Vacuum boundaries on the GPU: the CUDA P2P kernel with the Newtonian kernel (T = 1, the
// kNoTruncation instantiation of the shared pair code) inside the tree solver, against the
// CPU P2P on the same tree and tasks, and the device's own tree and walk (the vacuum walk
// parameters, fmm/walk.cpp) against the host's; plus the accuracy against the exact direct
// sum. Returns 77 without a usable GPU. Metric for backend differences:
// max_i |a_i - b_i| / rms |b| (a per-particle ratio would measure the few particles whose
// pulls cancel, not the kernel).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

#include "fmm/p2p_cpu.hpp"
#include "fmm/short_range.hpp"
#include "gpu/p2p_cuda.hpp"
#include "support/gpu_skip.hpp"
#include "support/vacuum_scenes.hpp"

using namespace orbis;

namespace {

double max_over_rms(const std::vector<Vec3d>& a, const std::vector<Vec3d>& ref) {
  double rms = 0, worst = 0;
  for (const Vec3d& r : ref) rms += norm2(r);
  rms = std::sqrt(rms / static_cast<double>(ref.size()));
  for (std::size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, norm(a[i] - ref[i]));
  return worst / rms;
}

// leaf_cell: the walk's leaf-cell pairs (P2L/M2P, host far field); the solver's device tree
// step is taken only without them (ShortRangeSolver::begin).
ShortRangeSettings vacuum_settings(double g_mass, double theta, bool dbl, bool tree_on_device,
                                   bool leaf_cell = false) {
  ShortRangeSettings s;
  s.boundary = Boundary::vacuum;
  s.theta = theta;
  s.softening = 0.01;
  s.g_mass = g_mass;
  s.p2p_double = dbl;
  s.tree_on_device = tree_on_device;
  s.leaf_cell = leaf_cell;
  return s;
}

}  // namespace

TEST_CASE("vacuum: CUDA P2P = CPU P2P on the host tree, and the device tree and walk = the host's") {
  test::require_gpu_or_skip();
  CudaP2PEvaluator gpu(0);
  CpuP2PEvaluator cpu;
  for (const test::VacuumScene& scene : {test::plummer_scene(40000, 3), test::hernquist_pair_scene(40000, 5)}) {
    for (bool dbl : {true, false}) {
      CAPTURE(scene.name);
      CAPTURE(dbl);
      std::vector<Vec3d> ref, host_tree, device_tree;
      ShortRangeSolver(vacuum_settings(scene.particle_mass, 0.5, dbl, false)).compute(scene.pos, cpu, ref);
      const ShortRangeStats sh =
          ShortRangeSolver(vacuum_settings(scene.particle_mass, 0.5, dbl, false)).compute(scene.pos, gpu, host_tree);
      const ShortRangeStats sd =
          ShortRangeSolver(vacuum_settings(scene.particle_mass, 0.5, dbl, true)).compute(scene.pos, gpu, device_tree);
      const double d_host = max_over_rms(host_tree, ref), d_device = max_over_rms(device_tree, ref);
      std::printf("%s, %s: CUDA P2P on the host tree vs CPU: %.2e; tree and walk on the device vs CPU: %.2e "
                  "(%s; %g M2L, %g P2P pairs)\n", scene.name, dbl ? "double" : "float", d_host, d_device,
                  sd.p2p_where.c_str(), sd.m2l_interactions, sd.p2p_interactions);
      CHECK_FALSE(sh.tree_on_device);
      CHECK(sd.tree_on_device);
      CHECK(sh.p2p_interactions == sd.p2p_interactions);   // the same task set
      // Float: the summation order and the GPU's rsqrt approximation (the cusps' forces are a
      // few times the rms: a few 1e-7 of it).
      CHECK(d_host < (dbl ? 1e-12 : 3e-6));
      CHECK(d_device < (dbl ? 1e-12 : 3e-6));
      // With leaf-cell pairs: the host tree and walk (the device step is not taken), the
      // CUDA P2P of its tasks against the CPU's.
      std::vector<Vec3d> ref_lc, gpu_lc;
      ShortRangeSolver(vacuum_settings(scene.particle_mass, 0.5, dbl, true, true)).compute(scene.pos, cpu, ref_lc);
      const ShortRangeStats sl =
          ShortRangeSolver(vacuum_settings(scene.particle_mass, 0.5, dbl, true, true)).compute(scene.pos, gpu, gpu_lc);
      CHECK_FALSE(sl.tree_on_device);
      CHECK(sl.p2l_interactions > 0);
      CHECK(max_over_rms(gpu_lc, ref_lc) < (dbl ? 1e-12 : 3e-6));
    }
  }
}

TEST_CASE("vacuum on the GPU: accuracy against the exact direct sum, and direct summation") {
  test::require_gpu_or_skip();
  CudaP2PEvaluator gpu(0);
  CpuP2PEvaluator cpu;
  const test::VacuumScene scene = test::hernquist_pair_scene(20000, 11);
  std::vector<std::size_t> sample;
  for (std::size_t i = 0; i < scene.pos.size(); i += 5) sample.push_back(i);
  const auto p99_of = [&](const std::vector<Vec3d>& acc, const std::vector<Vec3d>& exact) {
    std::vector<double> e;
    for (std::size_t q = 0; q < sample.size(); ++q) e.push_back(norm(acc[sample[q]] - exact[q]) / norm(exact[q]));
    std::sort(e.begin(), e.end());
    std::printf("  median %.2e, 99%% %.2e, max %.2e\n", e[e.size() / 2], e[static_cast<std::size_t>(0.99 * (e.size() - 1))],
                e.back());
    return e[static_cast<std::size_t>(0.99 * (e.size() - 1))];
  };
  // The FMM unsoftened (the far field is: M2L knows no softening), at theta 0.4, p = 6, which
  // meets 99% < 1e-3 in vacuum (tests/physics/test_vacuum_forces); the GPU as the CPU.
  {
    const std::vector<Vec3d> exact = test::direct_newtonian(scene.pos, sample, scene.particle_mass, 0.0);
    ShortRangeSettings s = vacuum_settings(scene.particle_mass, 0.4, false, true, true);
    s.softening = 0;
    s.multipole_order = 6;
    std::vector<Vec3d> on_gpu, on_cpu;
    ShortRangeSolver(s).compute(scene.pos, gpu, on_gpu);
    ShortRangeSolver(s).compute(scene.pos, cpu, on_cpu);
    std::printf("theta 0.4, p 6, GPU float (tree on the device):\n");
    const double p99_gpu = p99_of(on_gpu, exact);
    std::printf("the same on the CPU:\n");
    const double p99_cpu = p99_of(on_cpu, exact);
    CHECK(p99_gpu < 1e-3);
    CHECK(p99_gpu < 1.05 * p99_cpu + 1e-6);
  }
  // Direct summation (theta = 0: every pair in P2P), softened, against the softened sum.
  {
    const std::vector<Vec3d> exact = test::direct_newtonian(scene.pos, sample, scene.particle_mass, 0.01);
    std::vector<Vec3d> acc;
    ShortRangeSolver(vacuum_settings(scene.particle_mass, 0.0, false, true)).compute(scene.pos, gpu, acc);
    std::printf("direct summation on the GPU, float, softening 0.01:\n");
    CHECK(p99_of(acc, exact) < 3e-6);
  }
}
