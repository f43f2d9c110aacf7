// The long-range PM over ranks on the GPUs (gpu/pm_cuda_ranks.hpp): routing of the particles
// to the slab owners and back, the ghost planes of the density and of the forces, and the
// order of the passes. The mesh kernels are the one-GPU PM's (gpu/pm_cuda_mesh.cuh), the
// Fourier work CudaPmSlabs' (gpu/pm_cuda_slabs.hpp). The potential energy's own passes are in
// gpu/pm_cuda_ranks_energy.cu, the counts' modes (for the P(k)) in gpu/pm_cuda_ranks_modes.cu.
#include "gpu/pm_cuda_ranks.hpp"

#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/log.hpp"
#include "fmm/p2p_cuda_factory.hpp"
#include "gpu/cub_counts.cuh"
#include "gpu/cuda_check.cuh"
#include "gpu/device_alltoallv.cuh"
#include "gpu/device_buffer.cuh"
#include "gpu/particle_kernels.cuh"
#include "gpu/pm_cuda_mesh.cuh"
#include "gpu/pm_cuda_ranks_impl.cuh"
#include "gpu/pm_cuda_slabs.hpp"
#include "pm/fft_mesh.hpp"
#include "pm/fixed_point_mesh.hpp"
#include "pm/pm_modes.hpp"
#include "pm/slab_ghost_lists.hpp"
#include "pm/slab_routing.hpp"
#include "pm/slab_transpose.hpp"

namespace orbis {
namespace {

constexpr unsigned kThreads = 256;
constexpr int kMaxRanks = 12288;   // count_kernel's counts in a block's 48 KiB of shared memory
unsigned grid_for(std::size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }
double mib(std::size_t bytes) { return static_cast<double>(bytes) / 1048576.0; }

// The rank owning the first x plane of a particle's stencil at x: SlabRouting::route's rule on
// the unshifted mesh (the shifted meshes' stencils start at most one plane further, which the
// window-order ghost planes hold).
struct SlabRule {
  double box, cells_per_length;
  Window window;
  int mesh_n, block;   // block: planes per rank (slab_owner, pm/fft_mesh.hpp)
  __device__ int owner(double x) const { return stencil_first_plane(x, box, cells_per_length, window, mesh_n) / block; }
};

SlabRule slab_rule(const PmSettings& s, int ranks) {
  return SlabRule{s.box_mpc_h, s.grid_side / s.box_mpc_h, s.window, s.grid_side, (s.grid_side + ranks - 1) / ranks};
}

// counts[owner of p] += 1 for every particle p. Nearly every particle has the same owner (a
// few ranks, domains that are nearly x slabs), and one atomic per particle on that counter
// serialises in the L2 (~12 ms for 16.8M particles on an H200): each warp adds its equal
// owners at once into the block's counts in shared memory (`ranks` of them, 4 bytes each:
// kMaxRanks fill the 48 KiB a block may have), and each block adds its counts into the global
// ones. Integer sums: exact in any order.
__global__ void count_kernel(const double* __restrict__ x, std::size_t n, SlabRule rule, int ranks,
                             unsigned long long* __restrict__ counts) {
  extern __shared__ unsigned block_counts[];   // a block's counts stay far below 2^32
  for (int r = threadIdx.x; r < ranks; r += blockDim.x) block_counts[r] = 0;
  __syncthreads();
  const unsigned lane = threadIdx.x % 32;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  // Whole warps iterate together (the match needs every lane), past n where they must.
  for (std::size_t base = blockIdx.x * static_cast<std::size_t>(blockDim.x); base < n; base += stride) {
    const std::size_t p = base + threadIdx.x;
    const int owner = p < n ? rule.owner(x[p]) : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, owner);
    if (owner >= 0 && lane == static_cast<unsigned>(__ffs(peers) - 1))
      atomicAdd(block_counts + owner, static_cast<unsigned>(__popc(peers)));
  }
  __syncthreads();
  for (int r = threadIdx.x; r < ranks; r += blockDim.x)
    if (block_counts[r] != 0) atomicAdd(counts + r, static_cast<unsigned long long>(block_counts[r]));
}

// The particles another rank's slab takes (cub::DeviceSelect's predicate on indices).
struct Leaves {
  const double* x;
  SlabRule rule;
  int me;
  __device__ bool operator()(std::uint32_t p) const { return rule.owner(x[p]) != me; }
};

// key[q] = the owner of leaver index[q].
__global__ void key_kernel(const double* __restrict__ x, const std::uint32_t* __restrict__ index, std::size_t count,
                           SlabRule rule, std::uint32_t* __restrict__ key) {
  const std::size_t q = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (q < count) key[q] = static_cast<std::uint32_t>(rule.owner(x[index[q]]));
}

// out[3 q + d] = soa[d n + order[q]] for q < count: the leavers' positions in send order,
// interleaved (MPI's element is one particle); n is soa's stride.
__global__ void pack_kernel(const double* __restrict__ soa, std::size_t n, const std::uint32_t* __restrict__ order,
                            std::size_t count, double* __restrict__ out) {
  const std::size_t q = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (q >= count) return;
  const std::size_t i = order[q];
  for (int d = 0; d < 3; ++d) out[3 * q + d] = soa[d * n + i];
}

// soa[d n + order[q]] = in[3 q + d] for q < count: the leavers' accelerations back into the
// caller's order.
__global__ void unpack_kernel(const double* __restrict__ in, std::size_t n, const std::uint32_t* __restrict__ order,
                              std::size_t count, double* __restrict__ soa) {
  const std::size_t q = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (q >= count) return;
  const std::size_t i = order[q];
  for (int d = 0; d < 3; ++d) soa[d * n + i] = in[3 * q + d];
}

// to[e] += from[e]: a ghost plane's integer sums into its owner's plane.
__global__ void add_plane_kernel(unsigned long long* __restrict__ to, const unsigned long long* __restrict__ from,
                                 std::size_t count) {
  const std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (e < count) to[e] += from[e];
}

}  // namespace

