// The PM step on the GPU (CudaPmSolver, cuFFT) against the FFTW path (PmSolver, all OpenMP
// threads) in one run on one machine, per phase:
//   128^3 particles, 256^3 mesh: clustered set (tests/support) in 500 Mpc/h
//   256^3 particles, 512^3 mesh: clustered set in 1 Gpc/h (the issue's z ~ 0 bar: PM <= 25 ms)
//   512^3 particles, 1024^3 mesh: a jittered grid in 100 Mpc/h (the issue's z = 99 run)
// Long-range TSC float mesh (TreePM defaults: r_s = 2.4 cells) for every size; at 256^3 also
// PM-only (two meshes), a double mesh, CIC, and the particles in random order (the atomics
// and the interpolation then find no locality). GPU phases are CUDA-event times of the
// device-pointer call (best of the repeats per phase, after a warm-up); "wall" is the
// host-vector call including the transfers (after a warm-up). "rms diff" is the GPU forces'
// rms relative difference from FFTW's; up to 256^3 both float meshes are also compared with
// FFTW's double mesh. "assign, float atomics" times a plain float atomicAdd assignment
// (not deterministic) of the same particles: what the fixed-point scheme costs.
// B/particle: device bytes of the PM (meshes, cuFFT work area, tables; nothing per particle)
// over the particle count. Sizes whose PM does not fit in device memory are skipped.
//   bench_pm_cuda [max_side=512] [repeats=3] [cpu_max_side=512]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/timer.hpp"
#include "gpu/cuda_check.cuh"
#include "gpu/device_buffer.cuh"
#include "gpu/pm_cuda.hpp"
#include "pm/mass_assignment.hpp"
#include "pm/pm_solver.hpp"
#include "support/clustered_particles.hpp"
#include "support/force_difference.hpp"
#include "support/gpu_skip.hpp"

using namespace orbis;

namespace {

const std::vector<const char*>& phases() { return PmSolver::phase_names(); }

struct Result {
  PhaseTimes best;     // per phase, seconds
  double total = 0;    // sum of the best phases
  double wall = 0;     // one call, host vectors, transfers included
};

double sum_phases(const PhaseTimes& t) {
  double s = 0;
  for (const char* p : phases()) s += t.get(p);
  return s;
}

void keep_best(PhaseTimes& best, const PhaseTimes& t, bool first) {
  for (const char* p : phases())
    if (first || t.get(p) < best.get(p)) best.add(p, t.get(p) - best.get(p));
}

// A grid of n^3 particles in grid order, each displaced by up to 0.1 spacings (z = 99-like).
std::vector<Vec3d> jittered_grid(int n, double box) {
  std::vector<Vec3d> pos(static_cast<std::size_t>(n) * n * n);
  const double spacing = box / n;
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; ++i) {
    std::mt19937_64 rng(1000 + i);
    std::uniform_real_distribution<double> jitter(-0.1, 0.1);
    for (int j = 0; j < n; ++j)
      for (int k = 0; k < n; ++k)
        pos[(static_cast<std::size_t>(i) * n + j) * n + k] = {(i + 0.5 + jitter(rng)) * spacing,
                                                              (j + 0.5 + jitter(rng)) * spacing,
                                                              (k + 0.5 + jitter(rng)) * spacing};
  }
  return pos;
}

