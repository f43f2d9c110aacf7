// The distributed long-range PM's mesh work on each rank's GPU (gpu/pm_cuda_slabs.hpp): plans,
// the order of the passes, and the transposes between x slabs and y slabs.
#include "gpu/pm_cuda_slabs.hpp"

#include <cufft.h>

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/timer.hpp"
#include "fmm/p2p_cuda_factory.hpp"
#include "gpu/cuda_check.cuh"
#include "gpu/cufft_check.cuh"
#include "gpu/device_alltoallv.cuh"
#include "gpu/device_buffer.cuh"
#include "gpu/pm_cuda_fourier.cuh"
#include "gpu/slab_transpose_peer.cuh"
#include "pm/pm_modes.hpp"
#include "pm/slab_transpose.hpp"

namespace orbis {
namespace {

double mib(std::size_t bytes) { return static_cast<double>(bytes) / 1048576.0; }

// The y slab's x lines from `in` into `out` (the same layout; in place when they are one).
void x_lines(cufftHandle plan, float2* in, float2* out, int direction) {
  ORBIS_CUFFT_CHECK(cufftExecC2C(plan, reinterpret_cast<cufftComplex*>(in), reinterpret_cast<cufftComplex*>(out),
                                 direction));
}
void x_lines(cufftHandle plan, double2* in, double2* out, int direction) {
  ORBIS_CUFFT_CHECK(cufftExecZ2Z(plan, reinterpret_cast<cufftDoubleComplex*>(in),
                                 reinterpret_cast<cufftDoubleComplex*>(out), direction));
}

}  // namespace

struct CudaPmSlabs::Impl {
  Impl(const PmSettings& s, const Comm& c, int d, int g)
      : settings(s), comm(c), device(d), ghosts(g), layout(s.grid_side, c.size(), c.rank()) {}
  ~Impl() {
    if (stream) cudaStreamSynchronize(stream);
    for (cufftHandle* p : {&planes_r2c, &planes_c2r, &lines})
      if (*p) cufftDestroy(*p);
    if (stream) cudaStreamDestroy(stream);
  }

  PmSettings settings;
  Comm comm;
  int device = 0;
  int ghosts = 0;   // planes after the device x slab (none on a rank without planes)
  SlabTranspose layout;
  std::size_t complex_bytes = 0;   // 8 (float mesh) or 16
  cudaStream_t stream = nullptr;
  // 2D R2C of the x slab's planes and C2R of them and the ghost planes (none without
  // planes), 1D C2C of the y slab's x lines (none without y columns). They run one at a time
  // on one stream, so they share one work area, the largest they need (fft_work bytes),
  // taken from the pool with the y slabs: not held between the PM steps, as cuFFT's own work
  // areas, one a plan, were (small for power-of-two meshes: a few MiB a rank at 512^3 and
  // 768^3 on 2 ranks; larger for other sizes).
  cufftHandle planes_r2c = 0, planes_c2r = 0, lines = 0;
  // With CUDA IPC, y -> x as pulls from every rank's exported y slab (this rank's planes and
  // its ghost planes), made at the exchange's choice.
  std::vector<gpu::PeerPull> y_to_x_pulls;
  std::size_t fft_work = 0;
  gpu::DeviceArray<unsigned char> slab, phi, work;   // x slab (real), y slabs (complex)
  gpu::DeviceArray<unsigned char> fft_area;          // the plans' work area
  gpu::DeviceArray<double> tables;                   // k, then 1/W^2, per axis index
  gpu::PinnedArray<unsigned char> send, recv;   // the staged transposes' (allocated when chosen)
  // How the transposes move between the ranks' devices, chosen (collectively) at the first
  // run: CUDA IPC device to device between the ranks of one node, else staged through send
  // and recv (gpu/device_alltoallv.cuh).
  std::unique_ptr<gpu::DeviceAlltoallv> exchange;