CudaPmRanks::Impl::~Impl() {
  if (own_stream) cudaStreamSynchronize(own_stream);
  if (forward_planes_made) cufftDestroy(forward_planes);
  if (forward_lines_made) cufftDestroy(forward_lines);
  if (own_stream) cudaStreamDestroy(own_stream);
}

CudaPmRanks::CudaPmRanks(const PmSettings& settings, const Comm& comm, int device, Use use)
    : settings_(settings), impl_(std::make_unique<Impl>(settings, comm, device, use)) {
  settings.check();
  if (settings.r_s_mpc_h == 0 && use != Use::counts)
    fail("internal: the PM over ranks on the GPUs is the long range's (TreePM)");
  Impl& m = *impl_;
  ORBIS_CUDA_CHECK(cudaSetDevice(device));
  const int n = settings.grid_side, ranks = comm.size(), rank = comm.rank();
  if (ranks > kMaxRanks)   // the routing's counts per block in shared memory (count_kernel)
    fail("the PM over ranks on the GPUs runs on at most {} ranks ({} given); [gpu] backend = \"cpu\" has no such limit",
         kMaxRanks, ranks);
  m.slab = slab_planes(n, ranks, rank);
  // Window-order ghost planes: the stencil reaches order - 1 planes past its first, and the
  // interlaced mesh's (or the 1/4 cell shift's) first plane is at most one past the routed one.
  const int wanted = window_order(settings.window);
  m.ghosts = ghost_plane_count(n, m.slab, wanted);
  m.held = m.slab.count + m.ghosts;
  const std::size_t padded = 2 * (static_cast<std::size_t>(n) / 2 + 1);
  m.mesh_reals = std::max<std::size_t>(static_cast<std::size_t>(m.held) * n * padded, 1);

  SlabGhostLists lists = slab_ghost_lists(n, ranks, rank, wanted);
  m.ghost_planes = std::move(lists.ghost_planes);
  m.ghost_counts = std::move(lists.ghost_counts);
  m.owned_planes = std::move(lists.owned_planes);
  m.owned_counts = std::move(lists.owned_counts);

  m.counts_dev.ensure_exact(static_cast<std::size_t>(ranks));
  m.selected.ensure_exact(1);
  m.counts_host.ensure(static_cast<std::size_t>(ranks) + 1);   // and the leavers' selection count
  ORBIS_CUDA_CHECK(cudaStreamCreateWithFlags(&m.own_stream, cudaStreamNonBlocking));
  if (use == Use::energy) {   // no slabs held: potential_energy() takes them from the pool
    m.make_energy_plans();
    return;
  }
  if (use == Use::counts) {   // no slabs held: count_modes() takes them from the pool
    m.make_forward_plans();
    return;
  }
  m.slabs = std::make_unique<CudaPmSlabs>(settings, comm, device, /*host_slab=*/false, m.ghosts);
  // The deposit's peak: the x slab and the fixed-point sums (the y slabs come after the sums),
  // the received density ghost planes and (the second interlaced mesh's) force ghost planes.
  const std::size_t mesh_bytes = m.meshes_bytes() + m.fixed_count() * sizeof(unsigned long long);
  const std::size_t ghost_bytes = m.ghost_in_count() * sizeof(unsigned long long) +
                                  std::max<std::size_t>(m.ghost_planes.size(), 1) * static_cast<std::size_t>(n) * 2 *
                                      (n / 2 + 1) * (settings.double_mesh ? sizeof(double) : sizeof(float));
  const std::size_t available = gpu::device_available_bytes();
  if (mesh_bytes + ghost_bytes > available)
    fail("PM on the GPUs over {} ranks: this rank's x slab of {} planes and {} ghost planes of the {}^3 {} mesh and its "
         "fixed-point sums need "
         "{:.1f} MiB of device {} beside the cuFFT slabs' {:.1f} MiB, but {:.1f} MiB are free. More ranks, a smaller "
         "[gravity] pm_grid_side, or [gpu] backend = \"cpu\" need less",
         ranks, m.slab.count, m.ghosts, n, settings.double_mesh ? "double" : "float", mib(mesh_bytes + ghost_bytes),
         device, mib(m.slabs->device_bytes()), mib(available));
  // The meshes are taken from the pool by each accelerations() call and given back after it
  // (transient_bytes()), as the one-GPU PM's: between PM steps the short-range step uses
  // that memory.
}