// Positions and accelerations as device SoA arrays: what the CUDA step engine holds.
struct DeviceParticles {
  gpu::DeviceArray<double> x, y, z, ax, ay, az;
  std::size_t n = 0;
  explicit DeviceParticles(const std::vector<Vec3d>& pos) : n(pos.size()) {
    std::vector<double> h(n);
    gpu::DeviceArray<double>* arrays[3] = {&x, &y, &z};
    for (int d = 0; d < 3; ++d) {
      for (std::size_t i = 0; i < n; ++i) h[i] = pos[i][d];
      arrays[d]->ensure(n);
      ORBIS_CUDA_CHECK(cudaMemcpy(arrays[d]->data(), h.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    }
    ax.ensure(n);
    ay.ensure(n);
    az.ensure(n);
  }
};

Result run_gpu(CudaPmSolver& pm, const std::vector<Vec3d>& pos, double mass, int repeats,
               std::vector<Vec3d>& acc) {
  Result r;
  pm.accelerations(pos, mass, acc);   // warm-up: staging buffers, cuFFT's kernels
  Stopwatch watch;
  pm.accelerations(pos, mass, acc);   // the forces for the comparison
  r.wall = watch.seconds();
  DeviceParticles d(pos);
  cudaStream_t stream;
  ORBIS_CUDA_CHECK(cudaStreamCreate(&stream));
  pm.set_phase_timing(true);
  for (int k = 0; k < repeats; ++k) {
    pm.accelerations(d.x.data(), d.y.data(), d.z.data(), d.n, mass, d.ax.data(), d.ay.data(), d.az.data(), stream);
    keep_best(r.best, pm.phase_times(), k == 0);
  }
  pm.set_phase_timing(false);
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  ORBIS_CUDA_CHECK(cudaStreamDestroy(stream));
  r.total = sum_phases(r.best);
  return r;
}

Result run_cpu(const PmSettings& s, const std::vector<Vec3d>& pos, double mass, int repeats,
               std::vector<Vec3d>& acc) {
  Result r;
  PmSolver pm(s);
  for (int k = 0; k < repeats; ++k) {
    PhaseTimes t;
    Stopwatch watch;
    pm.accelerations(pos, mass, acc, &t);
    r.wall = k == 0 ? watch.seconds() : std::min(r.wall, watch.seconds());
    keep_best(r.best, t, k == 0);
  }
  r.total = sum_phases(r.best);
  return r;
}

// The non-deterministic baseline: float atomicAdd of each weight straight into the mesh.
template <int P>
__global__ void float_atomic_assign(const double* x, const double* y, const double* z, std::size_t count,
                                    double box, double cells_per_length, int n, float value, float* mesh) {
  const std::size_t p = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (p >= count) return;
  const WindowStencil<P> s(cell_coordinate(x[p], box, cells_per_length, 0), cell_coordinate(y[p], box, cells_per_length, 0),
                           cell_coordinate(z[p], box, cells_per_length, 0), n);
  const std::size_t padded = 2 * (n / 2 + 1);
  for (int o = 0; o < P; ++o)
    for (int a = 0; a < P; ++a)
      for (int c = 0; c < P; ++c)
        atomicAdd(mesh + (static_cast<std::size_t>(s.i[o]) * n + s.j[a]) * padded + s.k[c],
                  static_cast<float>(value * s.wx[o] * s.wy[a] * s.wz[c]));
}

double float_atomic_assign_seconds(const PmSettings& s, const std::vector<Vec3d>& pos, int repeats) {
  const int n = s.grid_side;
  const std::size_t reals = static_cast<std::size_t>(n) * n * 2 * (n / 2 + 1);
  std::size_t free_bytes = 0, total = 0;
  ORBIS_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  if (reals * sizeof(float) + pos.size() * 48 > free_bytes / 2) return -1;
  DeviceParticles d(pos);
  gpu::DeviceArray<float> mesh;
  mesh.ensure(reals);
  cudaEvent_t start, stop;
  ORBIS_CUDA_CHECK(cudaEventCreate(&start));
  ORBIS_CUDA_CHECK(cudaEventCreate(&stop));
  double best = 1e30;
  const unsigned blocks = static_cast<unsigned>((d.n + 255) / 256);
  for (int k = 0; k <= repeats; ++k) {
    ORBIS_CUDA_CHECK(cudaEventRecord(start));
    ORBIS_CUDA_CHECK(cudaMemsetAsync(mesh.data(), 0, reals * sizeof(float)));
    if (s.window == Window::cic)
      float_atomic_assign<2><<<blocks, 256>>>(d.x.data(), d.y.data(), d.z.data(), d.n, s.box_mpc_h, n / s.box_mpc_h,
                                              n, 1.0f, mesh.data());
    else
      float_atomic_assign<3><<<blocks, 256>>>(d.x.data(), d.y.data(), d.z.data(), d.n, s.box_mpc_h, n / s.box_mpc_h,
                                              n, 1.0f, mesh.data());
    ORBIS_CUDA_CHECK(cudaEventRecord(stop));
    ORBIS_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    ORBIS_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (k > 0) best = std::min(best, 1e-3 * ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

void print_header() {
  std::printf("%-34s %-6s", "case", "path");
  for (const char* p : {"assign", "fft", "green", "gradient", "interp", "total", "wall"}) std::printf(" %9s", p);
  std::printf(" %9s %10s\n", "rms diff", "B/particle");
}

void print_row(const std::string& name, const char* path, const Result& r, const std::string& tail) {
  std::printf("%-34s %-6s", name.c_str(), path);
  for (const char* p : phases()) std::printf(" %9.2f", 1e3 * r.best.get(p));
  std::printf(" %9.2f %9.2f %s\n", 1e3 * r.total, 1e3 * r.wall, tail.c_str());
}

void print_ratio(const Result& cpu, const Result& gpu) {
  std::printf("%-34s %-6s", "", "ratio");
  for (const char* p : phases()) std::printf(" %8.0fx", gpu.best.get(p) > 0 ? cpu.best.get(p) / gpu.best.get(p) : 0.0);
  std::printf(" %8.0fx %8.0fx\n", cpu.total / gpu.total, cpu.wall / gpu.wall);
}

struct Case {
  std::string name;
  PmSettings settings;
  bool cpu = true;
  bool shuffle = false;
  bool atomics_baseline = false;
  bool against_double = false;   // float mesh: both paths' error against FFTW's double mesh
};

void run_case(const Case& c, const std::vector<Vec3d>& given, double mass, int repeats, int cpu_repeats) {
  std::vector<Vec3d> shuffled;
  if (c.shuffle) {
    shuffled = given;
    std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(5));
  }
  const std::vector<Vec3d>& pos = c.shuffle ? shuffled : given;
  const std::size_t n = pos.size();
  const CudaPmMemory plan = CudaPmSolver::plan_memory(c.settings, n);
  std::size_t free_bytes = 0, total_bytes = 0;
  ORBIS_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (plan.total() + 6 * n * sizeof(double) * 2 > free_bytes) {
    std::printf("%-34s skipped: needs %.1f GiB of device memory, %.1f GiB free\n", c.name.c_str(),
                (plan.total() + 12 * n * sizeof(double)) / 1073741824.0, free_bytes / 1073741824.0);
    return;
  }
  std::vector<Vec3d> acc_gpu, acc_cpu;
  Result gpu;
  {
    CudaPmSolver pm(c.settings);
    gpu = run_gpu(pm, pos, mass, repeats, acc_gpu);
  }
  const std::string bytes = fmt::format(" {:10.1f}   (meshes {:.1f}, cuFFT work {:.1f}, tables {:.2f})",
                                        static_cast<double>(plan.total()) / n, static_cast<double>(plan.meshes) / n,
                                        static_cast<double>(plan.fft_work) / n, static_cast<double>(plan.tables) / n);
  if (c.cpu) {
    const Result cpu = run_cpu(c.settings, pos, mass, cpu_repeats, acc_cpu);
    print_row(c.name, "FFTW", cpu, "");
    print_row("", "cuFFT", gpu, fmt::format(" {:9.1e}{}", test::rms_relative_difference(acc_gpu, acc_cpu), bytes));
    print_ratio(cpu, gpu);
    if (c.against_double) {
      PmSettings twice = c.settings;
      twice.double_mesh = true;
      std::vector<Vec3d> exact;
      PmSolver(twice).accelerations(pos, mass, exact);
      std::printf("%-34s float mesh vs FFTW double mesh, rms relative difference: FFTW %.1e, cuFFT %.1e\n", "",
                  test::rms_relative_difference(acc_cpu, exact), test::rms_relative_difference(acc_gpu, exact));
    }
  } else {
    print_row(c.name, "cuFFT", gpu, fmt::format(" {:>9}{}", "", bytes));
  }
  if (c.atomics_baseline) {
    const double t = float_atomic_assign_seconds(c.settings, pos, repeats);
    if (t > 0)
      std::printf("%-34s %-6s %9.2f   (fixed point above: %.2f; %.2fx)\n", "  assign, float atomics", "cuFFT",
                  1e3 * t, 1e3 * gpu.best.get("pm_assign"), gpu.best.get("pm_assign") / t);
  }
  std::fflush(stdout);
}

PmSettings settings(int mesh, double box, Window w, bool double_mesh, bool long_range) {
  PmSettings s;
  s.box_mpc_h = box;
  s.grid_side = mesh;
  s.window = w;
  s.double_mesh = double_mesh;
  s.r_s_mpc_h = long_range ? 2.4 * box / mesh : 0.0;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const int max_side = argc > 1 ? std::atoi(argv[1]) : 512;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 3;
  const int cpu_max_side = argc > 3 ? std::atoi(argv[3]) : 512;
  test::require_gpu_or_skip();
  cudaDeviceProp prop;
  ORBIS_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("PM step: cuFFT on %s vs FFTW on %d OpenMP threads; milliseconds (best of %d on the GPU)\n",
              prop.name, omp_get_max_threads(), repeats);
  print_header();
  for (int side : {128, 256, 512}) {
    if (side > max_side) break;
    const double box = side == 512 ? 100.0 : 1000.0 * side / 256;
    const std::vector<Vec3d> pos = side == 512 ? jittered_grid(side, box) : test::clustered_particles(side, box, 11);
    const double mass = 0.3144 * 27.754 * box * box * box / static_cast<double>(pos.size());
    const int mesh = 2 * side;
    const bool cpu = side <= cpu_max_side;
    const int cpu_repeats = side >= 512 ? 1 : 2;
    const std::string size = fmt::format("{}^3/{}^3 ", side, mesh);
    run_case({size + "tsc float long", settings(mesh, box, Window::tsc, false, true), cpu, false, true, side <= 256},
             pos, mass, repeats, cpu_repeats);
    if (side == 256) {
      run_case({size + "tsc float long, shuffled", settings(mesh, box, Window::tsc, false, true), false, true, true},
               pos, mass, repeats, cpu_repeats);
      run_case({size + "cic float long", settings(mesh, box, Window::cic, false, true), false}, pos, mass, repeats,
               cpu_repeats);
      run_case({size + "tsc double long", settings(mesh, box, Window::tsc, true, true), cpu}, pos, mass, repeats,
               cpu_repeats);
      run_case({size + "tsc float PM-only", settings(mesh, box, Window::tsc, false, false), cpu}, pos, mass, repeats,
               cpu_repeats);
    }
  }
  std::printf("assign includes (FFTW) the sort, (cuFFT) zeroing and converting the fixed-point mesh; fft: all "
              "transforms of the step; interp: all components (and FFTW's return to the caller's order).\n");
  return 0;
}
