// Benchmark of the short-range step (ORB tree, multipoles, walk, M2L+L2L+L2P, P2P) on
// clustered sets (tests/support/clustered_particles), with the run's default settings
// (params/README.md): r_s = 2.4 cells of the 2N PM mesh = 1.2 L/N, r_cut = 5.5 r_s,
// theta 0.5, multipole order 4, max_leaf 32, softening 0.025 L/N, float P2P with the
// order-3 Taylor table. Every phase is the median of --reps timed steps after a warm-up.
//
//   bench_short_range [--p2p=cpu|cuda|compare|count|reference] [--threads=T[,T...]]
//                     [--scene=clustered|sheets] [--reps=R] [--max-leaf=L] [--drift=D]
//                     [--accurate] [--top-nodes=P] [N ...]
//
// --p2p=compare (the issue #5 bar): the CPU backend on the first thread count, then the
// CUDA backend (also with its tree and walk on the host instead of the device, for the
// breakdown), and the ratio of their short-range step times. cuda: P2P starts before the
// far field and finishes after it (P2PEvaluator::start/finish), so "P2P" is the time the
// calling thread spends in those two calls; the device's own times follow on a second line.
// count: pairs counted, not evaluated (the CPU phases alone). Scenes: "clustered" = grid
// displaced into sheets and filaments plus two Plummer haloes holding 33% of the particles
// (~20-35k pair evaluations per particle); "sheets" = the displaced grid alone (a milder,
// earlier-time-like set). --drift: before each timed step every particle moves by D mean
// spacings (rms per axis, default 0.05), as between the steps of a run. --accurate: theta
// 0.4, order 6. --top-nodes: the walk starts from the pairs of depth-d nodes, d =
// top_levels_for(N, P, max_leaf) ([gravity] top_node_particles; default 4096 as a run; 0:
// d = 0, the walk from the root).
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/timer.hpp"
#include "fmm/m2l_batch.hpp"
#include "fmm/p2p_cpu.hpp"
#include "fmm/short_range.hpp"
#include "support/clustered_particles.hpp"
#include "support/reference_p2p.hpp"
#if defined(ORBIS_HAVE_CUDA)
#include "fmm/p2p_cuda_factory.hpp"
#include "gpu/p2p_cuda.hpp"
#endif

using namespace orbis;

