// One PM step: 128^3 particles on a 256^3 mesh (the PM-only default of 2 x particles per side),
// split into its phases, for CIC and TSC and float and double meshes. The bar: assignment and
// interpolation each cost less than one FFT of the mesh.
//   bench_pm [particles_per_side=128] [mesh=256] [repeats=3] [shuffle=0]
// Threads: OMP_NUM_THREADS (the task asks for 2).
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/timer.hpp"
#include "pm/pm_solver.hpp"

int main(int argc, char** argv) {
  const int np = argc > 1 ? std::atoi(argv[1]) : 128;
  const int mesh = argc > 2 ? std::atoi(argv[2]) : 256;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
  const bool shuffle = argc > 4 && std::atoi(argv[4]) != 0;
  const double box = 256.0;
  // A displaced lattice in lattice order (as the ICs make it), or shuffled: then every particle
  // is somewhere else in memory than its neighbours on the mesh, the worst case for the sort.
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> jitter(-0.5, 0.5);
  std::vector<orbis::Vec3d> pos;
  pos.reserve(static_cast<std::size_t>(np) * np * np);
  const double spacing = box / np;
  for (int i = 0; i < np; ++i)
    for (int j = 0; j < np; ++j)
      for (int k = 0; k < np; ++k)
        pos.push_back({(i + 0.5 + jitter(rng)) * spacing, (j + 0.5 + jitter(rng)) * spacing,
                       (k + 0.5 + jitter(rng)) * spacing});
  if (shuffle) std::shuffle(pos.begin(), pos.end(), rng);

  std::printf("PM step: %d^3 particles (%s), %d^3 mesh, %d threads, best of %d per phase\n", np,
              shuffle ? "shuffled" : "lattice order", mesh, omp_get_max_threads(), repeats);
  std::printf("%-6s %-6s %9s %9s %9s %9s %9s %9s %9s | %8s %8s\n", "window", "mesh", "assign",
              "fft(4)", "green", "gradient", "interp", "total", "1 FFT", "asg/FFT", "int/FFT");
  for (bool twice : {false, true})
    for (orbis::Window w : {orbis::Window::cic, orbis::Window::tsc}) {
      orbis::PmSettings s;
      s.box_mpc_h = box;
      s.grid_side = mesh;
      s.window = w;
      s.double_mesh = twice;
      orbis::PmSolver pm(s);
      std::vector<orbis::Vec3d> acc;
      // Each phase's best over the repeats: on a shared machine that is the least disturbed.
      orbis::PhaseTimes best;
      double best_total = 1e30;
      for (int r = 0; r < repeats; ++r) {
        orbis::PhaseTimes t;
        orbis::Stopwatch watch;
        pm.accelerations(pos, 1.0, acc, &t);
        best_total = std::min(best_total, watch.seconds());
        for (const char* phase : orbis::PmSolver::phase_names()) {
          const double seen = best.get(phase);
          if (r == 0 || t.get(phase) < seen) best.add(phase, t.get(phase) - seen);
        }
      }
      // The step's own FFTs (one forward, three inverse) give the cost of one FFT.
      const double one_fft = best.get("pm_fft") / 4.0;
      const double assign = best.get("pm_assign"), interp = best.get("pm_interpolate");
      std::printf("%-6s %-6s %8.3fs %8.3fs %8.3fs %8.3fs %8.3fs %8.3fs %8.3fs | %8.2f %8.2f\n",
                  orbis::window_name(w), twice ? "double" : "float", assign, best.get("pm_fft"),
                  best.get("pm_green"), best.get("pm_gradient"), best.get("pm_interpolate"), best_total,
                  one_fft, assign / one_fft, interp / one_fft);
    }
  std::printf("assign includes the sort; interp: all three components in one pass, and the "
              "return to the caller's order; fft(4): the forward and three inverse FFTs of the "
              "step; 1 FFT: fft(4) / 4.\n");
  return 0;
}