CudaPmRanks::~CudaPmRanks() = default;

std::size_t CudaPmRanks::planned_transient_bytes(const PmSettings& settings, int ranks, int rank) {
  // The constructor's sizes (the x slab with its ghost planes, the received ghost planes), then
  // the larger of the fixed-point sums (pm_fixed_planes) and CudaPmSlabs' y slab of the modes
  // with the larger of an x and a y slab (with CUDA IPC the exchange's exported buffer, held;
  // staged a second y slab): the sums go back before the y slabs are taken.
  const int n = settings.grid_side, wanted = window_order(settings.window);
  const SlabPlanes slab = slab_planes(n, ranks, rank);
  const int ghosts = ghost_plane_count(n, slab, wanted);
  const auto held = static_cast<std::size_t>(slab.count + ghosts);
  const std::size_t padded = 2 * (static_cast<std::size_t>(n) / 2 + 1), plane = static_cast<std::size_t>(n) * n;
  const std::size_t real = settings.double_mesh ? sizeof(double) : sizeof(float);
  const std::size_t mesh = std::max<std::size_t>(held * n * padded, 1) * real;
  const std::size_t fixed = static_cast<std::size_t>(pm_fixed_planes(n, static_cast<int>(held), ghosts,
                                                                      settings.double_mesh)) *
                            plane * sizeof(unsigned long long);
  const SlabGhostLists lists = slab_ghost_lists(n, ranks, rank, wanted);
  const std::size_t ghost_in = std::max<std::size_t>(lists.owned_planes.size(), 1) * plane * sizeof(unsigned long long);
  const std::size_t force_ghost_in = std::max<std::size_t>(lists.ghost_planes.size(), 1) * padded * n * real;
  const SlabTranspose layout(n, ranks, rank);
  const std::size_t y = layout.y_slab_count * 2 * real, x = layout.x_slab_count * 2 * real;
  return mesh + ghost_in + force_ghost_in + std::max(fixed, y + std::max(x, y));
}

std::size_t CudaPmRanks::routing_bytes(std::size_t leaving, std::size_t arriving) {
  // A leaver: two keys and two order entries (the sort's double buffers), the packed
  // position, then its acceleration there; the sort's temporary storage (a bound). An
  // arrival: as received, positions and accelerations in blocks.
  return leaving * (4 * sizeof(std::uint32_t) + 3 * sizeof(double) + 2 * sizeof(std::uint32_t)) +
         arriving * 3 * 3 * sizeof(double) + (std::size_t{1} << 20);
}

CudaPmRoutingCounts CudaPmRanks::routing_counts(const double* pos, std::size_t n, CUstream_st* stream) {
  Impl& m = *impl_;
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  m.count_destinations(pos, n, stream);
  const int me = m.comm.rank();
  return CudaPmRoutingCounts{n - m.send_counts[me], Comm::total(m.recv_counts) - m.recv_counts[me]};
}

std::size_t CudaPmRanks::mesh_bytes() const {
  return impl_->mesh_bytes() + (impl_->slabs ? impl_->slabs->device_bytes() : 0);
}
std::size_t CudaPmRanks::device_bytes() const {
  return mesh_bytes() + impl_->particle_bytes() + impl_->axis_tables.capacity() * sizeof(double);
}
std::size_t CudaPmRanks::held_bytes() const {
  return (impl_->slabs ? impl_->slabs->held_bytes() : 0) + impl_->axis_tables.capacity() * sizeof(double);
}
std::size_t CudaPmRanks::outside_pool_bytes() const {
  return impl_->slabs ? impl_->slabs->outside_pool_bytes() : 0;
}
std::size_t CudaPmRanks::transient_bytes() const {
  const Impl& m = *impl_;
  const std::size_t plane = static_cast<std::size_t>(settings_.grid_side) * 2 * (settings_.grid_side / 2 + 1);
  const std::size_t force_ghost_in = std::max<std::size_t>(m.ghost_planes.size(), 1) * plane *
                                     (settings_.double_mesh ? sizeof(double) : sizeof(float));
  return m.meshes_bytes() + m.ghost_in_count() * sizeof(unsigned long long) + force_ghost_in +
         std::max(m.fixed_count() * sizeof(unsigned long long), m.slabs ? m.slabs->transient_bytes() : 0);
}
std::size_t CudaPmRanks::pinned_bytes() const {
  return impl_->send.capacity() + impl_->recv.capacity() + (impl_->slabs ? impl_->slabs->pinned_bytes() : 0);
}
const PmRankTraffic& CudaPmRanks::traffic() const { return impl_->traffic; }
gpu::DeviceAlltoallv* CudaPmRanks::peer_transposes() const {
  return impl_->slabs ? impl_->slabs->peer_exchange() : nullptr;
}

PmRankTraffic CudaPmRanks::total_traffic() const {
  const Comm& c = impl_->comm;
  const PmRankTraffic& t = impl_->traffic;
  PmRankTraffic s;
  s.particles = c.sum<std::uint64_t>(t.particles);
  s.particles_away = c.sum<std::uint64_t>(t.particles_away);
  s.particle_bytes = c.sum<std::uint64_t>(t.particle_bytes);
  s.ghost_bytes = c.sum<std::uint64_t>(t.ghost_bytes);
  s.transpose_bytes = c.sum<std::uint64_t>(t.transpose_bytes);
  return s;
}