  void sync() { ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream)); }
  // The y slabs' sizes: phi one y slab, or phi's x slab with the ghost planes where that is
  // larger (run() moves phi there); work one y slab (what y -> x sends), or none with CUDA
  // IPC, where that is written into the exchange's exported buffer and y -> x lands straight
  // in the x slab.
  bool peer() const { return exchange && exchange->peer_to_peer(); }
  std::size_t phi_bytes() const {
    const std::size_t x_planes = static_cast<std::size_t>(layout.x.count + ghosts) *
                                 static_cast<std::size_t>(layout.n) * static_cast<std::size_t>(layout.nzc);
    return std::max<std::size_t>(std::max(layout.y_slab_count, x_planes) * complex_bytes, 1);
  }
  std::size_t work_bytes() const { return peer() ? 1 : std::max<std::size_t>(layout.y_slab_count * complex_bytes, 1); }
  // The device entry's y slabs: from the pool for a call (on this object's stream), back after.
  void take_y_slabs() {
    ORBIS_CUDA_CHECK(cudaSetDevice(device));
    if (!exchange) choose_exchange();
    gpu::AllocationStream on_stream(stream);
    phi.ensure_exact(phi_bytes());
    work.ensure_exact(work_bytes());
    take_fft_area();
  }
  void give_back_y_slabs() {
    gpu::AllocationStream on_stream(stream);
    phi.release();
    work.release();
    fft_area.release();
  }
  void take_fft_area() {
    fft_area.ensure_exact(std::max<std::size_t>(fft_work, 1));
    for (cufftHandle plan : {planes_r2c, planes_c2r, lines})
      if (plan) ORBIS_CUFFT_CHECK(cufftSetWorkArea(plan, fft_area.data()));
  }
  void choose_exchange();
  std::vector<gpu::PeerPull> make_y_to_x_pulls() const;
  template <typename C>
  void x_to_y(const C* x_slab, C* y_slab);
  template <typename C>
  void y_to_x(const C* y_slab, C* x_slab);
  // slab: the device x slab of the density, overwritten by g_x, g_y and g_z in turn; after
  // each, use(axis) (this object's stream finished; the next component overwrites the slab).
  // energy_rows (device, may be null): the mesh energy's row sums of this rank's y columns
  // (n x y.count doubles) from the transformed density, before the Green's function.
  template <typename Real>
  void run(Real* slab, const std::function<void(int axis)>& use, PhaseTimes& times, double* energy_rows = nullptr);
  template <typename Real>
  void run_host(Real* rho, Real* gx, Real* gy, PhaseTimes& times);
  template <typename Real>
  void forward(Real* density, void* modes);
};

