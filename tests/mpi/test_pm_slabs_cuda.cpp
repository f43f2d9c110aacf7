// The distributed long-range PM with its mesh work on each rank's GPU (gpu/pm_cuda_slabs.hpp:
// cuFFT slabs and host-staged transposes) against the host PmSolver (FFTW, line by line) on
// the same ranks and the same particles, and against the one-rank PmSolver on all of them. The particles are
// spread over the ranks with no regard to the slabs; mesh sides that 3 ranks do not divide
// (32: 11, 11, 10 planes), a rank with no plane (4 on 3 ranks: 2, 2, 0), slabs thinner than
// the stencil, CIC and TSC, float and double meshes, and a second step on the same solvers.
// All ranks share the machine's GPUs (local rank modulo devices, as the engine chooses).
//
// Bars. Against the host PM both paths assign the same host density mesh and interpolate the
// same way; only the transforms differ (cuFFT's against FFTW's, each rounding in the mesh
// precision), so the rms of |a - a_ref| over the rms |a_ref| is set by the transforms'
// rounding: ~1e-7 for a float mesh (the one-GPU PM's float transforms measure 2e-7 against a
// double mesh, tests/gpu/test_pm_cuda.cpp), bar 2e-6; ~1e-15 for double, bar 1e-12. Against
// the one-rank solver the density's float sums also run in another order (the routed
// particles), so the bar is test_pm_ranks' (largest difference over the rms force: 1e-5 for
// float, 1e-12 for double). Returns 77 (skipped) on every rank unless every rank has a GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/params.hpp"
#include "fmm/p2p.hpp"
#include "fmm/p2p_cuda_factory.hpp"
#include "gpu/pm_cuda_slabs.hpp"
#include "integrate/host_engine.hpp"
#include "pm/pm_solver.hpp"
#include "support/clustered_particles.hpp"
#include "support/gpu_ranks.hpp"
#include "support/rank_shares.hpp"

using orbis::Comm;
using orbis::Vec3d;

namespace {


// sqrt(sum |a - ref|^2 / sum |ref|^2) over every rank's particles.
double rms_difference(const std::vector<Vec3d>& a, const std::vector<Vec3d>& ref, const Comm& comm) {
  double diff = 0, norm = 0;
  for (std::size_t q = 0; q < a.size(); ++q) {
    diff += orbis::norm2(a[q] - ref[q]);
    norm += orbis::norm2(ref[q]);
  }
  return std::sqrt(comm.sum(diff) / comm.sum(norm));
}

// Largest |a - ref| over the local particles (ref indexed through `index`), relative to the
// rms |ref| over all of them (test_pm_ranks' measure).
double max_difference(const std::vector<Vec3d>& a, const std::vector<Vec3d>& ref, const std::vector<std::size_t>& index,
                      const Comm& comm) {
  double rms = 0;
  for (const Vec3d& r : ref) rms += orbis::norm2(r);
  rms = std::sqrt(rms / static_cast<double>(ref.size()));
  double worst = 0;
  for (std::size_t q = 0; q < index.size(); ++q) worst = std::max(worst, orbis::norm(a[q] - ref[index[q]]));
  return comm.max(worst) / rms;
}

struct Case {
  int mesh;
  orbis::Window window;
  bool double_mesh;
};

}  // namespace

