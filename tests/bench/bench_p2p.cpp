// P2P benchmark (not run by CTest).
//
// CUDA part (builds with CUDA): interactions per second of the CUDA kernel on clustered
// particles with realistic leaves (ORB bisection, max_leaf 32, tasks for every leaf pair
// within r_cut; r_s = 1.2 L/N_PM, N_PM = N_side, r_cut = 4.5 r_s), float and double, Taylor
// orders 0..4 and exact; the same kernel on an all-pairs task list (every leaf pair of a
// uniform set) as the structure's upper limit; the active-thread fraction; and the CPU
// evaluator on all cores for the GPU/CPU ratio.
//   bench_p2p [--sides 128,256] [--reps 5] [--no-cpu] [--allpairs-n 131072]
//
// CPU part (--cpu, and the default in a build without CUDA): the CPU evaluator on the same
// scenes, per thread count, SIMD level (those this CPU runs) and kernel (tiled, and the
// generic loop it replaced), float; best and median of reps; the tiled results' relative
// difference to the generic loop's at the same level.
//   bench_p2p --cpu [--sides 64] [--reps 3] [--threads 1,2] [--orders 3] [--levels 4,3,0]
//
// Interactions = sum over tasks of n_i * n_j (pairs evaluated, cut or not); the GPU rate
// uses the kernel time from CUDA events (median of reps); "full" adds the host preparation,
// uploads, grouping and download.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "core/timer.hpp"
#include "fmm/p2p_cpu.hpp"
#include "unit/test_p2p_fixture.hpp"
#if defined(ORBIS_HAVE_CUDA)
#include "fmm/p2p_cuda_factory.hpp"
#include "gpu/p2p_cuda.hpp"
#endif

using namespace orbis;

namespace {

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  for (std::size_t p = 0; p < s.size();) {
    const std::size_t q = s.find(',', p);
    v.push_back(std::atoi(s.substr(p, q - p).c_str()));
    p = q == std::string::npos ? s.size() : q + 1;
  }
  return v;
}

