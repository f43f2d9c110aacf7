// The CUDA PM solver: memory plan, cuFFT plans and the order of the passes (gpu/pm_cuda.hpp).
//
// One step, long range (TreePM), mesh P and work mesh G:
//   assign -> P (via G, fixed point) | R2C P | P *= Green | for d in x, y, z:
//   G = -i k_d P, C2R G, interpolate G -> a_d; interlaced, all of it for mesh A and then
//   again for mesh B in the same P and G, its half added.
// PM-only, meshes A, B and G: assign -> A at x, -> B at x + cell/2 | R2C A, B | A, B become
// the coset potentials | for d: G = g_A,d, C2R, a_d = g/2 at x; G = g_B,d, C2R, a_d += g/2 at
// x + cell/2. Every transform is in place on the padded layout (FFTW's), so the meshes are the
// CPU's; the plans share one cuFFT work area that this file allocates.
//
// The long-range potential energy: assign -> P (via G) | R2C P | the sum of G(k) |P(k)|^2 per
// mesh row into G, rows summed on the host in the CPU's order (pm_solver.cpp).
#include "gpu/pm_cuda.hpp"

#include <cufft.h>

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "gpu/cuda_check.cuh"
#include "gpu/cufft_check.cuh"
#include "gpu/device_buffer.cuh"
#include "gpu/pm_cuda_fourier.cuh"
#include "gpu/pm_cuda_mesh.cuh"
#include "pm/interlaced_influence.hpp"
#include "pm/mesh_energy_rows.hpp"
#include "pm/pm_modes.hpp"

namespace orbis {
namespace {

bool full_force(const PmSettings& s) { return s.r_s_mpc_h == 0; }
std::size_t real_bytes(const PmSettings& s) { return s.double_mesh ? sizeof(double) : sizeof(float); }
// Reals of one padded mesh, n * n * 2(n/2+1) (the R2C layout, in place).
std::size_t mesh_reals(int n) { return static_cast<std::size_t>(n) * n * 2 * (n / 2 + 1); }
// PM-only's two meshes and the work mesh; the long range's one mesh at a time and the work mesh.
int mesh_count(const PmSettings& s) { return full_force(s) ? 3 : 2; }
double gib(std::size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

// The in-place R2C and C2R plans of the padded mesh, without work areas of their own.
struct FftPlans {
  cufftHandle forward = 0, backward = 0;
  bool made = false;
  std::size_t work_bytes = 0;   // the larger of the two plans' needs

  explicit FftPlans(const PmSettings& s) {
    long long n = s.grid_side, nzc = n / 2 + 1;
    long long dims[3] = {n, n, n}, real_embed[3] = {n, n, 2 * nzc}, complex_embed[3] = {n, n, nzc};
    const long long real_dist = n * n * 2 * nzc, complex_dist = n * n * nzc;
    ORBIS_CUFFT_CHECK(cufftCreate(&forward));
    ORBIS_CUFFT_CHECK(cufftCreate(&backward));
    made = true;
    ORBIS_CUFFT_CHECK(cufftSetAutoAllocation(forward, 0));
    ORBIS_CUFFT_CHECK(cufftSetAutoAllocation(backward, 0));
    std::size_t work_forward = 0, work_backward = 0;
    ORBIS_CUFFT_CHECK(cufftMakePlanMany64(forward, 3, dims, real_embed, 1, real_dist, complex_embed, 1, complex_dist,
                                          s.double_mesh ? CUFFT_D2Z : CUFFT_R2C, 1, &work_forward));
    ORBIS_CUFFT_CHECK(cufftMakePlanMany64(backward, 3, dims, complex_embed, 1, complex_dist, real_embed, 1, real_dist,
                                          s.double_mesh ? CUFFT_Z2D : CUFFT_C2R, 1, &work_backward));
    work_bytes = std::max(work_forward, work_backward);
  }
  ~FftPlans() {
    if (!made) return;
    cufftDestroy(forward);
    cufftDestroy(backward);
  }
  FftPlans(const FftPlans&) = delete;
  FftPlans& operator=(const FftPlans&) = delete;
};


CudaPmMemory memory_plan(const PmSettings& s, std::size_t fft_work_bytes) {
  const std::size_t n = s.grid_side, h = n / 2 + 1;
  CudaPmMemory m;
  m.meshes = mesh_count(s) * mesh_reals(s.grid_side) * real_bytes(s);
  m.fft_work = fft_work_bytes;
  m.energy_rows = full_force(s) ? 0 : 2 * n * n * sizeof(double);
  m.tables = n * (2 * sizeof(double) + sizeof(ModeComplex)) + (full_force(s) ? 2 * h * h * h * real_bytes(s) : 0);
  return m;
}

}  // namespace

struct CudaPmSolver::Impl {
  explicit Impl(const PmSettings& s) : plans(s) {}
  FftPlans plans;
  CudaPmMemory planned;
  // The meshes and the cuFFT work area: one block from the device pool for the length of a
  // call (gpu/device_buffer.cuh), so that between calls the memory serves the other phases
  // of a step. The tables are kept.
  gpu::DeviceArray<unsigned char> work_block, tables;
  const double* k_axis = nullptr;
  const double* inv_w2 = nullptr;
  const ModeComplex* shift = nullptr;
  const void* influence = nullptr;
  cudaStream_t own_stream = nullptr;   // the host-vector accelerations()'s