CudaPmSlabs::CudaPmSlabs(const PmSettings& settings, const Comm& comm, int device, bool host_slab, int ghost_planes)
    : impl_(std::make_unique<Impl>(settings, comm, device,
                                   host_slab || SlabTranspose(settings.grid_side, comm.size(), comm.rank()).x.count == 0
                                       ? 0
                                       : ghost_planes)) {
  settings.check();
  if (settings.r_s_mpc_h == 0) fail("internal: the cuFFT slab PM is the long range's (TreePM); PM-only stays on FFTW");
  Impl& m = *impl_;
  ORBIS_CUDA_CHECK(cudaSetDevice(device));
  const long long n = settings.grid_side, nzc = n / 2 + 1;
  const SlabTranspose& t = m.layout;
  m.complex_bytes = settings.double_mesh ? 2 * sizeof(double) : 2 * sizeof(float);
  const bool twice = settings.double_mesh;
  std::size_t work = 0;
  if (t.x.count > 0) {
    // In place on FftMesh's padded layout: rows of 2(n/2+1) reals in, n/2+1 complex out.
    long long dims[2] = {n, n}, real_embed[2] = {n, 2 * nzc}, complex_embed[2] = {n, nzc};
    ORBIS_CUFFT_CHECK(cufftCreate(&m.planes_r2c));
    ORBIS_CUFFT_CHECK(cufftSetAutoAllocation(m.planes_r2c, 0));
    ORBIS_CUFFT_CHECK(cufftMakePlanMany64(m.planes_r2c, 2, dims, real_embed, 1, n * 2 * nzc, complex_embed, 1,
                                          n * nzc, twice ? CUFFT_D2Z : CUFFT_R2C, t.x.count, &work));
    m.fft_work = std::max(m.fft_work, work);
    ORBIS_CUFFT_CHECK(cufftCreate(&m.planes_c2r));
    ORBIS_CUFFT_CHECK(cufftSetAutoAllocation(m.planes_c2r, 0));
    ORBIS_CUFFT_CHECK(cufftMakePlanMany64(m.planes_c2r, 2, dims, complex_embed, 1, n * nzc, real_embed, 1,
                                          n * 2 * nzc, twice ? CUFFT_Z2D : CUFFT_C2R, t.x.count + m.ghosts, &work));
    m.fft_work = std::max(m.fft_work, work);
  }
  if (t.y.count > 0) {
    // The y slab [i][j - y0][k]: every (j, k) column is an x line of stride ny (n/2+1).
    const long long columns = static_cast<long long>(t.y.count) * nzc;
    long long dims[1] = {n}, embed[1] = {n};
    ORBIS_CUFFT_CHECK(cufftCreate(&m.lines));
    ORBIS_CUFFT_CHECK(cufftSetAutoAllocation(m.lines, 0));
    ORBIS_CUFFT_CHECK(cufftMakePlanMany64(m.lines, 1, dims, embed, columns, 1, embed, columns, 1,
                                          twice ? CUFFT_Z2Z : CUFFT_C2C, columns, &work));
    m.fft_work = std::max(m.fft_work, work);
  }
  const std::size_t slab_bytes = t.x_slab_count * m.complex_bytes, y_bytes = t.y_slab_count * m.complex_bytes;
  const std::size_t table_bytes = 2 * static_cast<std::size_t>(n) * sizeof(double);
  const std::size_t own_slab = host_slab ? slab_bytes : 0;
  const std::size_t need = own_slab + m.phi_bytes() + y_bytes + table_bytes + m.fft_work;
  const std::size_t available = gpu::device_available_bytes();
  if (need > available)
    fail("PM on the GPU over {} ranks: this rank's slabs of the {}^3 {} mesh need {:.1f} MiB of device {} (x slab "
         "{:.1f} MiB, phi's slab {:.1f} MiB, a y slab {:.1f} MiB, cuFFT's work area {:.1f} MiB) but {:.1f} MiB are "
         "free. More ranks, a smaller [gravity] pm_grid_side, or [gpu] backend = \"cpu\" (the host PM) need less",
         comm.size(), n, twice ? "double" : "float", mib(need), device, mib(own_slab), mib(m.phi_bytes()),
         mib(y_bytes), mib(m.fft_work), mib(available));
  if (host_slab) m.slab.ensure_exact(std::max<std::size_t>(slab_bytes, 1));
  if (host_slab) {   // the host entry keeps its y slabs and work area; the device entry takes them per call
    m.phi.ensure_exact(m.phi_bytes());
    m.work.ensure_exact(std::max<std::size_t>(y_bytes, 1));
    m.take_fft_area();
  }
  const PmAxisTables axes = make_pm_axis_tables(settings);
  std::vector<double> tables(axes.k);
  tables.insert(tables.end(), axes.inv_w2.begin(), axes.inv_w2.end());
  m.tables.ensure_exact(tables.size());
  m.tables.upload(tables.data(), tables.size());
  ORBIS_CUDA_CHECK(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking));
  for (cufftHandle plan : {m.planes_r2c, m.planes_c2r, m.lines})
    if (plan) ORBIS_CUFFT_CHECK(cufftSetStream(plan, m.stream));
  // The device entry's exchange now (collective, as this constructor is), so that what it
  // holds and what each call takes (transient_bytes()) are known before the first call.
  if (!host_slab) m.choose_exchange();
}

CudaPmSlabs::~CudaPmSlabs() = default;

std::size_t CudaPmSlabs::device_bytes() const {
  const Impl& m = *impl_;
  return m.slab.capacity() + m.phi.capacity() + m.work.capacity() + m.tables.capacity() * sizeof(double) +
         m.fft_area.capacity() +
         (m.exchange ? m.exchange->device_bytes() : 0);
}

std::size_t CudaPmSlabs::pinned_bytes() const { return impl_->send.capacity() + impl_->recv.capacity(); }

std::string CudaPmSlabs::describe() const {
  return fmt::format("cuFFT slabs over {} ranks, device {}, {:.1f} MiB on the device, {:.1f} MiB pinned{}",
                     impl_->comm.size(), impl_->device, mib(device_bytes()), mib(pinned_bytes()),
                     impl_->exchange ? "; transposes: " + impl_->exchange->describe() : std::string());
}