// The benchmark scene of both parts: half the particles in blobs of ~4000 (sigma 0.5..3
// spacings), half uniform; box = side Mpc/h (mean spacing 1), max_leaf 32.
test::P2PScene bench_scene(int side, P2PSettings& st) {
  const std::size_t n = static_cast<std::size_t>(side) * side * side;
  const double box = side;
  st = P2PSettings{};
  st.box_mpc_h = box;
  st.r_s = 1.2 * box / side;
  st.r_cut = 4.5 * st.r_s;
  st.softening = 0.025;
  st.g_mass = 43.0071;
  auto pos = test::clustered_positions(n, box, 1234 + side, static_cast<int>(n / 4000), 0.5, 0.5, 3.0);
  return test::make_scene(std::move(pos), box, 32, st.r_cut);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Process CPU time: on a machine shared with other jobs, wall time includes the slices the
// others got; the CPU time of a single-threaded run does not (with 2 threads it also
// counts OpenMP's spin-waiting, so it is reported but the rate uses wall time).
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

std::string level_label(int level) {
  return level == 4 ? "v4 (AVX-512)" : level == 3 ? "v3 (AVX2)" : "baseline";
}

int run_cpu(const std::vector<int>& sides, int reps, const std::vector<int>& threads,
            const std::vector<int>& orders, std::vector<int> levels) {
  const int best = CpuP2PEvaluator::cpu_simd_level();
  levels.erase(std::remove_if(levels.begin(), levels.end(), [&](int l) { return l > best; }),
               levels.end());
  std::printf("CPU: %s; OpenMP max threads %d\n", CpuP2PEvaluator::simd_variant().c_str(),
              omp_get_max_threads());
  std::printf("\n| set | threads | level | order | kernel | pairs | best s | median s | "
              "interactions/s | per core | best CPU s | per core (CPU time) | vs generic: median / p99 / max rel. diff |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  std::fflush(stdout);
  for (int side : sides) {
    P2PSettings base;
    const test::P2PScene scene = bench_scene(side, base);
    const P2PInput in{&scene.pos, &scene.leaves, &scene.tasks};
    const std::string set = "clustered " + std::to_string(side) + "^3";
    // The share of evaluated pairs inside r_cut (the rest contribute exactly zero).
    double inside = 0, all = 0;
    const double rc2 = base.r_cut * base.r_cut;
#pragma omp parallel for schedule(dynamic, 64) reduction(+ : inside, all)
    for (std::size_t q = 0; q < scene.tasks.size(); ++q) {
      const InteractionTask& tk = scene.tasks[q];
      const Leaf& li = scene.leaves[tk.target];
      const Leaf& lj = scene.leaves[tk.source];
      for (std::uint32_t i = li.first; i < li.first + li.count; ++i)
        for (std::uint32_t j = lj.first; j < lj.first + lj.count; ++j) {
          const Vec3d d{scene.pos[j].x + tk.image[0] * base.box_mpc_h - scene.pos[i].x,
                        scene.pos[j].y + tk.image[1] * base.box_mpc_h - scene.pos[i].y,
                        scene.pos[j].z + tk.image[2] * base.box_mpc_h - scene.pos[i].z};
          inside += norm2(d) < rc2 ? 1.0 : 0.0;
        }
      all += double(li.count) * lj.count;
    }
    std::printf("%s: %zu particles, %zu leaves (mean %.1f), %zu tasks, %.0f pairs/particle, "
                "%.1f%% of them inside r_cut\n", set.c_str(), scene.pos.size(), scene.leaves.size(),
                double(scene.pos.size()) / scene.leaves.size(), scene.tasks.size(),
                all / scene.pos.size(), 100 * inside / all);
    for (int order : orders)
      for (int nt : threads) {
        omp_set_num_threads(nt);
        for (int level : levels) {
          std::vector<Vec3d> generic;
          for (int tiled = 0; tiled < 2; ++tiled) {
            CpuP2POptions opt;
            opt.simd_level = level;
            opt.tiled_kernel = tiled == 1;
            CpuP2PEvaluator cpu(opt);
            P2PSettings st = base;
            st.taylor_order = order;
            if (tiled && cpu.variant(order, false).find("tiled") == std::string::npos) continue;
            std::vector<Vec3d> acc;
            P2PStats ps = cpu.evaluate(st, in, acc);   // warm-up (first touch, table)
            std::vector<double> t, tc;
            for (int r = 0; r < reps; ++r) {
              const double c0 = cpu_seconds();
              ps = cpu.evaluate(st, in, acc);
              tc.push_back(cpu_seconds() - c0);
              t.push_back(ps.seconds);
            }
            std::string diff = "-";
            if (!tiled) {
              generic = acc;
            } else {
              std::vector<double> rel;
              for (std::size_t i = 0; i < acc.size(); ++i) {
                const double den = std::sqrt(norm2(generic[i]));
                if (den > 0) rel.push_back(std::sqrt(norm2(acc[i] - generic[i])) / den);
              }
              const auto rs = test::relative_stats(rel);
              char buf[64];
              std::snprintf(buf, sizeof buf, "%.1e / %.1e / %.1e", rs.median, rs.p99, rs.max);
              diff = buf;
            }
            const double tb = *std::min_element(t.begin(), t.end());
            const double cb = *std::min_element(tc.begin(), tc.end());
            std::printf("| %s | %d | %s | %d | %s | %.3e | %.3f | %.3f | %.3e | %.3e | %.3f | %.3e | %s |\n",
                        set.c_str(), nt, level_label(level).c_str(), order,
                        tiled ? "tiled" : "generic", ps.interactions, tb, median(t),
                        ps.interactions / tb, ps.interactions / tb / nt, cb,
                        ps.interactions / cb, diff.c_str());
            std::fflush(stdout);
          }
        }
      }
  }
  return 0;
}

}  // namespace

#if !defined(ORBIS_HAVE_CUDA)
int main(int argc, char** argv) {
  std::vector<int> sides = {64}, threads = {1, 2}, orders = {3}, levels = {4, 3, 0};
  int reps = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sides" && i + 1 < argc) sides = parse_list(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--threads" && i + 1 < argc) threads = parse_list(argv[++i]);
    else if (a == "--orders" && i + 1 < argc) orders = parse_list(argv[++i]);
    else if (a == "--levels" && i + 1 < argc) levels = parse_list(argv[++i]);
  }
  std::printf("(no CUDA in this build: CPU part only)\n");
  return run_cpu(sides, reps, threads, orders, levels);
}
#else
namespace {

struct Row {
  std::string set, what;
  double pairs = 0, kernel_s = 0, full_s = 0;
  std::string note;
};

void print_rows(const std::vector<Row>& rows) {
  std::printf("\n| set | run | pairs | kernel s | interactions/s (kernel) | full s | note |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Row& r : rows)
    std::printf("| %s | %s | %.3e | %.4f | %.3e | %.4f | %s |\n", r.set.c_str(), r.what.c_str(),
                r.pairs, r.kernel_s, r.kernel_s > 0 ? r.pairs / r.kernel_s : 0, r.full_s,
                r.note.c_str());
  std::fflush(stdout);
}

std::string order_name(int order) { return order < 0 ? "exact" : "order " + std::to_string(order); }

void run_gpu(CudaP2PEvaluator& gpu, const std::string& set, const P2PSettings& base,
             const P2PInput& in, int reps, std::vector<Row>& rows, const std::vector<int>& orders,
             bool both_precisions) {
  std::vector<Vec3d> acc;
  for (int dp = 0; dp < (both_precisions ? 2 : 1); ++dp)
    for (int order : orders) {
      P2PSettings st = base;
      st.taylor_order = order;
      st.double_precision = both_precisions ? dp == 1 : base.double_precision;
      gpu.evaluate(st, in, acc);   // warm-up (module load, buffers)
      std::vector<double> k, f;
      P2PStats ps;
      for (int r = 0; r < reps; ++r) {
        ps = gpu.evaluate(st, in, acc);
        k.push_back(gpu.timings().kernel);
        f.push_back(ps.seconds);
      }
      Row row{set, std::string("gpu ") + (st.double_precision ? "double " : "float ") + order_name(order),
              ps.interactions, median(k), median(f), ""};
      if (order == 3 && !st.double_precision) {
        const auto& t = gpu.timings();
        char buf[200];
        std::snprintf(buf, sizeof buf, "prep %.3f up %.3f group %.3f down %.3f s", t.host_prepare,
                      t.upload, t.grouping, t.download);
        row.note = buf;
      }
      rows.push_back(row);
      std::printf("%s %s: %.3e pairs/s\n", set.c_str(), row.what.c_str(),
                  row.kernel_s > 0 ? row.pairs / row.kernel_s : 0);
      std::fflush(stdout);
    }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sides = {128, 256};
  int reps = 5;
  bool cpu_too = true;
  bool quick = false;
  bool cpu_only = false, sides_given = false;
  std::vector<int> threads = {1, 2}, orders = {3}, levels = {4, 3, 0};
  std::size_t allpairs_n = 131072;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sides" && i + 1 < argc) {
      sides = parse_list(argv[++i]);
      sides_given = true;
    } else if (a == "--cpu") {
      cpu_only = true;
    } else if (a == "--threads" && i + 1 < argc) {
      threads = parse_list(argv[++i]);
    } else if (a == "--orders" && i + 1 < argc) {
      orders = parse_list(argv[++i]);
    } else if (a == "--levels" && i + 1 < argc) {
      levels = parse_list(argv[++i]);
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--quick") {   // float order 3 only (both table forms), no CPU, no all-pairs
      quick = true;
      cpu_too = false;
    } else if (a == "--no-cpu") {
      cpu_too = false;
    } else if (a == "--allpairs-n" && i + 1 < argc) {
      allpairs_n = std::strtoull(argv[++i], nullptr, 10);
    }
  }
  if (cpu_only) return run_cpu(sides_given ? sides : std::vector<int>{64}, reps, threads, orders, levels);
  std::string why;
  if (!cuda_device_usable(0, &why)) {
    std::printf("SKIPPED: no CUDA device (%s)\n", why.c_str());
    return 77;
  }
  CudaP2PEvaluator gpu(0);
  std::printf("device: %s; CPU: %d threads, %s\n", gpu.device_name().c_str(), omp_get_max_threads(),
              CpuP2PEvaluator::simd_variant().c_str());
  std::vector<Row> rows;