namespace {

// Writes zeros and reports the pair count of the task list (sum of n_i * n_j over tasks).
class CountingP2P final : public P2PEvaluator {
 public:
  P2PStats evaluate(const P2PSettings&, const P2PInput& in, std::vector<Vec3d>& acc) override {
    Stopwatch w;
    acc.assign(in.positions->size(), Vec3d{0, 0, 0});
    return P2PStats{w.seconds(), p2p_interaction_count(*in.leaves, *in.tasks), "count only"};
  }
  std::string name() const override { return "count only"; }
};

struct Row {
  double tree = 0, mpole = 0, walk = 0, m2l = 0, p2p = 0, total = 0;
  double pairs = 0, m2l_tasks = 0, p2p_tasks = 0;
  // CUDA only: host preparation in start(), device upload/grouping/kernel/download, the
  // wait in finish().
  double prep = 0, upload = 0, group = 0, kernel = 0, download = 0, wait = 0;
  double dtree = 0, dwalk = 0, host_tree = 0;   // device tree step: build and walk on the
                                                // device, tree and M2L lists to the host
  bool device_tree = false;
  // Inside the tree build and the walk.
  double t_fill = 0, t_top = 0, t_sub = 0, t_finish = 0, t_out = 0, w_traverse = 0, w_group = 0;
  std::string where;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Moves every particle by drift x N(0, 1) per axis (wrapped into the box), like a step's
// drift: the solver's buffers and the tree's last order are then reused as in a run, on
// positions that changed. The same sequence for every backend (fixed seed).
void drift_positions(std::vector<Vec3d>& pos, double drift, double box, std::mt19937_64& rng) {
  std::normal_distribution<double> gauss(0, 1);
  for (Vec3d& x : pos)
    for (int d = 0; d < 3; ++d) x[d] = periodic_wrap_position(x[d] + drift * gauss(rng), box);
}

Row run(std::vector<Vec3d> pos, const ShortRangeSettings& s, P2PEvaluator& p2p, int reps, double drift) {
  ShortRangeSolver solver(s);
  std::vector<Vec3d> acc;
  std::mt19937_64 rng(7);
  solver.compute(pos, p2p, acc);   // warm-up: first touch of every buffer, device allocations
  std::vector<Row> rows;
  for (int r = 0; r < reps; ++r) {
    if (drift > 0) drift_positions(pos, drift, s.box_mpc_h, rng);
    const ShortRangeStats st = solver.compute(pos, p2p, acc);
    Row row;
    row.tree = st.tree_seconds;
    row.mpole = st.multipole_seconds;
    row.walk = st.walk_seconds;
    row.m2l = st.m2l_seconds;
    row.p2p = st.p2p_seconds;
    row.total = st.total_seconds;
    row.pairs = st.p2p_interactions;
    row.m2l_tasks = st.m2l_interactions;
    row.p2p_tasks = static_cast<double>(st.p2p_tasks);
    row.where = st.p2p_where;
    const OrbTree::BuildTimes& bt = solver.tree().build_times();
    row.t_fill = bt.fill;
    row.t_top = bt.top;
    row.t_sub = bt.subtrees;
    row.t_finish = bt.finish;
    row.t_out = bt.output;
    row.w_traverse = solver.walk().traverse_seconds();
    row.w_group = solver.walk().group_seconds();
#if defined(ORBIS_HAVE_CUDA)
    if (auto* gpu = dynamic_cast<CudaP2PEvaluator*>(&p2p)) {
      const CudaP2PTimings& t = gpu->timings();
      row.prep = t.host_prepare;
      row.upload = t.upload;
      row.group = t.grouping;
      row.kernel = t.kernel;
      row.download = t.download;
      row.wait = t.finish_wait;
      row.dtree = t.tree;
      row.dwalk = t.walk;
      row.host_tree = t.host_tree;
      row.device_tree = t.device_tree;
    }
#endif
    rows.push_back(row);
  }
  Row m = rows[0];
  auto med = [&](double Row::*f) {
    std::vector<double> v;
    for (const Row& r : rows) v.push_back(r.*f);
    m.*f = median(v);
  };
  for (double Row::*f : {&Row::tree, &Row::mpole, &Row::walk, &Row::m2l, &Row::p2p, &Row::total, &Row::prep,
                         &Row::upload, &Row::group, &Row::kernel, &Row::download, &Row::wait, &Row::dtree, &Row::dwalk, &Row::host_tree, &Row::t_fill,
                         &Row::t_top, &Row::t_sub, &Row::t_finish, &Row::t_out, &Row::w_traverse, &Row::w_group})
    med(f);
  return m;
}

void print_header() {
  std::printf("# %-6s %5s %3s %-14s | %7s %7s %7s %7s %7s %8s | %8s %7s %9s | %s\n", "N", "thr", "p", "P2P",
              "tree", "mpole", "walk", "M2L", "P2P", "total", "P2P/part", "M2L/pt", "tasks", "where");
}

void print_row(int side, int threads, int order, const std::string& mode, const Row& r, double n) {
  std::printf("  %4d^3 %5d %3d %-14s | %7.4f %7.4f %7.4f %7.4f %7.4f %8.4f | %8.0f %7.2f %9.3g | %s\n", side,
              threads, order, mode.c_str(), r.tree, r.mpole, r.walk, r.m2l, r.p2p, r.total, r.pairs / n,
              r.m2l_tasks / n, r.p2p_tasks, r.where.c_str());
  if (r.device_tree)
    std::printf("  %40s device: position upload %.4f (staging %.4f), tree %.4f, walk %.4f, group %.4f, "
                "kernel %.4f (%.3g pairs/s), download %.4f; host: tree + M2L lists down %.4f, wait in "
                "finish %.4f\n",
                "", r.upload, r.prep, r.dtree, r.dwalk, r.group, r.kernel, r.kernel > 0 ? r.pairs / r.kernel : 0.0,
                r.download, r.host_tree, r.wait);
  else
    std::printf("  %40s tree: fill %.4f, top levels %.4f, subtrees %.4f, top finish %.4f, out %.4f; walk: "
                "pairs %.4f, grouping %.4f\n",
                "", r.t_fill, r.t_top, r.t_sub, r.t_finish, r.t_out, r.w_traverse, r.w_group);
  if (mode != "cpu" && !r.device_tree && r.kernel > 0)
    std::printf("  %40s device: prep %.4f (host), upload %.4f, group %.4f, kernel %.4f (%.3g pairs/s), "
                "download %.4f; wait in finish %.4f\n",
                "", r.prep, r.upload, r.group, r.kernel, r.kernel > 0 ? r.pairs / r.kernel : 0.0, r.download,
                r.wait);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "cpu", scene = "clustered";
  std::vector<int> sides, thread_list;
  int reps = 3, max_leaf = 32;
  double drift_spacings = 0.05;
  bool accurate = false;
  long top_nodes = 4096;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg.rfind("--p2p=", 0) == 0) {
      mode = arg.substr(6);
    } else if (arg.rfind("--threads=", 0) == 0) {
      std::stringstream list(arg.substr(10));
      for (std::string t; std::getline(list, t, ',');) thread_list.push_back(std::stoi(t));
    } else if (arg.rfind("--scene=", 0) == 0) {
      scene = arg.substr(8);
    } else if (arg.rfind("--reps=", 0) == 0) {
      reps = std::max(1, std::stoi(arg.substr(7)));
    } else if (arg.rfind("--max-leaf=", 0) == 0) {
      max_leaf = std::stoi(arg.substr(11));
    } else if (arg.rfind("--drift=", 0) == 0) {
      drift_spacings = std::stod(arg.substr(8));
    } else if (arg.rfind("--top-nodes=", 0) == 0) {
      top_nodes = std::stol(arg.substr(12));
    } else if (arg == "--accurate") {
      accurate = true;
    } else if (!arg.empty() && arg[0] != '-') {
      sides.push_back(std::stoi(arg));
    } else {
      std::fprintf(stderr, "unknown option %s\n", arg.c_str());
      return 2;
    }
  }
  if (sides.empty()) sides = {64, 128};
  if (thread_list.empty()) thread_list = {omp_get_max_threads()};
  if (scene != "clustered" && scene != "sheets") {
    std::fprintf(stderr, "--scene must be clustered or sheets\n");
    return 2;
  }

