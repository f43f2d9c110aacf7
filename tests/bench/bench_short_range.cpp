// Benchmark of the CPU short-range solver on clustered sets (Zel'dovich-like field + two
// Plummer haloes, tests/support/clustered_particles): time per phase (tree, multipoles,
// walk, M2L+L2L+L2P, P2P), interactions per particle and per second, at the default and a
// high-accuracy setting. Settings follow the schema defaults for N_pm = N_side:
// r_s = 1.2 L/N, r_cut = 4.5 r_s, max_leaf 32.
//
//   bench_short_range [--p2p=cpu|count|reference] [--threads=T] [N_side ...]   (default 64 128)
//
// --p2p=cpu (default): the production CPU evaluator (float, order-3 Taylor table);
// count: the P2P pairs are counted, not evaluated (the P2P time is then no force time);
// reference: the exact test-only evaluator (slow: exact erfc/exp in double).
#include <omp.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/timer.hpp"
#include "fmm/p2p_cpu.hpp"
#include "fmm/short_range.hpp"
#include "support/clustered_particles.hpp"
#include "support/reference_p2p.hpp"

using namespace orbis;

namespace {

// Writes zeros and reports the pair count of the task list (sum of n_i * n_j over tasks).
class CountingP2P final : public P2PEvaluator {
 public:
  P2PStats evaluate(const P2PSettings&, const P2PInput& in, std::vector<Vec3d>& acc) override {
    Stopwatch w;
    acc.assign(in.positions->size(), Vec3d{0, 0, 0});
    double pairs = 0;
    for (const auto& t : *in.tasks)
      pairs += static_cast<double>((*in.leaves)[t.target].count) * (*in.leaves)[t.source].count;
    return P2PStats{w.seconds(), pairs, "count only"};
  }
  std::string name() const override { return "count only"; }
};

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "cpu";
  std::vector<int> sides;
  int threads = 2;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg.rfind("--p2p=", 0) == 0) {
      mode = arg.substr(6);
    } else if (arg.rfind("--threads=", 0) == 0) {
      threads = std::stoi(arg.substr(10));
    } else {
      sides.push_back(std::stoi(arg));
    }
  }
  if (sides.empty()) sides = {64, 128};
  omp_set_num_threads(threads);
  CountingP2P counting;
  test::ReferenceP2P reference;
  CpuP2PEvaluator cpu;
  P2PEvaluator& p2p = mode == "reference" ? static_cast<P2PEvaluator&>(reference)
                      : mode == "count"   ? static_cast<P2PEvaluator&>(counting)
                                          : static_cast<P2PEvaluator&>(cpu);

  std::printf("# short-range solver, %d threads, P2P: %s%s\n", threads, p2p.name().c_str(),
              mode == "cpu" ? (" " + CpuP2PEvaluator::simd_variant() + ", float, Taylor order 3").c_str() : "");
  std::printf("# %6s %5s %2s | %7s %7s %7s %7s %7s %7s | %8s %8s | %9s %9s\n", "N", "theta", "p", "tree",
              "mpole", "walk", "M2L", "P2P", "total", "P2P/part", "M2L/part", "M2L/s", "P2P/s");
  const double box = 100.0;
  for (int side : sides) {
    const auto pos = test::clustered_particles(side, box, 42);
    for (auto [theta, order] : {std::pair<double, int>{0.5, 4}, std::pair<double, int>{0.4, 6}}) {
      ShortRangeSettings s;
      s.box_mpc_h = box;
      s.r_s = 1.2 * box / side;
      s.r_cut = 4.5 * s.r_s;
      s.theta = theta;
      s.multipole_order = order;
      s.max_leaf = 32;
      s.softening = 0;
      s.g_mass = 1;
      ShortRangeSolver solver(s);
      std::vector<Vec3d> acc;
      solver.compute(pos, p2p, acc);   // warm-up: first-touch of the buffers
      const ShortRangeStats st = solver.compute(pos, p2p, acc);
      const double n = static_cast<double>(pos.size());
      std::printf("  %6d^3 %5.2f %2d | %7.3f %7.3f %7.3f %7.3f %7.3f %7.3f | %8.0f %8.2f | %9.3g %9.3g\n", side,
                  theta, order, st.tree_seconds, st.multipole_seconds, st.walk_seconds, st.m2l_seconds,
                  st.p2p_seconds, st.total_seconds, st.p2p_interactions / n, st.m2l_interactions / n,
                  st.m2l_interactions / st.m2l_seconds, st.p2p_interactions / st.p2p_seconds);
      std::fflush(stdout);
    }
  }
  return 0;
}
