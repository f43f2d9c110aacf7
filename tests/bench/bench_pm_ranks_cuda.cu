// The long-range PM over ranks with the particles on the GPUs (gpu/pm_cuda_ranks.hpp), the
// step engine's PM over ranks, against the one-GPU CudaPmSolver (gpu/pm_cuda.hpp) on the same
// particles: where a PM step's time goes when the mesh is split over ranks.
//   mpirun -np P bench_pm_ranks_cuda [particles_per_side=256] [mesh=768] [reps=5]
// A clustered set (test support) in 1 Gpc/h, TSC, interlaced float meshes, r_s = 2.4 cells
// (the headline's defaults). Each rank holds the particles of an x slab of equal counts (what
// the ORB domains of a few ranks nearly are), on its GPU (local rank modulo the devices), so
// only those near a slab's edge are routed. Prints on rank 0: the slowest rank's seconds per
// call (mean of `reps` after one warm-up call), rank 0's phases per call, its exchange's
// parts, and, with one rank, CudaPmSolver's time on all the particles (the one-GPU PM).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/timer.hpp"
#include "fmm/p2p.hpp"
#include "gpu/device_alltoallv.cuh"
#include "gpu/pm_cuda.hpp"
#include "gpu/pm_cuda_ranks.hpp"
#include "pm/pm_solver.hpp"
#include "support/clustered_particles.hpp"

using namespace orbis;

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) fail("{}: {}", what, cudaGetErrorString(status));
}

// x | y | z blocks of n doubles on the current device.
struct DeviceBlocks {
  double* data = nullptr;
  explicit DeviceBlocks(const std::vector<Vec3d>& pos) {
    const std::size_t n = pos.size();
    std::vector<double> blocks(std::max<std::size_t>(3 * n, 1));
    for (std::size_t i = 0; i < n; ++i)
      for (int d = 0; d < 3; ++d) blocks[static_cast<std::size_t>(d) * n + i] = pos[i][d];
    check(cudaMalloc(&data, blocks.size() * sizeof(double)), "cudaMalloc");
    check(cudaMemcpy(data, blocks.data(), blocks.size() * sizeof(double), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  ~DeviceBlocks() { cudaFree(data); }
};

}  // namespace

int main(int argc, char** argv) {
  parallel::init(&argc, &argv);
  int status = 0;
  try {
    const Comm world = Comm::world();
    const int side = argc > 1 ? std::atoi(argv[1]) : 256;
    const int mesh = argc > 2 ? std::atoi(argv[2]) : 768;
    const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
    const double box = 1000.0;
    PmSettings s;
    s.box_mpc_h = box;
    s.grid_side = mesh;
    s.window = Window::tsc;
    s.r_s_mpc_h = 2.4 * box / mesh;
    s.interlaced = true;
    std::vector<Vec3d> all = test::clustered_particles(side, box, 20261201);
    std::sort(all.begin(), all.end(), [](const Vec3d& a, const Vec3d& b) { return a[0] < b[0]; });
    const std::size_t ranks = static_cast<std::size_t>(world.size()), rank = static_cast<std::size_t>(world.rank());
    const std::vector<Vec3d> mine(all.begin() + static_cast<std::ptrdiff_t>(all.size() * rank / ranks),
                                  all.begin() + static_cast<std::ptrdiff_t>(all.size() * (rank + 1) / ranks));
    const int device = gpu_device_for_rank(-1, world);
    std::string why;
    std::unique_ptr<CudaPmRanks> pm = make_cuda_pm_ranks(s, world, device, &why);
    if (!pm) {
      if (world.is_root()) std::printf("no PM over ranks on the GPUs: %s\n", why.c_str());
      parallel::finalize();
      return 77;
    }
    check(cudaSetDevice(device), "cudaSetDevice");
    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    const DeviceBlocks pos(mine);
    double* acc = nullptr;
    check(cudaMalloc(&acc, std::max<std::size_t>(3 * mine.size(), 1) * sizeof(double)), "cudaMalloc");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    if (world.is_root())
      std::printf("# %d^3 clustered particles in %.0f Mpc/h, x slabs of equal counts; %d ranks x %d threads\n# %s\n",
                  side, box, world.size(), parallel::threads(), pm->describe().c_str());

    pm->accelerations(pos.data, mine.size(), 1.0, acc, stream);   // warm-up: plans, exchange, pool
    if (gpu::DeviceAlltoallv* x = pm->peer_transposes()) x->reset_times();
    PhaseTimes phases;
    world.barrier();
    Stopwatch watch;
    for (int r = 0; r < reps; ++r) pm->accelerations(pos.data, mine.size(), 1.0, acc, stream, &phases);
    const double per_call = world.max(watch.seconds()) / reps;
    if (world.is_root()) {
      std::printf("PM over %d ranks: %.4f s per call (slowest rank); rank 0 per call:", world.size(), per_call);
      double sum = 0;
      for (const auto& [phase, seconds] : phases.all()) {
        std::printf("  %s %.4f", phase.c_str(), seconds / reps);
        sum += seconds / reps;
      }
      std::printf("  (sum %.4f)\n", sum);
      if (const gpu::DeviceAlltoallv* x = pm->peer_transposes()) {
        const gpu::ExchangeTimes& t = x->times();
        std::printf("  its exchange per call: %.1f calls, fill %.4f, peer copies %.4f, mpi/barriers %.4f s; %.2f GB "
                    "received\n",
                    static_cast<double>(t.calls) / reps, t.fill / reps, t.peer / reps, t.mpi / reps,
                    static_cast<double>(t.bytes) / 1e9 / reps);
      }
      const PmRankTraffic& traffic = pm->traffic();
      std::printf("  rank 0 sends per call: %zu of %zu particles, %.1f MiB ghost planes, %.1f MiB transposes\n",
                  traffic.particles_away, traffic.particles, traffic.ghost_bytes / 1048576.0,
                  traffic.transpose_bytes / 1048576.0);
    }
    pm.reset();
    if (world.size() == 1) {
      CudaPmSolver one(s, device);
      const std::size_t n = mine.size();
      one.accelerations(pos.data, pos.data + n, pos.data + 2 * n, n, 1.0, acc, acc + n, acc + 2 * n, stream);
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      Stopwatch one_watch;
      for (int r = 0; r < reps; ++r)
        one.accelerations(pos.data, pos.data + n, pos.data + 2 * n, n, 1.0, acc, acc + n, acc + 2 * n, stream);
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      std::printf("one-GPU CudaPmSolver: %.4f s per call;", one_watch.seconds() / reps);
      one.set_phase_timing(true);   // the phases of one more call, on the device's clock
      one.accelerations(pos.data, pos.data + n, pos.data + 2 * n, n, 1.0, acc, acc + n, acc + 2 * n, stream);
      const PhaseTimes one_phases = one.phase_times();
      for (const auto& [phase, seconds] : one_phases.all()) std::printf("  %s %.4f", phase.c_str(), seconds);
      std::printf("\n");
    }
    cudaFree(acc);
    cudaStreamDestroy(stream);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_pm_ranks_cuda: %s\n", e.what());
    status = 1;
    parallel::abort_all(1);
  }
  parallel::finalize();
  return status;
}