  CountingP2P counting;
  test::ReferenceP2P reference;
  CpuP2PEvaluator cpu;
  std::unique_ptr<P2PEvaluator> cuda;
  if (mode == "cuda" || mode == "compare") {
#if defined(ORBIS_HAVE_CUDA)
    std::string why;
    if (!cuda_device_usable(0, &why)) {
      std::printf("SKIPPED: --p2p=%s needs a CUDA device (%s)\n", mode.c_str(), why.c_str());
      return 77;
    }
    cuda = std::make_unique<CudaP2PEvaluator>(0);
#else
    std::printf("SKIPPED: --p2p=%s needs a CUDA build\n", mode.c_str());
    return 77;
#endif
  }

  const double box = 100.0;
  const int order = accurate ? 6 : 4;
  std::printf("# short-range step, scene %s, theta %.2f, p %d, max_leaf %d, r_cut 5.5 r_s, r_s 1.2 L/N, "
              "float P2P order 3; CPU P2P %s, M2L %s; median of %d steps after a warm-up, particles "
              "drifting %.3g spacings (rms per axis) before each\n",
              scene.c_str(), accurate ? 0.4 : 0.5, order, max_leaf, CpuP2PEvaluator::simd_variant().c_str(),
              M2LBatch::simd_variant().c_str(), reps, drift_spacings);
  print_header();
  for (int side : sides) {
    const auto pos = scene == "clustered" ? test::clustered_particles(side, box, 42)
                                          : test::clustered_particles(side, box, 42, 0.0);
    const double n = static_cast<double>(pos.size());
    const double drift = drift_spacings * box / side;
    ShortRangeSettings s;
    s.box_mpc_h = box;
    s.r_s = 1.2 * box / side;
    s.r_cut = 5.5 * s.r_s;
    s.theta = accurate ? 0.4 : 0.5;
    s.multipole_order = order;
    s.max_leaf = max_leaf;
    s.softening = 0.025 * box / side;
    s.g_mass = 1;
    s.top_levels = top_nodes > 0 ? top_levels_for(static_cast<std::int64_t>(pos.size()), top_nodes, max_leaf) : 0;
    std::printf("# %d^3: walk from depth %d (top_node_particles %ld)\n", side, s.top_levels, top_nodes);
    if (mode == "compare") {
      omp_set_num_threads(thread_list[0]);
      const Row c = run(pos, s, cpu, reps, drift);
      print_row(side, thread_list[0], order, "cpu", c, n);
      // The CUDA backend as in a run (tree, walk and P2P on the device), then with the tree
      // and walk on the host (the P2P alone on the device) for the breakdown.
      ShortRangeSettings host_tree = s;
      host_tree.tree_on_device = false;
      const Row h = run(pos, host_tree, *cuda, reps, drift);
      print_row(side, thread_list[0], order, "cuda-host-tree", h, n);
      const Row g = run(pos, s, *cuda, reps, drift);
      print_row(side, thread_list[0], order, "cuda", g, n);
      std::printf("  %4d^3 short-range step: CPU backend %.4f s / CUDA backend %.4f s = %.1fx "
                  "(P2P alone %.4f / %.4f = %.0fx)\n",
                  side, c.total, g.total, c.total / g.total, c.p2p, g.p2p, c.p2p / std::max(g.p2p, 1e-9));
      continue;
    }
    for (int threads : thread_list) {
      omp_set_num_threads(threads);
      P2PEvaluator& p2p = mode == "reference" ? static_cast<P2PEvaluator&>(reference)
                          : mode == "count"   ? static_cast<P2PEvaluator&>(counting)
                          : mode == "cuda"    ? *cuda
                                              : static_cast<P2PEvaluator&>(cpu);
      print_row(side, threads, order, mode, run(pos, s, p2p, reps, drift), n);
    }
  }
  return 0;
}
