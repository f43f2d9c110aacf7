// The long-range potential energy of the PM over ranks on the GPUs (gpu/pm_cuda_ranks.hpp,
// "The long-range potential energy over ranks"): per mesh the forces' routing, deposit and
// density ghost planes (pm_cuda_ranks.cu), then the forward transform alone (2D R2C of the x
// planes, x slabs -> y slabs, 1D C2C along x) and the one-GPU PM's per-row sums of
// G(k) |rho(k)|^2 (gpu/pm_cuda_fourier.cuh) over this rank's y columns; every rank's row sums
// gathered to every rank and added in CudaPmSolver::potential_energy's order (energy_of_rows,
// which the force pass's rows go through too: accelerations() with a mesh energy). The forward
// transform (forward_modes) serves the counts' modes of the P(k) too (pm_cuda_ranks_modes.cu).
#include <cufft.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "gpu/cuda_check.cuh"
#include "gpu/cufft_check.cuh"
#include "gpu/device_buffer.cuh"
#include "gpu/pm_cuda_fourier.cuh"
#include "gpu/pm_cuda_mesh.cuh"
#include "gpu/pm_cuda_ranks.hpp"
#include "gpu/pm_cuda_ranks_impl.cuh"
#include "gpu/slab_transpose_peer.cuh"
#include "pm/fixed_point_mesh.hpp"
#include "pm/mesh_energy_rows.hpp"
#include "pm/pm_modes.hpp"

