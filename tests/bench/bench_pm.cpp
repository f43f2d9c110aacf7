// One PM step: 128^3 particles on a 256^3 mesh (the default of 2 x particles per side), split
// into its phases, for CIC and TSC, float and double meshes, and both modes: PM-only (full
// force on two interlaced meshes: two assignments, 2 forward + 6 inverse FFTs, two
// interpolations) and the long range of TreePM (one mesh: 1 + 3 FFTs). The bar: assignment and
// interpolation each cost less than one FFT of the mesh (per mesh). "full/long" is the PM-only
// step's cost over the one-mesh step's; the one-mesh PM-only step this scheme replaced did the
// same work as the long-range step but read its influence function from a table instead of
// calling exp() (~0.035 s less at 256^3, 2 cores), so new/old is ~10% above full/long.
// Measured (2 cores, quiet machine, float, TSC): full 0.91 s, long 0.51 s, the old one-mesh
// PM-only step 0.45 s: new/old 2.0 (CIC 2.1, double 1.95); per mesh, assignment 0.83 and
// interpolation 0.91 of one FFT.
//   bench_pm [particles_per_side=128] [mesh=256] [repeats=3] [shuffle=0]
// Threads: OMP_NUM_THREADS (the task asks for 2).
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "core/timer.hpp"
#include "pm/fixed_point_mesh.hpp"
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
  std::printf("%-6s %-6s %-5s %9s %9s %9s %9s %9s %9s %9s | %8s %8s %9s\n", "window", "mesh", "mode",
              "assign", "fft", "green", "gradient", "interp", "total", "1 FFT", "asg/FFT", "int/FFT",
              "full/long");
  for (bool twice : {false, true})
    for (orbis::Window w : {orbis::Window::cic, orbis::Window::tsc}) {
      double long_total = 0;
      for (bool full : {false, true}) {
        orbis::PmSettings s;
        s.box_mpc_h = box;
        s.grid_side = mesh;
        s.window = w;
        s.double_mesh = twice;
        s.r_s_mpc_h = full ? 0.0 : 2.4 * box / mesh;
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
        // The step's own FFTs give the cost of one FFT: 1 forward + 3 inverse per mesh.
        const double one_fft = best.get("pm_fft") / (full ? 8.0 : 4.0);
        const double assign = best.get("pm_assign"), interp = best.get("pm_interpolate");
        // Per mesh, as the bar is stated for one mesh's assignment, interpolation and FFT.
        const double meshes = full ? 2.0 : 1.0;
        if (!full) long_total = best_total;
        std::printf("%-6s %-6s %-5s %8.3fs %8.3fs %8.3fs %8.3fs %8.3fs %8.3fs %8.3fs | %8.2f %8.2f %9s\n",
                    orbis::window_name(w), twice ? "double" : "float", full ? "full" : "long", assign,
                    best.get("pm_fft"), best.get("pm_green"), best.get("pm_gradient"), interp, best_total,
                    one_fft, assign / meshes / one_fft, interp / meshes / one_fft,
                    full ? fmt::format("{:.2f}", best_total / long_total).c_str() : "");
      }
    }
  std::printf("assign includes the sort; interp: all three components in one pass, and the "
              "return to the caller's order; fft: all FFTs of the step (full: 2 forward + 6 inverse, "
              "long: 1 + 3); 1 FFT: one mesh's transform; asg/FFT, int/FFT: per mesh.\n");

  // What the PM's determinism costs (pm_solver.hpp, "Determinism"): its reproducible transforms
  // against FFTW's fast 3D plan; its fixed-point assignment (the only one there is) against one
  // reproducible transform.
  std::printf("\ndeterminism, best of %d: forward + backward of one mesh, fast plan vs reproducible; "
              "assignment (sorted particles, TSC) in 64-bit fixed point\n", repeats);
  const orbis::SortedParticles sorted = orbis::sort_for_mesh(pos, box, mesh, orbis::Window::tsc);
  auto best_of = [&](auto&& work) {
    double best = 1e30;
    for (int r = 0; r < repeats; ++r) {
      orbis::Stopwatch watch;
      work();
      best = std::min(best, watch.seconds());
    }
    return best;
  };
  auto compare = [&](auto real) {
    using Real = decltype(real);
    orbis::FftMesh<Real> fast(mesh, orbis::Comm::self(), orbis::FftPlan::fast);
    orbis::FftMesh<Real> lines(mesh, orbis::Comm::self(), orbis::FftPlan::reproducible);
    orbis::FftMesh<Real> lo(mesh, orbis::Comm::self(), orbis::FftPlan::reproducible);
    orbis::FftMesh<Real> hi(mesh, orbis::Comm::self(), orbis::FftPlan::reproducible);
    const double t_fast = best_of([&] { fast.forward(); fast.backward(); });
    const double t_lines = best_of([&] { lines.forward(); lines.backward(); });
    auto* l = reinterpret_cast<std::uint32_t*>(lo.real_data());
    auto* h = reinterpret_cast<std::uint32_t*>(hi.real_data());
    const double scale = orbis::fixed_point_scale(pos.size());
    const double mean = orbis::pm_fixed_point_mean(pos.size(), scale, mesh);
    const double t_fixed = best_of([&] {
      orbis::assign_fixed_point(lines, sorted, scale, l, h);
      orbis::fixed_point_to_mesh(l, h, mean, 1.0 / scale, lines);
    });
    std::printf("%-6s fft: fast %.3fs, reproducible %.3fs (%.2fx); assign in fixed point %.3fs (%.2fx a "
                "reproducible forward + backward)\n",
                sizeof(Real) == 4 ? "float" : "double", t_fast, t_lines, t_lines / t_fast, t_fixed, t_fixed / t_lines);
  };
  compare(0.0f);
  compare(0.0);
  return 0;
}
