// Benchmark of the short-range forces of an active subset (block time steps): the time of a
// step whose targets are the fraction f of the particles with the largest accelerations (the
// deep bins: they sit in the dense regions), with the tree built anew or refitted from the
// last build, against the step of all particles. Clustered set (tests/support), the run's
// default settings, CPU P2P; every phase is the median of --reps steps, each after a small
// drift of every particle (as between the sync points of a run).
//
//   bench_active_forces [--reps=R] [N]      (N^3 particles, default 64)
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/timer.hpp"
#include "core/units.hpp"
#include "fmm/p2p_cpu.hpp"
#include "fmm/short_range.hpp"
#include "support/clustered_particles.hpp"

using namespace orbis;

namespace {

struct Row {
  double tree = 0, mpole = 0, walk = 0, m2l = 0, p2p = 0, total = 0, pairs = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int side = 64, reps = 5;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--reps=", 7) == 0) reps = std::atoi(argv[i] + 7);
    else side = std::atoi(argv[i]);
  }
  const double box = 100.0;
  const Particles set = test::clustered_particle_set(side, box, 2024);
  std::vector<Vec3d> pos = set.pos;
  const std::size_t n = pos.size();
  const double spacing = box / side;
  ShortRangeSettings s;
  s.box_mpc_h = box;
  s.r_s = 1.2 * spacing;
  s.r_cut = 5.5 * s.r_s;
  s.softening = 0.025 * spacing;
  s.g_mass = units::G * set.mass;
  ShortRangeSolver solver(s);
  CpuP2PEvaluator p2p;

  // The particles ranked by |g|: the active fraction f is the top f of them.
  std::vector<Vec3d> acc;
  solver.compute(pos, p2p, acc);
  std::vector<std::size_t> rank(n);
  std::iota(rank.begin(), rank.end(), 0);
  std::sort(rank.begin(), rank.end(), [&](std::size_t a, std::size_t b) { return norm2(acc[a]) > norm2(acc[b]); });

  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  auto drift = [&] {
    for (Vec3d& x : pos)
      for (int d = 0; d < 3; ++d) x[d] = periodic_wrap_position(x[d] + 0.002 * spacing * normal(rng), box);
  };
  auto time_step = [&](double fraction, bool refit) {
    std::vector<std::uint8_t> bins(n, 0);
    const auto n_active = static_cast<std::size_t>(fraction * static_cast<double>(n));
    for (std::size_t q = 0; q < std::max<std::size_t>(n_active, 1); ++q) bins[rank[q]] = 1;
    std::vector<double> tree, mpole, walk, m2l, p2ps, total, pairs;
    for (int r = 0; r < reps; ++r) {
      drift();
      solver.compute(pos, p2p, acc);   // the last full step: the tree a refit starts from
      drift();
      ShortRangeTargets targets;
      if (fraction < 1) targets = ShortRangeTargets{&bins, 1, refit};
      Stopwatch w;
      solver.begin(pos, p2p, targets);
      const ShortRangeStats st = solver.end(acc);
      total.push_back(w.seconds());
      tree.push_back(st.tree_seconds);
      mpole.push_back(st.multipole_seconds);
      walk.push_back(st.walk_seconds);
      m2l.push_back(st.m2l_seconds);
      p2ps.push_back(st.p2p_seconds);
      pairs.push_back(st.p2p_interactions);
    }
    return Row{median(tree), median(mpole), median(walk), median(m2l), median(p2ps), median(total), median(pairs)};
  };

  std::printf("short-range forces of an active subset: %d^3 clustered particles in %.0f Mpc/h, %d threads, "
              "median of %d steps (seconds)\n", side, box, omp_get_max_threads(), reps);
  std::printf("%9s %7s | %8s %8s %8s %8s %8s %8s %10s\n", "active", "tree", "tree", "mpoles", "walk", "m2l", "p2p", "total",
              "pairs");
  for (double f : {1.0, 0.5, 0.1, 0.01, 0.001, 0.0}) {
    for (bool refit : {false, true}) {
      if (f == 1.0 && refit) continue;
      const Row r = time_step(f, refit);
      std::printf("%9.4f %7s | %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f %10.3e\n", f,
                  f == 1.0 ? "built" : refit ? "refit" : "built", r.tree, r.mpole, r.walk, r.m2l, r.p2p, r.total, r.pairs);
    }
  }
  return 0;
}