  // Host-vector accelerations(): positions and accelerations, SoA.
  gpu::DeviceArray<double> staging;
  std::vector<double> host_soa;

  // Phase timing: an event at every phase boundary; the time from event e to e + 1 belongs to
  // phase_of[e] (none after the last).
  bool timing = false;
  std::vector<cudaEvent_t> events;
  std::vector<const char*> phase_of;
  std::size_t marks = 0;
  void mark(const char* phase, cudaStream_t stream) {
    if (!timing) return;
    if (marks == events.size()) {
      cudaEvent_t e;
      ORBIS_CUDA_CHECK(cudaEventCreate(&e));
      events.push_back(e);
      phase_of.push_back(nullptr);
    }
    ORBIS_CUDA_CHECK(cudaEventRecord(events[marks], stream));
    phase_of[marks++] = phase;
  }

  // The meshes and the cuFFT work area of one call from the pool, queued on `stream` (the
  // caller holds an AllocationStream for it), and the plans on that stream; work_block.release()
  // gives them back.
  void take_work_block(cudaStream_t stream) {
    const std::size_t work_offset = (planned.meshes + 255) / 256 * 256;   // cuFFT's alignment
    work_block.ensure_exact(work_offset + planned.fft_work);
    if (planned.fft_work > 0) {
      void* work = work_block.data() + work_offset;
      ORBIS_CUFFT_CHECK(cufftSetWorkArea(plans.forward, work));
      ORBIS_CUFFT_CHECK(cufftSetWorkArea(plans.backward, work));
    }
    ORBIS_CUFFT_CHECK(cufftSetStream(plans.forward, stream));
    ORBIS_CUFFT_CHECK(cufftSetStream(plans.backward, stream));
  }