TEST_CASE("cuFFT slab PM forces equal FFTW-MPI's and the one-rank PM's to the transforms' rounding") {
  const Comm world = Comm::world();
  const int device = orbis::test::rank_gpu_or_skip(world);
  const double box = 50.0;
  const std::vector<Vec3d> all = orbis::test::clustered_particles(16, box, 2026);
  const Case cases[] = {
      {32, orbis::Window::tsc, false},   // 3 ranks: 11, 11, 10 planes
      {32, orbis::Window::tsc, true},
      {20, orbis::Window::cic, true},    // 3 ranks: 7, 7, 6
      {24, orbis::Window::tsc, false},
      {6, orbis::Window::tsc, true},     // 2 planes a rank, 3 ghost planes
      {4, orbis::Window::tsc, true},     // 3 ranks: 2, 2 and 0 planes
      {4, orbis::Window::cic, false},
  };
  for (const Case& c : cases) {
    const std::string what = std::to_string(c.mesh) + "^3 " + orbis::window_name(c.window) + ' ' +
                             (c.double_mesh ? "double" : "float") + ", " + std::to_string(world.size()) + " ranks";
    INFO(what);
    const orbis::PmSettings s =
        orbis::test::slab_test_settings(box, c.mesh, c.window, c.double_mesh, /*interlaced=*/false);
    // Particle i lives on rank (7 i) mod P: every rank holds particles from all over the box.
    std::vector<Vec3d> mine;
    std::vector<std::size_t> index;
    for (std::size_t i = 0; i < all.size(); ++i)
      if (static_cast<int>((7 * i) % static_cast<std::size_t>(world.size())) == world.rank())
        mine.push_back(all[i]), index.push_back(i);
    orbis::PmSolver fftw(s, world), gpu(s, world);
    std::string why;
    auto slabs = orbis::make_cuda_pm_slabs(s, world, device, &why);
    REQUIRE_MESSAGE(slabs != nullptr, why);
    gpu.use_slab_transform(std::move(slabs));
    CHECK(gpu.describe().find("cuFFT slabs over " + std::to_string(world.size()) + " ranks") != std::string::npos);
    if (world.is_root()) std::printf("%s\n", gpu.describe().c_str());   // rank 0's device and pinned bytes
    for (int step = 0; step < 2; ++step) {
      std::vector<Vec3d> moved = all;
      if (step == 1) {   // the same solvers again (buffers reused), the particles moved
        for (Vec3d& x : mine) x.x = std::fmod(x.x + 3.3, box);
        for (Vec3d& x : moved) x.x = std::fmod(x.x + 3.3, box);
      }
      std::vector<Vec3d> ref_one, ref_mpi, acc;
      orbis::PmSolver(s, Comm::self()).accelerations(moved, 0.7, ref_one);
      fftw.accelerations(mine, 0.7, ref_mpi);
      orbis::PhaseTimes times;
      gpu.accelerations(mine, 0.7, acc, &times);
      REQUIRE(acc.size() == mine.size());
      const double vs_mpi = rms_difference(acc, ref_mpi, world);
      const double vs_one = max_difference(acc, ref_one, index, world);
      const double fftw_vs_one = max_difference(ref_mpi, ref_one, index, world);
      if (world.is_root())
        std::printf("%-28s step %d: rms vs FFTW-MPI %.2e, max vs one rank %.2e (FFTW-MPI's own %.2e)\n", what.c_str(),
                    step, vs_mpi, vs_one, fftw_vs_one);
      CHECK(vs_mpi < (c.double_mesh ? 1e-12 : 2e-6));
      CHECK(vs_one < (c.double_mesh ? 1e-12 : 1e-5));
      CHECK(times.get("pm_fft") > 0);
    }
  }
}

TEST_CASE("cuFFT slab PM: long range only, and the host engine's choice over ranks") {
  const Comm world = Comm::world();
  const int device = orbis::test::rank_gpu_or_skip(world);
  orbis::PmSettings s;
  s.box_mpc_h = 50.0;
  s.grid_side = 16;
  s.window = orbis::Window::tsc;
  s.r_s_mpc_h = 0;   // PM-only: two interlaced meshes, which stay on FFTW
  CHECK_THROWS_AS(orbis::CudaPmSlabs(s, world, device), orbis::Error);
  orbis::PmSolver pm_only(s, world);
  s.r_s_mpc_h = 4.0;
  CHECK_THROWS_AS(pm_only.use_slab_transform(std::make_unique<orbis::CudaPmSlabs>(s, world, device)), orbis::Error);

  // TreePM with [gpu] backend = "cuda": over ranks the engine's PM runs on the cuFFT slabs;
  // "cpu" keeps FFTW-MPI, and so does one rank (where the CUDA step engine would run).
  for (const std::string backend : {"cuda", "cpu"}) {
    const orbis::Params params = orbis::Params::parse(
        "[box]\nsize_mpc_h = 100.0\nparticles_per_side = 8\n[gpu]\nbackend = \"" + backend +
            "\"\n[gravity]\nsolver = \"treepm\"\nrs_over_cell = 1.25\nr_cut_over_rs = 4.5\n",
        "pm_slabs_cuda.toml");
    const orbis::HostStepEngine engine(params, world);
    const bool slabs = engine.describe().find("cuFFT slabs") != std::string::npos;
    INFO(engine.describe());
    CHECK(slabs == (backend == "cuda" && world.size() > 1));
  }
}