// Collective (the first run on every rank). With CUDA IPC the send side of both transposes
// is the exchange's exported buffer (grown here to the larger of an x and a y slab); staged,
// the pinned buffers take both sides.
void CudaPmSlabs::Impl::choose_exchange() {
  exchange = gpu::make_device_alltoallv(comm, gpu::rank_exchange(), "PM slab transposes");
  const std::size_t x_bytes = layout.x_slab_count * complex_bytes, y_bytes = layout.y_slab_count * complex_bytes;
  const std::size_t larger = std::max<std::size_t>(std::max(x_bytes, y_bytes), 1);
  if (exchange->peer_to_peer()) {
    exchange->reserve_exact(larger);
    y_to_x_pulls = make_y_to_x_pulls();
  } else {
    send.ensure(larger);
    recv.ensure(larger);
  }
}

// Rank s's exported y slab holds [i][j - y0_s][k] for every x plane i: this rank's planes are
// the rows i in [x0, x0 + nx), one pitched block into its x slab's columns of s (the x side of
// x_blocks[s]), and its ghost planes the rows (x0 + nx + g) mod n, into the planes after its
// own (one block, or two where they wrap past n).
std::vector<gpu::PeerPull> CudaPmSlabs::Impl::make_y_to_x_pulls() const {
  const SlabTranspose& t = layout;
  const std::size_t c = complex_bytes, nzc = static_cast<std::size_t>(t.nzc), n = static_cast<std::size_t>(t.n);
  std::vector<gpu::PeerPull> pulls;
  if (t.x.count == 0) return pulls;
  for (int s = 0; s < t.ranks; ++s) {
    const SlabPlanes ys = slab_planes(t.n, t.ranks, s);
    if (ys.count == 0) continue;
    const std::size_t row = static_cast<std::size_t>(ys.count) * nzc * c;   // one x plane of s's y slab
    const auto block = [&](std::size_t global_first, std::size_t local_first, std::size_t rows) {
      gpu::PeerPull q;
      q.rank = s;
      q.from = global_first * row;
      q.from_pitch = row;
      q.to = (local_first * n + static_cast<std::size_t>(ys.first)) * nzc * c;
      q.to_pitch = n * nzc * c;
      q.width = row;
      q.rows = rows;
      pulls.push_back(q);
    };
    block(static_cast<std::size_t>(t.x.first), 0, static_cast<std::size_t>(t.x.count));
    const std::size_t ghost_first = static_cast<std::size_t>(t.x.first + t.x.count) % n;
    const std::size_t before_wrap = std::min<std::size_t>(static_cast<std::size_t>(ghosts), n - ghost_first);
    if (before_wrap > 0) block(ghost_first, static_cast<std::size_t>(t.x.count), before_wrap);
    if (before_wrap < static_cast<std::size_t>(ghosts))
      block(0, static_cast<std::size_t>(t.x.count) + before_wrap, static_cast<std::size_t>(ghosts) - before_wrap);
  }
  return pulls;
}

void CudaPmSlabs::long_range(float* rho, float* gx, float* gy, PhaseTimes& times) {
  if (impl_->settings.double_mesh) fail("internal: a float mesh given to the double cuFFT slab PM");
  impl_->run_host(rho, gx, gy, times);
}

void CudaPmSlabs::long_range(double* rho, double* gx, double* gy, PhaseTimes& times) {
  if (!impl_->settings.double_mesh) fail("internal: a double mesh given to the float cuFFT slab PM");
  impl_->run_host(rho, gx, gy, times);
}

void CudaPmSlabs::long_range_on_device(float* rho, const std::function<void(int axis)>& use, PhaseTimes& times,
                                       double* energy_rows) {
  if (impl_->settings.double_mesh) fail("internal: a float mesh given to the double cuFFT slab PM");
  impl_->take_y_slabs();
  impl_->run(rho, use, times, energy_rows);
  impl_->give_back_y_slabs();
}