  // The force pass; with energy_rows (device, n^2 doubles a mesh) also the mesh energy's row
  // sums of each transformed density (as mesh_energy_rows(), from the same modes).
  template <typename Real>
  void run(const PmSettings& s, const double* x, const double* y, const double* z, std::size_t count,
           double mass, double* const acc[3], double* energy_rows, cudaStream_t stream);
  // The mesh energy from `meshes` meshes' row sums at `rows` (device), waiting for them.
  double energy_of_rows(const PmSettings& s, const double* rows, int meshes, cudaStream_t stream) const;
  // potential_energy()'s pass: each mesh's energy row sums (n^2 doubles a mesh) at `rows`.
  template <typename Real>
  void mesh_energy_rows(const PmSettings& s, const double* x, const double* y, const double* z, std::size_t count,
                        double mass, double* rows, cudaStream_t stream);
  template <typename Real>
  void assign(const PmSettings& s, const double* x, const double* y, const double* z, std::size_t count,
              double mass, double shift_cells, Real* mesh, Real* work, cudaStream_t stream);
};

CudaPmSolver::CudaPmSolver(const PmSettings& settings, int device) : settings_(settings) {
  settings.check();
  ORBIS_CUDA_CHECK(cudaSetDevice(device));
  impl_ = std::make_unique<Impl>(settings);
  Impl& m = *impl_;
  m.planned = memory_plan(settings, m.plans.work_bytes);
  std::size_t free_bytes = 0, total_bytes = 0;
  ORBIS_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  free_bytes = gpu::device_available_bytes();   // the pool's unused memory is free for the meshes
  if (m.planned.total() > free_bytes)
    fail("PM on the GPU: a {}^3 {} mesh needs {:.2f} GiB of device memory ({} meshes {:.2f} GiB, cuFFT work "
         "area {:.2f} GiB, tables {:.2f} GiB) but {:.2f} GiB of {:.2f} GiB are free. A smaller [gravity] "
         "pm_grid_side, or pm_mesh_precision = \"float\", needs less",
         settings.grid_side, settings.double_mesh ? "double" : "float", gib(m.planned.total()),
         mesh_count(settings), gib(m.planned.meshes), gib(m.planned.fft_work), gib(m.planned.tables),
         gib(free_bytes), gib(total_bytes));
  m.tables.ensure_exact(m.planned.tables);

  // Tables: the CPU path's own (make_pm_axis_tables, interlaced_optimal_influence), uploaded.
  const int n = settings.grid_side;
  const PmAxisTables axes = make_pm_axis_tables(settings);
  char* t = reinterpret_cast<char*>(m.tables.data());
  ORBIS_CUDA_CHECK(cudaMemcpy(t, axes.k.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  m.k_axis = reinterpret_cast<const double*>(t);
  t += n * sizeof(double);
  ORBIS_CUDA_CHECK(cudaMemcpy(t, axes.inv_w2.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  m.inv_w2 = reinterpret_cast<const double*>(t);
  t += n * sizeof(double);
  ORBIS_CUDA_CHECK(cudaMemcpy(t, axes.half_shift.data(), n * sizeof(ModeComplex), cudaMemcpyHostToDevice));
  m.shift = reinterpret_cast<const ModeComplex*>(t);
  t += n * sizeof(ModeComplex);
  if (full_force(settings)) {
    const std::vector<double> g = interlaced_optimal_influence(settings.window, n);
    if (settings.double_mesh) {
      ORBIS_CUDA_CHECK(cudaMemcpy(t, g.data(), g.size() * sizeof(double), cudaMemcpyHostToDevice));
    } else {
      const std::vector<float> gf(g.begin(), g.end());
      ORBIS_CUDA_CHECK(cudaMemcpy(t, gf.data(), gf.size() * sizeof(float), cudaMemcpyHostToDevice));
    }
    m.influence = t;
  }
  ORBIS_CUDA_CHECK(cudaStreamCreateWithFlags(&m.own_stream, cudaStreamNonBlocking));
}

CudaPmSolver::~CudaPmSolver() {
  if (!impl_) return;
  for (cudaEvent_t e : impl_->events) cudaEventDestroy(e);
  if (impl_->own_stream) {
    cudaStreamSynchronize(impl_->own_stream);
    cudaStreamDestroy(impl_->own_stream);
  }
}

CudaPmMemory CudaPmSolver::plan_memory(const PmSettings& settings, std::size_t n_particles) {
  (void)n_particles;   // nothing per particle (the header says why)
  settings.check();
  const FftPlans plans(settings);
  return memory_plan(settings, plans.work_bytes);
}

CudaPmMemory CudaPmSolver::memory() const {
  CudaPmMemory m = impl_->planned;
  m.particles += impl_->staging.capacity() * sizeof(double);
  return m;
}

std::string CudaPmSolver::describe() const {
  const auto& s = settings_;
  const std::string force = full_force(s)
      ? std::string("full force, two interlaced meshes, optimal influence function")
      : fmt::format("long range{}, r_s = {:.4g} Mpc/h ({:.3g} cells)", s.interlaced ? " on two interlaced meshes" : "",
                    s.r_s_mpc_h, s.r_s_mpc_h * s.grid_side / s.box_mpc_h);
  return fmt::format("cuFFT PM {}^3 {} mesh, {}, {}, {:.2f} GiB on the device", s.grid_side,
                     s.double_mesh ? "double" : "float", window_name(s.window), force, gib(bytes()));
}

void CudaPmSolver::set_phase_timing(bool on) { impl_->timing = on; }

PhaseTimes CudaPmSolver::phase_times() const {
  PhaseTimes out;
  const Impl& m = *impl_;
  if (m.marks == 0) return out;
  ORBIS_CUDA_CHECK(cudaEventSynchronize(m.events[m.marks - 1]));
  for (std::size_t e = 0; e + 1 < m.marks; ++e) {
    if (!m.phase_of[e]) continue;
    float ms = 0;
    ORBIS_CUDA_CHECK(cudaEventElapsedTime(&ms, m.events[e], m.events[e + 1]));
    out.add(m.phase_of[e], 1e-3 * ms);
  }
  return out;
}

void CudaPmSolver::accelerations(const double* x, const double* y, const double* z, std::size_t n,
                                 double particle_mass, double* ax, double* ay, double* az, CUstream_st* stream,
                                 double* mesh_energy) {
  Impl& m = *impl_;
  if (mesh_energy && full_force(settings_))
    fail("PM solver: the potential energy is computed for the long-range (TreePM) force only");
  m.marks = 0;
  double* const acc[3] = {ax, ay, az};
  // The meshes and work area, queued on the stream: taken from the pool here and given back
  // when the stream has passed the last interpolation (the energy's row sums after the wait).
  gpu::AllocationStream on_stream(stream);
  m.take_work_block(stream);
  const int n_side = settings_.grid_side, meshes = settings_.interlaced ? 2 : 1;
  gpu::DeviceArray<double> rows;
  if (mesh_energy) rows.ensure_exact(static_cast<std::size_t>(meshes) * n_side * n_side);
  if (settings_.double_mesh) m.run<double>(settings_, x, y, z, n, particle_mass, acc, rows.data(), stream);
  else m.run<float>(settings_, x, y, z, n, particle_mass, acc, rows.data(), stream);
  m.mark(nullptr, stream);
  m.work_block.release();
  if (mesh_energy) {
    *mesh_energy = m.energy_of_rows(settings_, rows.data(), meshes, stream);
    rows.release();
  }
}

namespace {

// Host positions as x, y, z arrays (h[c * n + p]), queued for upload to d on `stream`.
void upload_positions(const std::vector<Vec3d>& pos, double* h, double* d, cudaStream_t stream) {
  const std::size_t count = pos.size();
  const std::ptrdiff_t signed_count = static_cast<std::ptrdiff_t>(count);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t p = 0; p < signed_count; ++p)
    for (int c = 0; c < 3; ++c) h[c * count + p] = pos[p][c];
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(d, h, 3 * count * sizeof(double), cudaMemcpyHostToDevice, stream));
}

}  // namespace

void CudaPmSolver::accelerations(const std::vector<Vec3d>& pos, double particle_mass, std::vector<Vec3d>& acc,
                                 PhaseTimes* times, double* mesh_energy) {
  Impl& m = *impl_;
  const std::size_t count = pos.size();
  m.host_soa.resize(6 * count);
  m.staging.ensure(6 * count);
  double* h = m.host_soa.data();
  double* d = m.staging.data();
  const std::ptrdiff_t signed_count = static_cast<std::ptrdiff_t>(count);
  cudaStream_t stream = m.own_stream;
  upload_positions(pos, h, d, stream);
  const bool timing = m.timing;
  m.timing = timing || times;
  accelerations(d, d + count, d + 2 * count, count, particle_mass, d + 3 * count, d + 4 * count, d + 5 * count,
                stream, mesh_energy);
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(h + 3 * count, d + 3 * count, 3 * count * sizeof(double),
                                   cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (times)
    for (const auto& [phase, seconds] : phase_times().all()) times->add(phase, seconds);
  m.timing = timing;
  acc.resize(count);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t p = 0; p < signed_count; ++p)
    for (int c = 0; c < 3; ++c) acc[p][c] = h[(3 + c) * count + p];
}

double CudaPmSolver::potential_energy(const double* x, const double* y, const double* z, std::size_t n,
                                      double particle_mass, CUstream_st* stream) {
  if (full_force(settings_)) fail("PM solver: the potential energy is computed for the long-range (TreePM) force only");
  Impl& m = *impl_;
  gpu::AllocationStream on_stream(stream);
  m.take_work_block(stream);
  const int meshes = settings_.interlaced ? 2 : 1;
  gpu::DeviceArray<double> rows;
  rows.ensure_exact(static_cast<std::size_t>(meshes) * settings_.grid_side * settings_.grid_side);
  if (settings_.double_mesh) m.mesh_energy_rows<double>(settings_, x, y, z, n, particle_mass, rows.data(), stream);
  else m.mesh_energy_rows<float>(settings_, x, y, z, n, particle_mass, rows.data(), stream);
  m.work_block.release();
  const double w = m.energy_of_rows(settings_, rows.data(), meshes, stream);
  rows.release();
  return w;
}

double CudaPmSolver::potential_energy(const std::vector<Vec3d>& pos, double particle_mass) {
  if (full_force(settings_)) fail("PM solver: the potential energy is computed for the long-range (TreePM) force only");
  Impl& m = *impl_;
  const std::size_t count = pos.size();
  cudaStream_t stream = m.own_stream;
  // Positions in pool memory for this call only, given back with the meshes: between checks
  // the memory serves the step engine's phases.
  gpu::AllocationStream on_stream(stream);
  gpu::DeviceArray<double> positions;
  positions.ensure_exact(3 * count);
  std::vector<double> host(3 * count);
  upload_positions(pos, host.data(), positions.data(), stream);
  const double w = potential_energy(positions.data(), positions.data() + count, positions.data() + 2 * count, count,
                                    particle_mass, stream);
  positions.release();
  return w;
}

double CudaPmSolver::Impl::energy_of_rows(const PmSettings& s, const double* rows, int meshes,
                                          cudaStream_t stream) const {
  const int n = s.grid_side;
  const std::size_t per_mesh = static_cast<std::size_t>(n) * n;
  std::vector<double> host(meshes * per_mesh), planes(static_cast<std::size_t>(n), 0.0), one_mesh(per_mesh);
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(host.data(), rows, host.size() * sizeof(double), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (int mesh = 0; mesh < meshes; ++mesh) {
    one_mesh.assign(host.begin() + mesh * per_mesh, host.begin() + (mesh + 1) * per_mesh);
    add_mesh_energy_rows(one_mesh, {n}, 1.0 / meshes, planes);
  }
  return mesh_energy_of_planes(planes, s.box_mpc_h / n);
}

template <typename Real>
void CudaPmSolver::Impl::mesh_energy_rows(const PmSettings& s, const double* x, const double* y, const double* z,
                                          std::size_t count, double mass, double* rows, cudaStream_t stream) {
  using C = typename gpu::MeshComplex<Real>::type;
  const int n = s.grid_side;
  Real* rho = reinterpret_cast<Real*>(work_block.data());
  Real* work = rho + mesh_reals(n);
  const std::size_t per_mesh = static_cast<std::size_t>(n) * n;
  for (int mesh = 0; mesh < (s.interlaced ? 2 : 1); ++mesh) {
    assign(s, x, y, z, count, mass, long_range_mesh_shift(s.interlaced, mesh), rho, work, stream);
    cufft_forward_real(plans.forward, rho);
    gpu::pm_long_range_energy_rows<Real>(reinterpret_cast<const C*>(rho), n, k_axis, inv_w2, long_range_norm(n),
                                         s.r_s_mpc_h * s.r_s_mpc_h, rows + mesh * per_mesh, stream);
  }
}

template <typename Real>
void CudaPmSolver::Impl::assign(const PmSettings& s, const double* x, const double* y, const double* z,
                                std::size_t count, double mass, double shift_cells, Real* mesh, Real* work,
                                cudaStream_t stream) {
  // The fixed-point mesh lives in the work mesh, as many x planes at a time as fit.
  const int n = s.grid_side;
  const std::size_t plane_bytes = static_cast<std::size_t>(n) * n * sizeof(unsigned long long);
  const int planes = static_cast<int>(std::min<std::size_t>(n, mesh_reals(n) * sizeof(Real) / plane_bytes));
  const double cell = s.box_mpc_h / n, density = mass / (cell * cell * cell);
  const double scale = fixed_point_scale(count);
  const double mean = pm_fixed_point_mean(count, scale, n);
  const gpu::PmMeshGeometry g{n, s.window, s.box_mpc_h, shift_cells};
  auto* fixed = reinterpret_cast<unsigned long long*>(work);
  for (int x_lo = 0; x_lo < n; x_lo += planes) {
    const int x_hi = std::min(n, x_lo + planes);
    ORBIS_CUDA_CHECK(cudaMemsetAsync(fixed, 0, (x_hi - x_lo) * plane_bytes, stream));
    gpu::pm_assign_fixed(x, y, z, count, g, x_lo, x_hi, scale, fixed, stream);
    gpu::pm_fixed_to_mesh(fixed, n, x_lo, x_hi, mean, density / scale, mesh, stream);
  }
}

template <typename Real>
void CudaPmSolver::Impl::run(const PmSettings& s, const double* x, const double* y, const double* z,
                             std::size_t count, double mass, double* const acc[3], double* energy_rows,
                             cudaStream_t stream) {
  using C = typename gpu::MeshComplex<Real>::type;
  const int n = s.grid_side;
  const bool full = full_force(s), two = s.two_meshes();
  // PM-only's two meshes meet in its Green's function (the interlaced pair's optimal
  // influence function), so both are held at once. The long range's interlaced meshes are
  // independent: they take turns in the same memory, one mesh fewer on the device, and each
  // force component is summed in the same order (mesh A's half, then B's).
  Real* a = reinterpret_cast<Real*>(work_block.data());
  Real* b = full ? a + mesh_reals(n) : nullptr;
  Real* work = (full ? b : a) + mesh_reals(n);
  auto modes = [](Real* mesh) { return reinterpret_cast<C*>(mesh); };
  // Mesh B: half a cell diagonal from mesh A (PM-only at 0 and 1/2, the long range at 1/8 and 5/8).
  const double shift_a = full ? 0.0 : long_range_mesh_shift(s.interlaced, 0);
  const double shift_b = full ? 0.5 : long_range_mesh_shift(true, 1);
  const gpu::PmMeshGeometry at_a{n, s.window, s.box_mpc_h, shift_a}, at_b{n, s.window, s.box_mpc_h, shift_b};

  if (full) {
    mark("pm_assign", stream);
    assign(s, x, y, z, count, mass, shift_a, a, work, stream);
    assign(s, x, y, z, count, mass, shift_b, b, work, stream);
    mark("pm_fft", stream);
    cufft_forward_real(plans.forward, a);
    cufft_forward_real(plans.forward, b);
    mark("pm_green", stream);
    gpu::pm_interlaced_green<Real>(modes(a), modes(b), n, static_cast<const Real*>(influence), shift,
                                   interlaced_norm(n, s.box_mpc_h), stream);
    // One component at a time through the work mesh: g = (g_A(x) + g_B(x + cell/2)) / 2.
    for (int axis = 0; axis < 3; ++axis)
      for (int mesh = 0; mesh < 2; ++mesh) {
        mark("pm_gradient", stream);
        gpu::pm_interlaced_gradient<Real>(modes(a), modes(b), modes(work), n, axis, mesh == 1,
                                          interlaced_dk(s.box_mpc_h), shift, stream);
        mark("pm_fft", stream);
        cufft_backward_real(plans.backward, work);
        mark("pm_interpolate", stream);
        gpu::pm_interpolate(work, x, y, z, count, mesh == 0 ? at_a : at_b, 0.5, mesh == 1, acc[axis], stream);
      }
    return;
  }
  const std::size_t per_mesh = static_cast<std::size_t>(n) * n;
  for (int mesh = 0; mesh < (two ? 2 : 1); ++mesh) {
    const gpu::PmMeshGeometry& at = mesh == 0 ? at_a : at_b;
    mark("pm_assign", stream);
    assign(s, x, y, z, count, mass, at.shift_cells, a, work, stream);
    mark("pm_fft", stream);
    cufft_forward_real(plans.forward, a);
    mark("pm_green", stream);
    if (energy_rows)   // mesh A's rows, then B's, as mesh_energy_rows() sums them
      gpu::pm_long_range_energy_rows<Real>(modes(a), n, k_axis, inv_w2, long_range_norm(n),
                                           s.r_s_mpc_h * s.r_s_mpc_h, energy_rows + mesh * per_mesh, stream);
    gpu::pm_long_range_green<Real>(modes(a), n, k_axis, inv_w2, long_range_norm(n), s.r_s_mpc_h * s.r_s_mpc_h,
                                   stream);
    // One component at a time through the work mesh; two meshes: g = (g_A(x) + g_B(x)) / 2.
    for (int axis = 0; axis < 3; ++axis) {
      mark("pm_gradient", stream);
      gpu::pm_long_range_gradient<Real>(modes(a), modes(work), n, axis, k_axis, stream);
      mark("pm_fft", stream);
      cufft_backward_real(plans.backward, work);
      mark("pm_interpolate", stream);
      gpu::pm_interpolate(work, x, y, z, count, at, two ? 0.5 : 1.0, mesh == 1, acc[axis], stream);
    }
  }
}

}  // namespace orbis