  for (int side : sides) {
    const std::size_t n = static_cast<std::size_t>(side) * side * side;
    P2PSettings st;
    Stopwatch build;
    test::P2PScene scene = bench_scene(side, st);
    const std::string set = "clustered " + std::to_string(side) + "^3";
    double pairs = 0;
    for (const auto& t : scene.tasks)
      pairs += double(scene.leaves[t.target].count) * scene.leaves[t.source].count;
    std::printf("%s: %zu particles, %zu leaves (mean %.1f), %zu tasks, %.0f pairs/particle, scene %.1f s\n",
                set.c_str(), n, scene.leaves.size(), double(n) / scene.leaves.size(),
                scene.tasks.size(), pairs / n, build.seconds());
    std::fflush(stdout);
    P2PInput in{&scene.pos, &scene.leaves, &scene.tasks};
    if (quick) run_gpu(gpu, set, st, in, reps, rows, {3}, false);
    else run_gpu(gpu, set, st, in, reps, rows, {3, 0, 1, 2, 4, -1}, true);
    gpu.set_coefficient_table(false);   // eq. 2's {T, E} table, factors derived per pair
    const std::size_t before = rows.size();
    run_gpu(gpu, set, st, in, reps, rows, {3}, !quick);
    for (std::size_t r = before; r < rows.size(); ++r) rows[r].what += " {T,E} table";
    gpu.set_coefficient_table(true);

    // Active-thread fraction (counted run, float order 3).
    gpu.set_count_occupancy(true);
    std::vector<Vec3d> acc;
    st.taylor_order = 3;
    st.double_precision = false;
    gpu.evaluate(st, in, acc);
    const CudaP2POccupancy occ = gpu.occupancy();
    gpu.set_count_occupancy(false);
    std::printf("%s: active-thread fraction %.3f (%.3e pair slots of %.3e issued)\n", set.c_str(),
                occ.active_fraction(), occ.pairs, occ.lane_slots);
    rows.push_back({set, "active-thread fraction", occ.pairs, 0, 0,
                    std::to_string(occ.active_fraction())});

    if (cpu_too) {
      CpuP2PEvaluator cpu;
      std::vector<Vec3d> cacc;
      cpu.evaluate(st, in, cacc);   // warm-up
      const P2PStats ps = cpu.evaluate(st, in, cacc);
      rows.push_back({set, "cpu float order 3", ps.interactions, ps.seconds, ps.seconds, ps.where});
      std::printf("%s cpu: %.3e pairs/s (%s)\n", set.c_str(), ps.interactions / ps.seconds, ps.where.c_str());
      // Agreement of the two backends on this set (float order 3 both).
      gpu.evaluate(st, in, acc);
      std::vector<double> rel;
      for (std::size_t i = 0; i < n; ++i) {
        const double den = std::sqrt(norm2(cacc[i]));
        if (den > 0) rel.push_back(std::sqrt(norm2(acc[i] - cacc[i])) / den);
      }
      const auto rs = test::relative_stats(rel);
      std::printf("%s gpu vs cpu (float, order 3): median %.2e p99 %.2e max %.2e\n", set.c_str(),
                  rs.median, rs.p99, rs.max);
    }
  }

