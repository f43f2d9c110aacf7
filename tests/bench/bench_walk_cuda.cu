// Benchmark of the dual-tree walk: the CPU walk (DualTreeWalk::run, half-span P2P, as the
// CUDA backend uses it) against the device walk (gpu/walk_cuda) on the same CPU-built ORB
// tree, with the run's settings (r_s = 1.2 L/N, r_cut = 5.5 r_s, theta 0.5, max_leaf 32).
// Scenes as bench_short_range: "clustered" (sheets, filaments and two haloes) and "sheets"
// (the displaced grid alone). Medians of --reps runs after a warm-up; the device time is
// the events' (the walk's own kernels, scans and per-level waits), "wall" the host's time
// for run() until its stream is done. Without a GPU only the CPU walk is timed.
//
//   bench_walk_cuda [--threads=T] [--reps=R] [N ...]   (default: 16 threads, 5 reps, 128 256)
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/timer.hpp"
#include "fmm/p2p_cuda_factory.hpp"
#include "fmm/walk.hpp"
#include "gpu/device_buffer.cuh"
#include "gpu/walk_cuda.cuh"
#include "support/clustered_particles.hpp"
#include "tree/orb_tree.hpp"

using namespace orbis;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 16, reps = 5;
  std::vector<int> sides;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--threads=", 0) == 0) threads = std::stoi(arg.substr(10));
    else if (arg.rfind("--reps=", 0) == 0) reps = std::max(1, std::stoi(arg.substr(7)));
    else sides.push_back(std::stoi(arg));
  }
  if (sides.empty()) sides = {128, 256};
  std::string why;
  const bool gpu = cuda_device_usable(0, &why);
  if (!gpu) std::printf("# no CUDA device (%s): CPU walk only\n", why.c_str());
  omp_set_num_threads(threads);
  const double box = 100;
  std::printf("# dual-tree walk, theta 0.5, max_leaf 32, r_cut 5.5 r_s, r_s 1.2 L/N; CPU %d threads; "
              "median of %d after a warm-up; times in ms\n", threads, reps);
  std::printf("# %-9s %5s | %8s %8s | %8s %8s %7s | %10s %10s %6s %10s | %s\n", "scene", "N", "cpu", "(pairs)",
              "device", "wall", "speedup", "P2P half", "M2L", "levels", "pairs", "check");
  cudaStream_t stream = nullptr;
  if (gpu) ORBIS_CUDA_CHECK(cudaStreamCreate(&stream));
  for (int side : sides)
    for (const char* scene : {"sheets", "clustered"}) {
      const bool clustered = std::strcmp(scene, "clustered") == 0;
      const auto pos = test::clustered_particles(side, box, 42, clustered ? 0.33 : 0.0);
      OrbTree tree;
      tree.build(pos, 32);
      const double r_s = 1.2 * box / side;
      // The run's walk from the depth-d nodes ([gravity] top_node_particles = 4096).
      const WalkSettings st{box, 5.5 * r_s, 0.5, top_levels_for(static_cast<std::int64_t>(pos.size()), 4096, 32)};

      DualTreeWalk cpu;
      TaskLists lists;
      std::vector<double> cpu_ms, cpu_pairs_ms;
      for (int r = 0; r <= reps; ++r) {
        Stopwatch w;
        cpu.run(tree, st, lists, DualTreeWalk::P2POutput::kHalfSpans);
        if (r > 0) cpu_ms.push_back(1e3 * w.seconds()), cpu_pairs_ms.push_back(1e3 * cpu.traverse_seconds());
      }
      std::size_t cpu_half = 0;
      for (const TaskSpan& s : cpu.p2p_spans()) cpu_half += s.size;

      double dev_ms = 0, wall_ms = 0;
      std::size_t half = 0, m2l = 0, pairs = 0;
      int levels = 0;
      const char* check = "-";
      if (gpu) {
        std::vector<WalkNode> host;
        walk_nodes_of(tree, st.top_levels, host);
        gpu::DeviceArray<WalkNode> nodes;
        nodes.ensure(host.size());
        ORBIS_CUDA_CHECK(cudaMemcpy(nodes.data(), host.data(), host.size() * sizeof(host[0]), cudaMemcpyHostToDevice));
        gpu::DeviceWalk walk;
        std::vector<double> d, h;
        for (int r = 0; r <= reps; ++r) {
          Stopwatch w;
          walk.run(nodes.data(), host.size(), tree.leaves().size(), st, stream);
          ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
          const double wall = 1e3 * w.seconds();
          if (r > 0) d.push_back(walk.last_ms()), h.push_back(wall);
        }
        dev_ms = median(d);
        wall_ms = median(h);
        half = walk.p2p_entries();
        m2l = walk.m2l_count();
        pairs = walk.pairs_tested();
        levels = walk.levels();
        check = half == cpu_half && walk.p2p_tasks() == cpu.p2p_count() && m2l == lists.m2l.size() ? "counts equal"
                                                                                                    : "COUNTS DIFFER";
      }
      std::printf("  %-9s %4d^3 | %8.2f %8.2f | %8.3f %8.3f %6.1fx | %10zu %10zu %6d %10zu | %s\n", scene, side,
                  median(cpu_ms), median(cpu_pairs_ms), dev_ms, wall_ms,
                  wall_ms > 0 ? median(cpu_ms) / wall_ms : 0.0, gpu ? half : cpu_half, gpu ? m2l : lists.m2l.size(),
                  levels, pairs, check);
      std::fflush(stdout);
    }
  if (stream) ORBIS_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}