void CudaPmSlabs::long_range_on_device(double* rho, const std::function<void(int axis)>& use, PhaseTimes& times,
                                       double* energy_rows) {
  if (!impl_->settings.double_mesh) fail("internal: a double mesh given to the float cuFFT slab PM");
  impl_->take_y_slabs();
  impl_->run(rho, use, times, energy_rows);
  impl_->give_back_y_slabs();
}

void CudaPmSlabs::forward_on_device(float* rho, void* modes) {
  if (impl_->settings.double_mesh) fail("internal: a float mesh given to the double cuFFT slab PM");
  impl_->forward(rho, modes);
}

void CudaPmSlabs::forward_on_device(double* rho, void* modes) {
  if (!impl_->settings.double_mesh) fail("internal: a double mesh given to the float cuFFT slab PM");
  impl_->forward(rho, modes);
}

// run()'s first three passes, into the caller's y slab, with the work area from the pool for
// the call. The first call may choose the exchange.
template <typename Real>
void CudaPmSlabs::Impl::forward(Real* density, void* modes_out) {
  using C = typename gpu::MeshComplex<Real>::type;
  ORBIS_CUDA_CHECK(cudaSetDevice(device));
  if (!exchange) choose_exchange();
  C* const modes = static_cast<C*>(modes_out);
  gpu::AllocationStream on_stream(stream);
  const bool take_area = fft_area.capacity() == 0;   // the host entry holds its own
  if (take_area) take_fft_area();
  if (layout.x.count > 0) cufft_forward_real(planes_r2c, density);
  x_to_y(reinterpret_cast<const C*>(density), modes);
  if (layout.y.count > 0) x_lines(lines, modes, modes, CUFFT_FORWARD);
  if (take_area) fft_area.release();
  sync();
}

gpu::DeviceAlltoallv* CudaPmSlabs::peer_exchange() const {
  return impl_->exchange && impl_->exchange->peer_to_peer() ? impl_->exchange.get() : nullptr;
}

bool CudaPmSlabs::ghost_planes_filled() const { return impl_->peer(); }

std::size_t CudaPmSlabs::held_bytes() const {
  const Impl& m = *impl_;
  return m.slab.capacity() + m.tables.capacity() * sizeof(double) + (m.exchange ? m.exchange->device_bytes() : 0);
}
std::size_t CudaPmSlabs::transient_bytes() const {
  return impl_->phi_bytes() + impl_->work_bytes() + std::max<std::size_t>(impl_->fft_work, 1);
}
std::size_t CudaPmSlabs::outside_pool_bytes() const {
  return impl_->exchange ? impl_->exchange->device_bytes() : 0;
}

// The host slabs through the device x slab: uploaded, and each component downloaded before
// the next one takes the slab.
template <typename Real>
void CudaPmSlabs::Impl::run_host(Real* rho, Real* gx, Real* gy, PhaseTimes& times) {
  if (slab.capacity() == 0) fail("internal: the cuFFT slab PM was built for device slabs only");
  ORBIS_CUDA_CHECK(cudaSetDevice(device));
  Real* slab_real = reinterpret_cast<Real*>(slab.data());
  {
    ScopedPhase phase(times, "pm_fft");
    if (layout.x.count > 0)
      ORBIS_CUDA_CHECK(cudaMemcpyAsync(slab_real, rho, layout.x_slab_count * 2 * sizeof(Real), cudaMemcpyHostToDevice,
                                       stream));
    sync();
  }
  Real* const host_out[3] = {gx, gy, rho};   // g_z replaces the density, as on the host
  const std::size_t slab_bytes = layout.x_slab_count * 2 * sizeof(Real);
  run(slab_real, [&](int axis) {
    ScopedPhase phase(times, "pm_fft");   // with the transforms, as the upload
    if (layout.x.count > 0)
      ORBIS_CUDA_CHECK(cudaMemcpyAsync(host_out[axis], slab_real, slab_bytes, cudaMemcpyDeviceToHost, stream));
    sync();
  }, times);
}