namespace orbis {
namespace {

double mib(std::size_t bytes) { return static_cast<double>(bytes) / 1048576.0; }
// The scratch area starts 256-byte aligned, as the pool's blocks do (cuFFT's alignment).
std::size_t aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

void x_lines_forward(cufftHandle plan, float2* data) {
  ORBIS_CUFFT_CHECK(cufftExecC2C(plan, reinterpret_cast<cufftComplex*>(data), reinterpret_cast<cufftComplex*>(data),
                                 CUFFT_FORWARD));
}
void x_lines_forward(cufftHandle plan, double2* data) {
  ORBIS_CUFFT_CHECK(cufftExecZ2Z(plan, reinterpret_cast<cufftDoubleComplex*>(data),
                                 reinterpret_cast<cufftDoubleComplex*>(data), CUFFT_FORWARD));
}

}  // namespace

CudaPmRanks::Impl::EnergyBlock CudaPmRanks::Impl::energy_block() const {
  const std::size_t real = settings.double_mesh ? sizeof(double) : sizeof(float);
  EnergyBlock b;
  b.scratch_offset = aligned(mesh_reals * real);
  // The fixed-point sums (8 bytes a node), later the y slab (two reals a mode).
  const std::size_t fixed = fixed_count() * sizeof(unsigned long long);
  b.scratch_bytes = std::max<std::size_t>(std::max(fixed, layout.y_slab_count * 2 * real), 1);
  return b;
}

// The plans of CudaPmSlabs' forward passes, with work areas left to the caller (the pool).
void CudaPmRanks::Impl::make_forward_plans() {
  if (forward_ready) return;
  const long long n = settings.grid_side, nzc = n / 2 + 1;
  const bool twice = settings.double_mesh;
  std::size_t work = 0;
  if (layout.x.count > 0 && !forward_planes_made) {
    // In place on the padded layout: rows of 2(n/2+1) reals in, n/2+1 complex out.
    long long dims[2] = {n, n}, real_embed[2] = {n, 2 * nzc}, complex_embed[2] = {n, nzc};
    ORBIS_CUFFT_CHECK(cufftCreate(&forward_planes));
    forward_planes_made = true;
    ORBIS_CUFFT_CHECK(cufftSetAutoAllocation(forward_planes, 0));
    ORBIS_CUFFT_CHECK(cufftMakePlanMany64(forward_planes, 2, dims, real_embed, 1, n * 2 * nzc, complex_embed, 1,
                                          n * nzc, twice ? CUFFT_D2Z : CUFFT_R2C, layout.x.count, &work));
    forward_fft_work = std::max(forward_fft_work, work);
  }
  if (layout.y.count > 0 && !forward_lines_made) {
    // The y slab [i][j - y0][k]: every (j, k) column is an x line of stride ny (n/2+1).
    const long long columns = static_cast<long long>(layout.y.count) * nzc;
    long long dims[1] = {n}, embed[1] = {n};
    ORBIS_CUFFT_CHECK(cufftCreate(&forward_lines));
    forward_lines_made = true;
    ORBIS_CUFFT_CHECK(cufftSetAutoAllocation(forward_lines, 0));
    ORBIS_CUFFT_CHECK(cufftMakePlanMany64(forward_lines, 1, dims, embed, columns, 1, embed, columns, 1,
                                          twice ? CUFFT_Z2Z : CUFFT_C2C, columns, &work));
    forward_fft_work = std::max(forward_fft_work, work);
  }
  forward_ready = true;
}

void CudaPmRanks::Impl::make_energy_plans() {
  if (!slabs) make_forward_plans();   // Use::forces: CudaPmSlabs' plans serve
  if (energy_ready) return;
  const PmAxisTables axes = make_pm_axis_tables(settings);
  std::vector<double> tables(axes.k);
  tables.insert(tables.end(), axes.inv_w2.begin(), axes.inv_w2.end());
  axis_tables.ensure_exact(tables.size());
  axis_tables.upload(tables.data(), tables.size());
  energy_ready = true;
}

void CudaPmRanks::Impl::bind_forward_plans(cudaStream_t stream) {
  fft_work.ensure_exact(std::max<std::size_t>(forward_fft_work, 1));
  for (const auto& [plan, made] : {std::pair<cufftHandle, bool>{forward_planes, forward_planes_made},
                                   std::pair<cufftHandle, bool>{forward_lines, forward_lines_made}}) {
    if (!made) continue;
    ORBIS_CUFFT_CHECK(cufftSetStream(plan, stream));
    if (forward_fft_work > 0) ORBIS_CUFFT_CHECK(cufftSetWorkArea(plan, fft_work.data()));
  }
}

std::size_t CudaPmRanks::Impl::energy_call_bytes(std::size_t n) const {
  // The routing, every own particle counted as leaving and as many arriving (an estimate: the
  // check comes before the counts are known, and a rank may receive more than it holds).
  const std::size_t routing = CudaPmRanks::routing_bytes(n, n);
  // Then (Use::energy: the routing's buffers given back first) the routed positions and the meshes.
  const EnergyBlock block = energy_block();
  std::size_t meshes_bytes = meshes.capacity() >= block.total() ? 0 : block.total();
  meshes_bytes += ghost_in.capacity() >= ghost_in_count() ? 0 : ghost_in_count() * sizeof(unsigned long long);
  meshes_bytes += forward_fft_work + 2 * static_cast<std::size_t>(settings.grid_side) * layout.y.count * sizeof(double);
  meshes_bytes += n * 3 * sizeof(double);
  return std::max(routing, meshes_bytes);
}

// The routing's buffers but the routed positions, which the energy no longer needs once they
// are routed (the forces need them to send the accelerations back).
void CudaPmRanks::Impl::give_back_routing_buffers() {
  keys.release();
  keys_alt.release();
  order.release();
  order_alt.release();
  sort_temp.release();
  packed.release();
  routed.release();
  sorted_order = nullptr;
}

// What a call took from the pool goes back (queued on the call's stream), so that nothing but
// the plans and tables stays between checks (Use::forces: the next accelerations() takes its
// meshes again).
void CudaPmRanks::Impl::give_back_energy_memory() {
  fft_work.release();
  row_sums.release();
  meshes.release();
  ghost_in.release();
  give_back_routing_buffers();
  routed_pos.release();
}

// x slab -> y slab of complex modes (pm/slab_transpose.hpp's blocks): device to device through
// a borrowed exchange (count_modes()); else this rank's own block copied on the device, the
// other ranks' blocks packed into host memory by destination, the all-to-all, and what
// arrived copied up into its place (sources in rank order).
template <typename C>
void CudaPmRanks::Impl::transpose_to_y(const C* x_slab, C* y_slab, cudaStream_t stream) {
  const SlabTranspose& t = layout;
  if (borrowed_transposes) return gpu::transpose_x_to_y_peer(t, *borrowed_transposes, x_slab, y_slab, stream);
  const int me = comm.rank(), ranks = comm.size();
  const PitchedBlock& own = t.x_blocks[me];
  gpu::copy_2d(y_slab + t.y_offsets[me], own.width * sizeof(C), x_slab + own.slab_offset, own.pitch * sizeof(C),
          own.width * sizeof(C), own.rows, stream);
  if (ranks == 1) return;
  std::vector<std::size_t> out_lines = t.x_lines, in_lines = t.y_lines;
  out_lines[me] = in_lines[me] = 0;
  // Ordinary host memory (not zeroed), freed at return: the energy check keeps no pinned slab.
  const std::unique_ptr<C[]> out(new C[std::max<std::size_t>(Comm::total(t.x_counts) - t.x_counts[me], 1)]);
  const std::unique_ptr<C[]> in(new C[std::max<std::size_t>(Comm::total(t.y_counts) - t.y_counts[me], 1)]);
  std::size_t at = 0;
  for (int r = 0; r < ranks; ++r) {
    const PitchedBlock& b = t.x_blocks[r];
    if (r == me || b.count() == 0) continue;
    ORBIS_CUDA_CHECK(cudaMemcpy2DAsync(out.get() + at, b.width * sizeof(C), x_slab + b.slab_offset,
                                       b.pitch * sizeof(C), b.width * sizeof(C), b.rows, cudaMemcpyDeviceToHost,
                                       stream));
    at += b.count();
  }
  sync(stream);
  comm.alltoallv_known(out.get(), out_lines, in.get(), in_lines, static_cast<std::size_t>(t.nzc) * sizeof(C));
  at = 0;
  for (int r = 0; r < ranks; ++r) {
    if (r == me || t.y_counts[r] == 0) continue;
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(y_slab + t.y_offsets[r], in.get() + at, t.y_counts[r] * sizeof(C),
                                     cudaMemcpyHostToDevice, stream));
    at += t.y_counts[r];
  }
  sync(stream);   // `in` goes at return
}