  if (!quick) {
    // All pairs: every leaf pair of a uniform set, the same kernel with full tiles.
    const double box = 64;
    P2PSettings st;
    st.box_mpc_h = box;
    st.r_s = 2;
    st.r_cut = 9;
    st.softening = 0.01;
    st.g_mass = 1;
    test::P2PScene scene;
    scene.box = box;
    scene.pos = test::clustered_positions(allpairs_n, box, 99, 0, 0);
    test::build_leaves(scene, 32);
    const std::uint32_t nl = static_cast<std::uint32_t>(scene.leaves.size());
    scene.tasks.reserve(std::size_t{nl} * nl);
    for (std::uint32_t i = 0; i < nl; ++i)
      for (std::uint32_t j = 0; j < nl; ++j) {
        InteractionTask t;
        t.target = i;
        t.source = j;
        scene.tasks.push_back(t);
      }
    const std::string set = "all-pairs " + std::to_string(allpairs_n);
    std::printf("%s: %u leaves, %zu tasks\n", set.c_str(), nl, scene.tasks.size());
    P2PInput in{&scene.pos, &scene.leaves, &scene.tasks};
    run_gpu(gpu, set, st, in, reps, rows, {3, 0, 4, -1}, false);
    P2PSettings dst = st;
    dst.double_precision = true;
    run_gpu(gpu, set, dst, in, std::max(1, reps / 2), rows, {3}, false);
  }
  print_rows(rows);
  return 0;
}
#endif  // ORBIS_HAVE_CUDA