// x slab -> y slab: the pitched blocks packed by destination on their way to the host (one
// 2D copy each), the all-to-all, and what arrived is the y slab (sources in rank order:
// pm/slab_transpose.hpp), uploaded in one copy. MPI's element is a z line.
template <typename C>
void CudaPmSlabs::Impl::x_to_y(const C* x_slab, C* y_slab) {
  const SlabTranspose& t = layout;
  const std::size_t line = static_cast<std::size_t>(t.nzc) * sizeof(C);
  if (exchange->peer_to_peer()) return gpu::transpose_x_to_y_peer(t, *exchange, x_slab, y_slab, stream);
  C* out = reinterpret_cast<C*>(send.data());
  C* in = reinterpret_cast<C*>(recv.data());
  for (const PitchedBlock& b : t.x_blocks)
    if (b.count() > 0)
      ORBIS_CUDA_CHECK(cudaMemcpy2DAsync(out + b.buffer_offset, b.width * sizeof(C), x_slab + b.slab_offset,
                                         b.pitch * sizeof(C), b.width * sizeof(C), b.rows, cudaMemcpyDeviceToHost,
                                         stream));
  sync();
  comm.alltoallv_known(out, t.x_lines, in, t.y_lines, line);
  if (t.y_slab_count > 0)
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(y_slab, in, t.y_slab_count * sizeof(C), cudaMemcpyHostToDevice, stream));
}

// y slab -> x slab: the y slab downloaded as it is (grouped by destination already), the
// all-to-all, and the blocks unpacked into their columns of the x slab on the way up.
template <typename C>
void CudaPmSlabs::Impl::y_to_x(const C* y_slab, C* x_slab) {
  const SlabTranspose& t = layout;
  const std::size_t line = static_cast<std::size_t>(t.nzc) * sizeof(C);
  if (exchange->peer_to_peer()) {
    // The y slab is the exported buffer (run() wrote it there); each rank copies its planes'
    // and its ghost planes' rows from the senders' buffers straight into its x slab.
    (void)y_slab;
    return exchange->pull(y_to_x_pulls, x_slab, stream);
  }
  C* out = reinterpret_cast<C*>(send.data());
  C* in = reinterpret_cast<C*>(recv.data());
  if (t.y_slab_count > 0)
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(out, y_slab, t.y_slab_count * sizeof(C), cudaMemcpyDeviceToHost, stream));
  sync();
  comm.alltoallv_known(out, t.y_lines, in, t.x_lines, line);
  for (const PitchedBlock& b : t.x_blocks)
    if (b.count() > 0)
      ORBIS_CUDA_CHECK(cudaMemcpy2DAsync(x_slab + b.slab_offset, b.pitch * sizeof(C), in + b.buffer_offset,
                                         b.width * sizeof(C), b.width * sizeof(C), b.rows, cudaMemcpyHostToDevice,
                                         stream));
}