template <typename Real>
void CudaPmRanks::Impl::forward_modes(double shift_cells, std::size_t total, double factor, Real* rho,
                                      unsigned long long* fixed, void* modes_out, cudaStream_t stream) {
  using C = typename gpu::MeshComplex<Real>::type;
  const int n = settings.grid_side;
  C* const modes = static_cast<C*>(modes_out);
  const double scale = fixed_point_scale(total);
  const double mean = pm_fixed_point_mean(total, scale, n);
  const gpu::PmMeshGeometry g{n, settings.window, settings.box_mpc_h, shift_cells};
  PhaseTimes untimed;
  density_into(g, scale, mean, factor, rho, fixed, stream, untimed);
  if (slabs) {   // Use::forces: CudaPmSlabs' plans and transposes (device to device with CUDA IPC)
    sync(stream);   // CudaPmSlabs works on its own stream
    slabs->forward_on_device(rho, modes);
    return;
  }
  if (slab.count > 0) cufft_forward_real(forward_planes, rho);
  transpose_to_y(reinterpret_cast<const C*>(rho), modes, stream);
  if (layout.y.count > 0) x_lines_forward(forward_lines, modes);
}

template void CudaPmRanks::Impl::forward_modes<float>(double, std::size_t, double, float*, unsigned long long*, void*,
                                                      cudaStream_t);
template void CudaPmRanks::Impl::forward_modes<double>(double, std::size_t, double, double*, unsigned long long*,
                                                       void*, cudaStream_t);

template <typename Real>
double CudaPmRanks::Impl::mesh_energy(std::size_t total, double mass, cudaStream_t stream) {
  using C = typename gpu::MeshComplex<Real>::type;
  const PmSettings& s = settings;
  const int n = s.grid_side, ny = layout.y.count;
  const EnergyBlock block = energy_block();
  // Interlaced: the mean of the two meshes' energies, plane by plane, as CudaPmSolver and
  // PmSolver weigh them.
  const int meshes_count = s.interlaced ? 2 : 1;
  const std::size_t rows_per_mesh = static_cast<std::size_t>(n) * ny;
  meshes.ensure_exact(block.total());   // from the pool for this call (Use::forces too: its slab is a call's)
  ghost_in.ensure_exact(ghost_in_count());
  row_sums.ensure_exact(std::max<std::size_t>(meshes_count * rows_per_mesh, 1));
  bind_forward_plans(stream);
  Real* const rho = reinterpret_cast<Real*>(meshes.data());
  unsigned char* const scratch = meshes.data() + block.scratch_offset;
  auto* const fixed = reinterpret_cast<unsigned long long*>(scratch);   // until converted into rho
  C* const modes = reinterpret_cast<C*>(scratch);                      // then the y slab
  const double* const k_axis = axis_tables.data();
  const double* const inv_w2 = k_axis + n;
  const double cell = s.box_mpc_h / n, density = mass / (cell * cell * cell);
  for (int mesh = 0; mesh < meshes_count; ++mesh) {
    forward_modes(long_range_mesh_shift(s.interlaced, mesh), total, density, rho, fixed, modes, stream);
    if (ny > 0)
      gpu::pm_long_range_energy_rows<Real>(modes, n, k_axis, inv_w2, long_range_norm(n), s.r_s_mpc_h * s.r_s_mpc_h,
                                           row_sums.data() + mesh * rows_per_mesh, stream, layout.y.first, ny);
  }
  return energy_of_rows(row_sums.data(), meshes_count, stream);
}