std::string CudaPmRanks::describe() const {
  const PmSettings& s = settings_;
  if (impl_->use == Use::counts)
    return fmt::format("{}^3 {} mesh, {}, the counts' Fourier modes over {} ranks on the GPUs: slabs from the device "
                       "pool of device {} at each call (x planes [{}, {}) and {} ghost planes)",
                       s.grid_side, s.double_mesh ? "double" : "float", window_name(s.window), impl_->comm.size(),
                       impl_->device, impl_->slab.first, impl_->slab.first + impl_->slab.count, impl_->ghosts);
  if (impl_->use == Use::energy)
    return fmt::format("PM {}^3 {} mesh, {}, long-range potential energy{} over {} ranks on the GPUs: slabs from the "
                       "device pool of device {} at each call (x planes [{}, {}) and {} ghost planes)",
                       s.grid_side, s.double_mesh ? "double" : "float", window_name(s.window),
                       s.interlaced ? " of two interlaced meshes" : "", impl_->comm.size(), impl_->device,
                       impl_->slab.first, impl_->slab.first + impl_->slab.count, impl_->ghosts);
  return fmt::format("PM {}^3 {} mesh, {}, long range{} over {} ranks, particles and meshes on the GPUs: {:.1f} MiB of "
                     "slabs on device {} (x planes [{}, {}) and {} ghost planes)",
                     s.grid_side, s.double_mesh ? "double" : "float", window_name(s.window),
                     s.interlaced ? " on two interlaced meshes" : "", impl_->comm.size(), mib(mesh_bytes()),
                     impl_->device, impl_->slab.first, impl_->slab.first + impl_->slab.count, impl_->ghosts);
}

std::size_t CudaPmRanks::Impl::total_particles(std::size_t n) const {
  comm.throw_if_any_failed(n >= std::numeric_limits<std::uint32_t>::max()
                               ? fmt::format("PM over ranks: {} particles on rank {}; at most 2^32 - 1", n, comm.rank())
                               : std::string());
  return comm.sum<std::uint64_t>(n);
}

