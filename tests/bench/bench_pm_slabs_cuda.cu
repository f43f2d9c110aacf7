// The distributed long-range PM (issue #17) with its mesh work on FFTW-MPI and on each rank's
// GPU (gpu/pm_cuda_slabs.hpp): time per call and per phase, and their rms force difference.
// Each rank holds every ranks-th particle of a clustered set (test support), so every
// particle is routed to its slab's owner as in a run. Prints, on rank 0, the slowest rank's
// time per call (mean of `reps` after one warm-up call) and rank 0's phases.
//   mpirun -np 2 bench_pm_slabs_cuda [mesh=256] [particles_per_side=128] [double=0] [reps=3]
// OMP_NUM_THREADS sets the threads of each rank (FFTW-MPI, assignment, interpolation).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/parallel.hpp"
#include "core/timer.hpp"
#include "fmm/p2p.hpp"
#include "gpu/pm_cuda_slabs.hpp"
#include "pm/pm_solver.hpp"
#include "support/clustered_particles.hpp"

using namespace orbis;

namespace {

struct Timing {
  double per_call = 0;   // slowest rank, seconds
  PhaseTimes phases;     // rank 0's, per call
};

Timing time_solver(PmSolver& pm, const std::vector<Vec3d>& pos, std::vector<Vec3d>& acc, int reps, const Comm& comm) {
  pm.accelerations(pos, 1.0, acc);   // warm-up: buffers, plans, first touch
  Timing t;
  comm.barrier();
  Stopwatch watch;
  for (int r = 0; r < reps; ++r) pm.accelerations(pos, 1.0, acc, &t.phases);
  t.per_call = comm.max(watch.seconds()) / reps;
  return t;
}

void print(const char* name, const Timing& t, int reps) {
  std::printf("%-10s %8.4f s per call:", name, t.per_call);
  for (const auto& [phase, seconds] : t.phases.all()) std::printf("  %s %.4f", phase.c_str(), seconds / reps);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  parallel::init(&argc, &argv);
  int status = 0;
  try {
    const Comm world = Comm::world();
    const int mesh = argc > 1 ? std::atoi(argv[1]) : 256;
    const int side = argc > 2 ? std::atoi(argv[2]) : 128;
    const bool twice = argc > 3 && std::atoi(argv[3]) != 0;
    const int reps = argc > 4 ? std::atoi(argv[4]) : 3;
    const double box = 500.0;
    PmSettings s;
    s.box_mpc_h = box;
    s.grid_side = mesh;
    s.window = Window::tsc;
    s.r_s_mpc_h = 1.25 * box / mesh;
    s.double_mesh = twice;
    const std::vector<Vec3d> all = test::clustered_particles(side, box, 20261127);
    std::vector<Vec3d> mine;
    for (std::size_t i = static_cast<std::size_t>(world.rank()); i < all.size(); i += static_cast<std::size_t>(world.size()))
      mine.push_back(all[i]);
    const int device = gpu_device_for_rank(-1, world);
    PmSolver fftw(s, world), gpu(s, world);
    std::string why;
    auto slabs = make_cuda_pm_slabs(s, world, device, &why);
    if (!slabs) {
      if (world.is_root()) std::printf("no GPU slab PM: %s\n", why.c_str());
      parallel::finalize();
      return 77;
    }
    gpu.use_slab_transform(std::move(slabs));
    if (world.is_root())
      std::printf("# %d^3 particles, %s; %d ranks x %d threads\n# %s\n", side, fftw.describe().c_str(), world.size(),
                  parallel::threads(), gpu.describe().c_str());
    std::vector<Vec3d> a_fftw, a_gpu;
    const Timing t_fftw = time_solver(fftw, mine, a_fftw, reps, world);
    const Timing t_gpu = time_solver(gpu, mine, a_gpu, reps, world);
    double diff = 0, norm = 0;
    for (std::size_t q = 0; q < mine.size(); ++q) {
      diff += norm2(a_gpu[q] - a_fftw[q]);
      norm += norm2(a_fftw[q]);
    }
    const double rms = std::sqrt(world.sum(diff) / world.sum(norm));
    if (world.is_root()) {
      print("FFTW-MPI", t_fftw, reps);
      print("cuFFT", t_gpu, reps);
      std::printf("rms force difference %.2e\n", rms);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_pm_slabs_cuda: %s\n", e.what());
    status = 1;
    parallel::abort_all(1);
  }
  parallel::finalize();
  return status;
}
