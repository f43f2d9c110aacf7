// Device ORB tree build vs OrbTree::build (all OpenMP threads) on the clustered sets of
// 128^3 and 256^3 particles. Prints, per size: the host build (best of a few), the device
// build by CUDA events (best and mean of 10 after a warm-up; phases of the best) and the
// host wall time of one build() call including its internal stream wait, and whether the
// two trees agree (order and node geometry, bitwise). Then the refit (what every sub-step
// of a run pays): the positions moved by up to a tenth of the mean spacing, the host's
// OrbTree::refit against the device's (best and mean of 10; its parts: leaves, levels,
// radii), and whether they agree.
//   bench_orb_tree_cuda [n_side ...]    (default: 128 256)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "gpu/orb_tree_cuda.cuh"
#include "support/clustered_particles.hpp"
#include "support/gpu_skip.hpp"

using namespace orbis;

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void run(int n_side, int max_leaf) {
  const auto pos = test::clustered_particles(n_side, 1000.0, 7);
  const std::size_t n = pos.size();

  OrbTree host;
  double host_best = 1e30;
  const int host_reps = n > 4000000 ? 2 : 4;
  for (int r = 0; r < host_reps; ++r) {
    OrbTree fresh;   // no reuse of a previous order: the first build of a run
    const double t0 = now_ms();
    fresh.build(pos, max_leaf);
    host_best = std::min(host_best, now_ms() - t0);
    if (r == 0) host.build(pos, max_leaf);
  }

  std::vector<double> h[3];
  for (auto& v : h) v.resize(n);
  for (std::size_t i = 0; i < n; ++i)
    for (int d = 0; d < 3; ++d) h[d][i] = pos[i][d];
  gpu::DeviceArray<double> x, y, z;
  gpu::DeviceArray<double>* dev[3] = {&x, &y, &z};
  for (int d = 0; d < 3; ++d) {
    dev[d]->ensure(n);
    ORBIS_CUDA_CHECK(cudaMemcpy(dev[d]->data(), h[d].data(), n * sizeof(double), cudaMemcpyHostToDevice));
  }
  cudaStream_t stream;
  ORBIS_CUDA_CHECK(cudaStreamCreate(&stream));
  gpu::DeviceOrbTree tree;
  tree.build(x.data(), y.data(), z.data(), n, max_leaf, 1.0, stream);   // warm-up: shape, buffers
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  gpu::DeviceOrbTree::Times best;
  best.total_ms = 1e30;
  double sum = 0, wall_best = 1e30;
  const int reps = 10;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_ms();
    tree.build(x.data(), y.data(), z.data(), n, max_leaf, 1.0, stream);
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    wall_best = std::min(wall_best, now_ms() - t0);
    const auto t = tree.times();
    sum += t.total_ms;
    if (t.total_ms < best.total_ms) best = t;
  }

  // The device tree downloaded against the host's: nodes whose geometry differs in any bit,
  // plus one if the order differs.
  auto differences = [&](const std::vector<Vec3d>& positions) {
    OrbTree got;
    tree.download(got, positions, stream);
    std::size_t bad = got.order() == host.order() ? 0 : 1;
    for (std::size_t i = 0; i < host.nodes().size(); ++i) {
      const TreeNode& a = got.nodes()[i];
      const TreeNode& b = host.nodes()[i];
      bad += std::memcmp(&a.lo, &b.lo, sizeof(Vec3d)) != 0 || std::memcmp(&a.hi, &b.hi, sizeof(Vec3d)) != 0 ||
             std::memcmp(&a.centre, &b.centre, sizeof(Vec3d)) != 0 || a.radius != b.radius;
    }
    return bad;
  };
  const std::size_t bad = differences(pos);
  std::printf("n = %d^3 = %zu, max_leaf %d, %zu nodes, depth %zu\n", n_side, n, max_leaf, host.nodes().size(),
              host.levels().size() - 1);
  std::printf("  host OrbTree::build (%d threads): %.2f ms (best of %d)\n", omp_get_max_threads(), host_best,
              host_reps);
  std::printf("  device build: best %.3f ms (sort %.3f, splits %.3f, finish %.3f), mean %.3f ms; "
              "wall per call %.3f ms\n",
              best.total_ms, best.sort_ms, best.split_ms, best.finish_ms, sum / reps, wall_best);
  std::printf("  speed-up (host best / device best): %.1fx; trees %s\n", host_best / best.total_ms,
              bad == 0 ? "identical" : "DIFFER");
  std::fflush(stdout);

  // Refits to moved positions.
  std::vector<Vec3d> moved = pos;
  {
    std::mt19937_64 rng(11);
    const double step = 0.1 * 1000.0 / n_side;
    std::uniform_real_distribution<double> u(-step, step);
    for (Vec3d& p : moved) p += Vec3d{u(rng), u(rng), u(rng)};
  }
  const double t_host = now_ms();
  host.refit(moved);
  const double host_refit = now_ms() - t_host;
  for (std::size_t i = 0; i < n; ++i)
    for (int d = 0; d < 3; ++d) h[d][i] = moved[i][d];
  for (int d = 0; d < 3; ++d)
    ORBIS_CUDA_CHECK(cudaMemcpy(dev[d]->data(), h[d].data(), n * sizeof(double), cudaMemcpyHostToDevice));
  gpu::DeviceOrbTree::Times refit_best;
  refit_best.total_ms = 1e30;
  double refit_sum = 0;
  for (int r = 0; r <= reps; ++r) {
    tree.refit(x.data(), y.data(), z.data(), stream);
    const auto t = tree.times();
    if (r == 0) continue;   // warm-up
    refit_sum += t.total_ms;
    if (t.total_ms < refit_best.total_ms) refit_best = t;
  }
  const std::size_t refit_bad = differences(moved);
  std::printf("  refit: host %.2f ms; device best %.3f ms (leaves %.3f, levels %.3f, radii %.3f), mean %.3f ms; "
              "trees %s\n",
              host_refit, refit_best.total_ms, refit_best.sort_ms, refit_best.split_ms, refit_best.finish_ms,
              refit_sum / reps, refit_bad == 0 ? "identical" : "DIFFER");
  std::fflush(stdout);
  ORBIS_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace

int main(int argc, char** argv) {
  test::require_gpu_or_skip();
  std::vector<int> sides;
  for (int i = 1; i < argc; ++i) sides.push_back(std::atoi(argv[i]));
  if (sides.empty()) sides = {128, 256};
  for (int s : sides) run(s, 32);
  return 0;
}