// Every own particle's destination counted (send_counts, this rank's own included), and what
// every rank sends here (recv_counts): SlabRule, on the device. Collective.
void CudaPmRanks::Impl::count_destinations(const double* pos, std::size_t n, cudaStream_t stream) {
  const int ranks = comm.size();
  ORBIS_CUDA_CHECK(cudaMemsetAsync(counts_dev.data(), 0, ranks * sizeof(unsigned long long), stream));
  if (n > 0) {
    // A few blocks a multiprocessor, each striding over the particles: few global atomics.
    int device_sms = 0;
    ORBIS_CUDA_CHECK(cudaDeviceGetAttribute(&device_sms, cudaDevAttrMultiProcessorCount, device));
    const unsigned blocks = std::min<unsigned>(grid_for(n), 4u * static_cast<unsigned>(device_sms));
    count_kernel<<<blocks, kThreads, ranks * sizeof(unsigned), stream>>>(
        pos, n, slab_rule(settings, ranks), ranks, counts_dev.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(counts_host.data(), counts_dev.data(), ranks * sizeof(unsigned long long),
                                   cudaMemcpyDeviceToHost, stream));
  sync(stream);
  send_counts.assign(ranks, 0);
  for (int r = 0; r < ranks; ++r) send_counts[r] = static_cast<std::size_t>(counts_host.data()[r]);
  recv_counts = comm.alltoall_counts(send_counts, n);
}

// Positions to the slab owners. The particles whose stencil starts in this rank's slab stay
// where they are: the passes read them from the caller's positions (PmSlabKeep). The others,
// the leavers (those near a slab boundary when the domains are nearly x slabs), are listed in
// index order, sorted stably by destination, packed and sent; what arrives from the other
// ranks goes into x | y | z blocks (routed_pos).
void CudaPmRanks::Impl::route(const double* pos, std::size_t n, cudaStream_t stream) {
  const int ranks = comm.size(), me = comm.rank();
  own_pos = pos;
  own_n = n;
  count_destinations(pos, n, stream);
  leaving = n - send_counts[me];
  send_counts[me] = recv_counts[me] = 0;   // the stayers do not move
  const std::size_t room = std::max<std::size_t>(leaving, 1);
  keys.ensure(room);
  keys_alt.ensure(room);
  order.ensure(room);
  order_alt.ensure(room);
  packed.ensure(3 * room);
  int bits = 1;
  while ((1 << bits) < ranks) ++bits;
  const SlabRule rule = slab_rule(settings, ranks);
  const thrust::counting_iterator<std::uint32_t> index(0);
  const auto items = static_cast<std::int64_t>(n);
  const Leaves leaves{pos, rule, me};
  std::size_t select_bytes = 0;
  if (n > 0)
    ORBIS_CUDA_CHECK(
        cub::DeviceSelect::If(nullptr, select_bytes, index, order.data(), selected.data(), items, leaves, stream));
  sort_temp.ensure(std::max(select_bytes, gpu::radix_sort_pairs_bytes<std::uint32_t, std::uint32_t>(room, 0, bits)));
  cub::DoubleBuffer<std::uint32_t> key_buffers(keys.data(), keys_alt.data());
  cub::DoubleBuffer<std::uint32_t> order_buffers(order.data(), order_alt.data());
  if (leaving > 0) {
    ORBIS_CUDA_CHECK(cub::DeviceSelect::If(sort_temp.data(), select_bytes, index, order.data(), selected.data(), items,
                                           leaves, stream));
    // The selection's count, checked against the counts below, after the exchange's wait.
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(counts_host.data() + ranks, selected.data(), sizeof(std::int64_t),
                                     cudaMemcpyDeviceToHost, stream));
    key_kernel<<<grid_for(leaving), kThreads, 0, stream>>>(pos, order.data(), leaving, rule, keys.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    gpu::radix_sort_pairs(sort_temp.data(), sort_temp.capacity(), key_buffers, order_buffers, leaving, 0, bits,
                          stream);
  }
  sorted_order = order_buffers.Current();
  if (leaving > 0) {
    pack_kernel<<<grid_for(leaving), kThreads, 0, stream>>>(pos, n, sorted_order, leaving, packed.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  routed_count = Comm::total(recv_counts);
  const std::size_t m = routed_count, routed_room = std::max<std::size_t>(m, 1);
  routed.ensure(3 * routed_room);
  routed_pos.ensure(3 * routed_room);
  exchange_particles(packed.data(), send_counts, routed.data(), recv_counts, stream);
  // The selection and the counts apply the same rule (SlabRule), as the deposit and the
  // interpolation do (PmSlabKeep): a particle deposited twice or not at all would show here.
  if (leaving > 0 && counts_host.data()[ranks] != leaving)
    fail("internal: PM over ranks: {} particles selected to leave, {} counted", counts_host.data()[ranks], leaving);
  if (m > 0) gpu::deinterleave(routed.data(), m, routed_pos.data(), stream);
  traffic.particles = n;
  traffic.particles_away = leaving;
  traffic.particle_bytes = 2 * 3 * sizeof(double) * leaving;
}

// The fixed-point deposit at g of this rank's share into its held planes [x_lo, x_hi) (local
// numbers), at `fixed` from x_lo on (zeroed): the own particles that stay, from the caller's
// positions, and those routed here.
void CudaPmRanks::Impl::deposit(const gpu::PmMeshGeometry& g, double scale, int x_lo, int x_hi,
                                unsigned long long* fixed, cudaStream_t stream) const {
  if (x_hi <= x_lo) return;
  const std::size_t m = routed_count;
  const double* const rx = routed_pos.data();
  const int lo = slab.first + x_lo, hi = slab.first + x_hi;
  ORBIS_CUDA_CHECK(cudaMemsetAsync(fixed, 0, static_cast<std::size_t>(x_hi - x_lo) * settings.grid_side *
                                                 settings.grid_side * sizeof(unsigned long long),
                                   stream));
  gpu::pm_assign_fixed(own_pos, own_pos + own_n, own_pos + 2 * own_n, own_n, g, lo, hi, scale, fixed, stream,
                       keep_own());
  gpu::pm_assign_fixed(rx, rx + m, rx + 2 * m, m, g, lo, hi, scale, fixed, stream);
}

// The sums go through `fixed` (fixed_count()) in passes when it cannot hold every held
// plane's: first the ghost planes, sent to their owners, then the slab's planes a chunk at a
// time, each with the ghost planes received for it, converted into rho before the next. A
// node's sum is the same integer in any pass (every particle adds the same term to it); the
// passes cost reading the positions again (those outside a pass's planes only read x).
template <typename Real>
void CudaPmRanks::Impl::density_into(const gpu::PmMeshGeometry& g, double scale, double mean, double factor, Real* rho,
                                     unsigned long long* fixed, cudaStream_t stream, PhaseTimes& times) {
  const int n = settings.grid_side, capacity = fixed_planes();
  const std::size_t cells = static_cast<std::size_t>(n) * n;
  const bool one_pass = capacity >= held;   // a double mesh's: the sums take no more than its x slab
  const int ghosts_from = one_pass ? 0 : slab.count;
  {
    ScopedPhase phase(times, "pm_assign");
    deposit(g, scale, ghosts_from, held, fixed, stream);
  }
  {
    // The ghost planes' sums to their owners, which add them into their own (integer
    // addition: the owner's sums are the same bits as if it had assigned every particle).
    ScopedPhase phase(times, "pm_exchange");
    std::vector<int> sent(ghost_planes);
    for (int& plane : sent) plane -= ghosts_from;
    exchange_planes(reinterpret_cast<const unsigned char*>(fixed), sent, ghost_counts,
                    reinterpret_cast<unsigned char*>(ghost_in.data()), owned_counts,
                    cells * sizeof(unsigned long long), stream);
    traffic.ghost_bytes += ghost_planes.size() * cells * sizeof(unsigned long long);
  }
  ScopedPhase phase(times, "pm_assign");
  for (int first = 0; first < slab.count; first += capacity) {
    const int last = std::min(slab.count, first + capacity);
    if (!one_pass) deposit(g, scale, first, last, fixed, stream);
    // In the order received: two planes from different ranks may be the same owned plane
    // (thin slabs), so the adds into one plane are queued one after the other on the stream.
    for (std::size_t k = 0; k < owned_planes.size(); ++k) {
      if (owned_planes[k] < first || owned_planes[k] >= last) continue;
      add_plane_kernel<<<grid_for(cells), kThreads, 0, stream>>>(fixed + (owned_planes[k] - first) * cells,
                                                                 ghost_in.data() + k * cells, cells);
      ORBIS_CUDA_CHECK(cudaGetLastError());
    }
    gpu::pm_fixed_to_mesh(fixed, n, first, last, mean, factor / scale, rho, stream);
  }
}

template void CudaPmRanks::Impl::density_into<float>(const gpu::PmMeshGeometry&, double, double, double, float*,
                                                     unsigned long long*, cudaStream_t, PhaseTimes&);
template void CudaPmRanks::Impl::density_into<double>(const gpu::PmMeshGeometry&, double, double, double, double*,
                                                      unsigned long long*, cudaStream_t, PhaseTimes&);

// Interleaved triples between ranks: `out` (device) holds what this rank sends, grouped by
// destination in rank order (out_counts), `in` (device) receives, grouped by source
// (in_counts); nothing to or from this rank itself (the stayers do not move). Down to pinned
// memory, Comm's alltoallv, up.
void CudaPmRanks::Impl::exchange_particles(const double* out, const std::vector<std::size_t>& out_counts, double* in,
                                           const std::vector<std::size_t>& in_counts, cudaStream_t stream) {
  constexpr std::size_t kBytes = 3 * sizeof(double);
  const int me = comm.rank();
  if (out_counts[me] != 0 || in_counts[me] != 0) fail("internal: PM over ranks: particles routed to their own rank");
  const std::size_t sent = Comm::total(out_counts), received = Comm::total(in_counts);
  send.ensure(std::max<std::size_t>(sent, 1) * kBytes);
  recv.ensure(std::max<std::size_t>(received, 1) * kBytes);
  auto* const host_out = reinterpret_cast<double*>(send.data());
  auto* const host_in = reinterpret_cast<double*>(recv.data());
  if (sent > 0) ORBIS_CUDA_CHECK(cudaMemcpyAsync(host_out, out, sent * kBytes, cudaMemcpyDeviceToHost, stream));
  sync(stream);
  comm.alltoallv_known(host_out, out_counts, host_in, in_counts, kBytes);
  if (received > 0) ORBIS_CUDA_CHECK(cudaMemcpyAsync(in, host_in, received * kBytes, cudaMemcpyHostToDevice, stream));
  sync(stream);   // the pinned buffers are reused at once
}

// The routed particles' accelerations (routed_acc) back to their senders, and there into the
// leavers' places in acc (x | y | z blocks of own_n; the stayers' are written already).
void CudaPmRanks::Impl::send_back(double* acc, cudaStream_t stream) {
  const std::size_t m = routed_count;
  if (m > 0) gpu::interleave(routed_acc.data(), m, routed.data(), stream);
  exchange_particles(routed.data(), recv_counts, packed.data(), send_counts, stream);
  if (leaving > 0) {
    unpack_kernel<<<grid_for(leaving), kThreads, 0, stream>>>(packed.data(), own_n, sorted_order, leaving, acc);
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  sync(stream);
}

// The exchange that moves device memory between the ranks directly (CUDA IPC), when there is
// one: the cuFFT slabs' (Use::forces, once their first call has chosen it) or the one lent to
// count_modes(). The same on every rank (the choice is collective).
gpu::DeviceAlltoallv* CudaPmRanks::Impl::peer_exchange() const {
  if (slabs) return slabs->peer_exchange();
  return borrowed_transposes;
}

// Planes between ranks: `count_out` planes of plane_bytes at `out_planes` (indices into
// `from`, whose planes are plane_bytes apart) to their ranks (out_counts, in rank order), the
// planes from the others landing one after the other at `in` (device, in_counts). Device to
// device through the peer exchange when there is one, else through the pinned buffers and MPI.
void CudaPmRanks::Impl::exchange_planes(const unsigned char* from, const std::vector<int>& out_planes,
                                        const std::vector<std::size_t>& out_counts, unsigned char* in,
                                        const std::vector<std::size_t>& in_counts, std::size_t plane_bytes,
                                        cudaStream_t stream) {
  const std::size_t count_in = Comm::total(in_counts);
  if (gpu::DeviceAlltoallv* peer = peer_exchange()) {
    auto* const out = static_cast<unsigned char*>(peer->send_buffer(std::max<std::size_t>(out_planes.size(), 1) *
                                                                    plane_bytes));
    for (std::size_t k = 0; k < out_planes.size(); ++k)
      ORBIS_CUDA_CHECK(cudaMemcpyAsync(out + k * plane_bytes, from + out_planes[k] * plane_bytes, plane_bytes,
                                       cudaMemcpyDeviceToDevice, stream));
    peer->exchange(out, out_counts, in, in_counts, plane_bytes, stream);
    return;
  }
  send.ensure(std::max<std::size_t>(out_planes.size(), 1) * plane_bytes);
  recv.ensure(std::max<std::size_t>(count_in, 1) * plane_bytes);
  for (std::size_t k = 0; k < out_planes.size(); ++k)
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(send.data() + k * plane_bytes, from + out_planes[k] * plane_bytes, plane_bytes,
                                     cudaMemcpyDeviceToHost, stream));
  sync(stream);
  comm.alltoallv_known(send.data(), out_counts, recv.data(), in_counts, plane_bytes);
  if (count_in > 0)
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(in, recv.data(), count_in * plane_bytes, cudaMemcpyHostToDevice, stream));
  sync(stream);   // recv is reused at once
}

// A force mesh's planes to the ranks that hold them as ghost planes (copied).
// The planes land in force_ghost_in (from the pool for the call) and are copied into place.
template <typename Real>
void CudaPmRanks::Impl::fetch_force_ghosts(Real* mesh, cudaStream_t stream) {
  const std::size_t plane = static_cast<std::size_t>(settings.grid_side) * 2 * (settings.grid_side / 2 + 1);
  const std::size_t plane_bytes = plane * sizeof(Real);
  force_ghost_in.ensure(std::max<std::size_t>(ghost_planes.size(), 1) * plane_bytes);
  exchange_planes(reinterpret_cast<const unsigned char*>(mesh), owned_planes, owned_counts, force_ghost_in.data(),
                  ghost_counts, plane_bytes, stream);
  for (std::size_t k = 0; k < ghost_planes.size(); ++k)
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(mesh + ghost_planes[k] * plane, force_ghost_in.data() + k * plane_bytes,
                                     plane_bytes, cudaMemcpyDeviceToDevice, stream));
  traffic.ghost_bytes += owned_planes.size() * plane_bytes;
}

template <typename Real>
void CudaPmRanks::Impl::run(std::size_t total, double mass, double* acc, cudaStream_t stream, PhaseTimes& times,
                            double* energy_rows) {
  const PmSettings& s = settings;
  const int n = s.grid_side;
  const std::size_t m = routed_count;
  // One x slab: the density, then each force component in turn (CudaPmSlabs).
  Real* const slab_mesh = reinterpret_cast<Real*>(meshes.data());
  const double* const rx = routed_pos.data();
  const double* const ry = rx + m;
  const double* const rz = ry + m;
  const double* const own = own_pos;
  const double cell = s.box_mpc_h / n, density = mass / (cell * cell * cell);
  const double scale = fixed_point_scale(total);
  const double mean = pm_fixed_point_mean(total, scale, n);
  const int meshes_count = s.interlaced ? 2 : 1;
  for (int mesh = 0; mesh < meshes_count; ++mesh) {
    // One mesh at a time in the same slab: each adds its share of the force.
    const gpu::PmMeshGeometry g{n, s.window, s.box_mpc_h, long_range_mesh_shift(s.interlaced, mesh)};
    // The fixed-point sums, from the pool until they are the density; given back before
    // CudaPmSlabs takes its y slabs, which then reuse the memory.
    fixed_sums.ensure_exact(fixed_count());
    density_into(g, scale, mean, density, slab_mesh, fixed_sums.data(), stream, times);
    fixed_sums.release();
    sync(stream);   // CudaPmSlabs works on its own stream
    // Each component: its ghost planes (with it from CudaPmSlabs, else fetched from their
    // owners), then the interpolation. Two meshes:
    // g(x) = (g_A(x) + g_B(x)) / 2, mesh B's half added to mesh A's; the stayers' straight into
    // acc, the routed particles' into routed_acc (send_back()).
    const auto use_component = [&](int axis) {
      if (!slabs->ghost_planes_filled()) {
        ScopedPhase phase(times, "pm_exchange");
        fetch_force_ghosts(slab_mesh, stream);
      }
      ScopedPhase phase(times, "pm_interpolate");
      const double half = meshes_count == 2 ? 0.5 : 1.0;
      gpu::pm_interpolate(slab_mesh, own, own + own_n, own + 2 * own_n, own_n, g, half, mesh == 1, acc + axis * own_n,
                          stream, slab.first, keep_own());
      gpu::pm_interpolate(slab_mesh, rx, ry, rz, m, g, half, mesh == 1, routed_acc.data() + axis * m, stream,
                          slab.first);
      sync(stream);   // before the next component takes the slab
    };
    slabs->long_range_on_device(slab_mesh, use_component, times,
                                energy_rows ? energy_rows + mesh * static_cast<std::size_t>(n) * layout.y.count
                                            : nullptr);
  }
  // The transposes of CudaPmSlabs (x -> y once, y -> x twice: g_x and phi, each with the
  // receivers' ghost planes when they come with it), off this rank.
  std::size_t lines = 0;
  const int wanted = window_order(s.window);
  for (int r = 0; r < comm.size(); ++r) {
    if (r == comm.rank()) continue;
    lines += layout.x_lines[r] + 2 * layout.y_lines[r];
    if (slabs->ghost_planes_filled())
      lines += 2 * static_cast<std::size_t>(ghost_plane_count(n, slab_planes(n, comm.size(), r), wanted)) *
               static_cast<std::size_t>(layout.y.count);
  }
  traffic.transpose_bytes = meshes_count * lines * layout.nzc * 2 * sizeof(Real);
}

void CudaPmRanks::accelerations(const double* pos, std::size_t n, double particle_mass, double* acc,
                                CUstream_st* stream_in, PhaseTimes* times, double* mesh_energy) {
  Impl& m = *impl_;
  if (m.use != Use::forces)
    fail("internal: accelerations() of a PM over ranks built for the energy or the counts' modes alone");
  PhaseTimes local;
  PhaseTimes& t = times ? *times : local;
  const cudaStream_t stream = stream_in;
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  // A count the routing's 32-bit order cannot hold stops every rank (the others would wait).
  const std::size_t total = m.total_particles(n);
  if (mesh_energy) *mesh_energy = 0;   // no particles: no energy (potential_energy()'s answer)
  if (total == 0) return;
  m.sync(stream);   // the positions' producers
  m.traffic = PmRankTraffic{};
  {
    // Everything the call needs comes from the pool on the caller's stream and goes back at
    // its end: the x slab (its fixed-point sums per mesh, until they are the density), the
    // ghost planes, the routing and routed particles' buffers, and CudaPmSlabs' y slabs (on its
    // own stream, after the sums went back).
    gpu::AllocationStream on_stream(stream);
    m.meshes.ensure_exact(m.meshes_bytes());
    m.ghost_in.ensure_exact(m.ghost_in_count());
    {
      ScopedPhase phase(t, "pm_exchange");
      m.route(pos, n, stream);
    }
    m.routed_acc.ensure(3 * std::max<std::size_t>(m.routed_count, 1));
    const int meshes_count = settings_.interlaced ? 2 : 1;
    if (mesh_energy)
      m.row_sums.ensure_exact(
          std::max<std::size_t>(meshes_count * static_cast<std::size_t>(settings_.grid_side) * m.layout.y.count, 1));
    m.sync(stream);   // the allocations, before CudaPmSlabs' stream uses the meshes
    double* const rows = mesh_energy ? m.row_sums.data() : nullptr;
    if (settings_.double_mesh) m.run<double>(total, particle_mass, acc, stream, t, rows);
    else m.run<float>(total, particle_mass, acc, stream, t, rows);
    if (mesh_energy) {
      *mesh_energy = m.energy_of_rows(rows, meshes_count, stream);
      m.row_sums.release();
    }
    {
      ScopedPhase phase(t, "pm_exchange");
      m.send_back(acc, stream);
    }
    m.meshes.release();
    m.ghost_in.release();
    m.force_ghost_in.release();
    m.give_back_routing_buffers();
    m.routed_pos.release();
    m.routed_acc.release();
  }
  if (!m.logged) {   // the volume moved, once (collective: every rank's first call)
    m.logged = true;
    const PmRankTraffic sum = total_traffic();
    log::info("PM over {} ranks on the GPUs, per step (all ranks): {} of {} particles routed to another rank's slab "
              "({:.1f} MiB of positions out and accelerations back), {:.1f} MiB of ghost planes, {:.1f} MiB of "
              "transposes",
              m.comm.size(), sum.particles_away, sum.particles, mib(sum.particle_bytes), mib(sum.ghost_bytes),
              mib(sum.transpose_bytes));
  }
}

void CudaPmRanks::accelerations(const std::vector<Vec3d>& pos, double particle_mass, std::vector<Vec3d>& acc,
                                PhaseTimes* times, double* mesh_energy) {
  Impl& m = *impl_;
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  const std::size_t n = pos.size();
  m.host_io.ensure(std::max<std::size_t>(6 * n, 1));
  std::vector<double> soa(3 * n);
  for (std::size_t p = 0; p < n; ++p)
    for (int d = 0; d < 3; ++d) soa[d * n + p] = pos[p][d];
  if (n > 0) m.host_io.upload(soa.data(), 3 * n);
  accelerations(m.host_io.data(), n, particle_mass, m.host_io.data() + 3 * n, m.own_stream, times, mesh_energy);
  if (n > 0)
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(soa.data(), m.host_io.data() + 3 * n, 3 * n * sizeof(double),
                                     cudaMemcpyDeviceToHost, m.own_stream));
  m.sync(m.own_stream);
  acc.resize(n);
  for (std::size_t p = 0; p < n; ++p)
    for (int d = 0; d < 3; ++d) acc[p][d] = soa[d * n + p];
}

std::unique_ptr<CudaPmRanks> make_cuda_pm_ranks(const PmSettings& settings, const Comm& comm, int device,
                                                std::string* why, CudaPmRanks::Use use) {
  std::string reason;
  const bool usable = cuda_device_usable(device, &reason);
  const std::vector<int> all = comm.allgather(usable ? 1 : 0);
  for (int r = 0; r < comm.size(); ++r)
    if (!all[static_cast<std::size_t>(r)]) {
      if (why) *why = r == comm.rank() ? reason : fmt::format("rank {} has no usable GPU", r);
      return nullptr;
    }
  std::unique_ptr<CudaPmRanks> out;
  run_collectively(comm, [&] { out = std::make_unique<CudaPmRanks>(settings, comm, device, use); });
  return out;
}

}  // namespace orbis