template <typename Real>
void CudaPmSlabs::Impl::run(Real* slab_real, const std::function<void(int axis)>& use, PhaseTimes& times,
                            double* energy_rows) {
  using C = typename gpu::MeshComplex<Real>::type;
  ORBIS_CUDA_CHECK(cudaSetDevice(device));
  if (!exchange) choose_exchange();
  const SlabTranspose& t = layout;
  const int n = settings.grid_side;
  C* phi_modes = reinterpret_cast<C*>(phi.data());
  C* work_modes = reinterpret_cast<C*>(work.data());
  const double* k_axis = tables.data();
  const double* inv_w2 = tables.data() + n;
  const bool planes = t.x.count > 0, columns = t.y.count > 0;
  {
    ScopedPhase phase(times, "pm_fft");
    if (planes) cufft_forward_real(planes_r2c, slab_real);
    sync();
  }
  {
    ScopedPhase phase(times, "pm_exchange");
    x_to_y(reinterpret_cast<const C*>(slab_real), phi_modes);
    sync();
  }
  {
    ScopedPhase phase(times, "pm_fft");
    if (columns) x_lines(lines, phi_modes, phi_modes, CUFFT_FORWARD);
    sync();
  }
  {
    // phi(k) = -4 pi G exp(-k^2 r_s^2) / (k^2 W(k)^2) rho(k), the 1/n^3 folded in
    // (PmSolver's run_long_range, the same function).
    ScopedPhase phase(times, "pm_green");
    if (columns && energy_rows)   // the energy check's mesh term from these modes (gpu/pm_cuda_ranks.hpp)
      gpu::pm_long_range_energy_rows<Real>(phi_modes, n, k_axis, inv_w2, long_range_norm(n),
                                           settings.r_s_mpc_h * settings.r_s_mpc_h, energy_rows, stream, t.y.first,
                                           t.y.count);
    if (columns)
      gpu::pm_long_range_green<Real>(phi_modes, n, k_axis, inv_w2, long_range_norm(n),
                                     settings.r_s_mpc_h * settings.r_s_mpc_h, stream, t.y.first, t.y.count);
    sync();
  }
  // g_x = -i k_x phi needs the x modes: made on the y slab, transformed along x and moved to
  // the x slab. Then phi itself, transformed along x, goes to the x slabs once: there g_y and
  // g_z are -i k_y phi and -i k_z phi (the 2D transforms' own axes), made in the x slab from
  // it before each 2D transform. Three transposes and two 1D inverse transforms a mesh
  // instead of four and three (the products after the x transform instead of before: equal to
  // rounding, the transform being linear). With CUDA IPC what y -> x sends is written into the
  // exchange's exported buffer (collective: every rank asks for it); phi's x slab is phi's y
  // slab's memory (phi_bytes() holds either).
  C* const to_send =
      peer() ? static_cast<C*>(exchange->send_buffer(std::max<std::size_t>(t.y_slab_count * sizeof(C), 1)))
             : work_modes;
  C* const phi_x = phi_modes;
  const int slab_planes = t.x.count + (peer() ? ghosts : 0);   // staged: the ghost planes come after, in real space
  const auto transform_planes_and_use = [&](int axis) {
    {
      ScopedPhase phase(times, "pm_fft");
      if (planes) cufft_backward_real(planes_c2r, slab_real);
      sync();
    }
    use(axis);
  };
  {
    ScopedPhase phase(times, "pm_gradient");
    if (columns) gpu::pm_long_range_gradient<Real>(phi_modes, to_send, n, 0, k_axis, stream, t.y.first, t.y.count);
    sync();
  }
  {
    ScopedPhase phase(times, "pm_fft");
    if (columns) x_lines(lines, to_send, to_send, CUFFT_INVERSE);
    sync();
  }
  {
    ScopedPhase phase(times, "pm_exchange");
    y_to_x(to_send, reinterpret_cast<C*>(slab_real));
    sync();
  }
  transform_planes_and_use(0);
  {
    ScopedPhase phase(times, "pm_fft");
    if (columns) x_lines(lines, phi_modes, to_send, CUFFT_INVERSE);
    sync();
  }
  {
    ScopedPhase phase(times, "pm_exchange");
    y_to_x(to_send, phi_x);
    sync();
  }
  for (int axis = 1; axis < 3; ++axis) {
    {
      ScopedPhase phase(times, "pm_gradient");
      if (planes)
        gpu::pm_slab_gradient<Real>(phi_x, reinterpret_cast<C*>(slab_real), n, slab_planes, axis, k_axis, stream);
      sync();
    }
    transform_planes_and_use(axis);
  }
}

std::unique_ptr<PmSlabTransform> make_cuda_pm_slabs(const PmSettings& settings, const Comm& comm, int device,
                                                    std::string* why) {
  std::string reason;
  const bool usable = cuda_device_usable(device, &reason);
  const std::vector<int> all = comm.allgather(usable ? 1 : 0);
  for (int r = 0; r < comm.size(); ++r)
    if (!all[static_cast<std::size_t>(r)]) {
      if (why) *why = r == comm.rank() ? reason : fmt::format("rank {} has no usable GPU", r);
      return nullptr;
    }
  std::unique_ptr<PmSlabTransform> out;
  run_collectively(comm, [&] { out = std::make_unique<CudaPmSlabs>(settings, comm, device); });
  return out;
}

bool use_cuda_pm_slabs(PmSolver& pm, const Comm& comm, int device, std::string* why) {
  std::unique_ptr<PmSlabTransform> slabs = make_cuda_pm_slabs(pm.settings(), comm, device, why);
  if (!slabs) return false;
  pm.use_slab_transform(std::move(slabs));
  log::info("PM: cuFFT slabs over {} ranks, device {}", comm.size(), device);
  return true;
}

}  // namespace orbis