double CudaPmRanks::Impl::energy_of_rows(const double* rows, int meshes_count, cudaStream_t stream) {
  const int n = settings.grid_side, ranks = comm.size();
  const std::size_t rows_per_mesh = static_cast<std::size_t>(n) * layout.y.count;
  // Each rank's y columns, in rank order: the y slabs in rank order are the y columns in
  // order, so each x plane's rows are added in y order, as CudaPmSolver adds them.
  std::vector<int> columns(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) columns[r] = slab_planes(n, ranks, r).count;
  std::vector<double> mine(meshes_count * rows_per_mesh), planes(static_cast<std::size_t>(n), 0.0);
  if (!mine.empty())
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(mine.data(), rows, mine.size() * sizeof(double), cudaMemcpyDeviceToHost,
                                     stream));
  sync(stream);
  for (int mesh = 0; mesh < meshes_count; ++mesh) {
    const std::vector<double> one(mine.begin() + mesh * rows_per_mesh, mine.begin() + (mesh + 1) * rows_per_mesh);
    add_mesh_energy_rows(comm.allgatherv(one), columns, 1.0 / meshes_count, planes);
  }
  return mesh_energy_of_planes(planes, settings.box_mpc_h / n);
}

double CudaPmRanks::potential_energy(const double* pos, std::size_t n, double particle_mass, CUstream_st* stream_in) {
  Impl& m = *impl_;
  if (m.use == Use::counts) fail("internal: potential_energy() of a PM over ranks built for the counts' modes");
  const cudaStream_t stream = stream_in;
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  const std::size_t total = m.total_particles(n);
  if (total == 0) return 0.0;
  run_collectively(m.comm, [&] { m.make_energy_plans(); });   // Use::forces: at the first call
  // What the call takes from the pool, checked on every rank before anything is allocated.
  const std::size_t need = m.energy_call_bytes(n), available = gpu::device_available_bytes();
  m.comm.throw_if_any_failed(
      need > available
          ? fmt::format("energy check over {} ranks: the long-range potential energy on rank {} needs about {:.1f} MiB "
                        "of device {} for the check (the {}^3 mesh's density slab, its scratch and {} particles' "
                        "routing) but {:.1f} MiB are free. More ranks, a smaller [gravity] pm_grid_side, or "
                        "[analysis] energy_check = false need less",
                        m.comm.size(), m.comm.rank(), mib(need), m.device, settings_.grid_side, n, mib(available))
          : std::string());
  m.sync(stream);   // the positions' producers
  // The forces' traffic record (traffic()) is the last accelerations()' and stays so.
  const PmRankTraffic forces_traffic = m.traffic;
  double w = 0;
  {
    gpu::AllocationStream on_stream(stream);
    m.route(pos, n, stream);
    m.give_back_routing_buffers();   // but the routed positions: their memory then serves the meshes
    w = settings_.double_mesh ? m.mesh_energy<double>(total, particle_mass, stream)
                              : m.mesh_energy<float>(total, particle_mass, stream);
    m.give_back_energy_memory();
  }
  m.traffic = forces_traffic;
  return w;
}

double CudaPmRanks::potential_energy(const std::vector<Vec3d>& pos, double particle_mass) {
  Impl& m = *impl_;
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  const std::size_t n = pos.size();
  std::vector<double> soa(3 * n);
  for (std::size_t p = 0; p < n; ++p)
    for (int d = 0; d < 3; ++d) soa[d * n + p] = pos[p][d];
  // The positions in pool memory for this call only (24 bytes a particle); a failure to get
  // them is every rank's (the others would wait in the collectives).
  gpu::AllocationStream on_stream(m.own_stream);
  gpu::DeviceArray<double> positions;
  run_collectively(m.comm, [&] {
    positions.ensure_exact(std::max<std::size_t>(3 * n, 1));
    if (n > 0) positions.upload(soa.data(), 3 * n);
  });
  const double w = potential_energy(positions.data(), n, particle_mass, m.own_stream);
  positions.release();
  return w;
}

}  // namespace orbis
