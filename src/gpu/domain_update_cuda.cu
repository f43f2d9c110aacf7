#include "gpu/domain_update_cuda.cuh"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "domain/global_top_tree.hpp"
#include "domain/particle_exchange.hpp"
#include "gpu/cuda_check.cuh"
#include "gpu/global_top_tree_cuda.cuh"
#include "gpu/particle_kernels.cuh"
#include "gpu/subtree_order_cuda.cuh"

namespace orbis::gpu {
namespace {

constexpr unsigned kThreads = 256;
unsigned grid_for(std::size_t n) {
  const std::size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(blocks, 65535u * 8u)));
}
#define ORBIS_FOR_EACH(i, n) \
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)

// The leavers' state, interleaved as the host's vectors (pos, mom: 3 doubles a leaver).
__global__ void gather_leavers_kernel(const double* pos, const double* mom, const std::uint64_t* id,
                                      const std::uint8_t* bin, std::size_t n, const std::uint32_t* leaving,
                                      std::size_t m, double* out_pos, double* out_mom, std::uint64_t* out_id,
                                      std::uint8_t* out_bin) {
  ORBIS_FOR_EACH(k, m) {
    const std::size_t i = leaving[k];
    for (int d = 0; d < 3; ++d) {
      out_pos[3 * k + d] = pos[d * n + i];
      out_mom[3 * k + d] = mom[d * n + i];
    }
    out_id[k] = id[i];
    out_bin[k] = bin[i];
  }
}

// stay[j]: the index of the j-th staying particle, j < kept. below[k] = leaving[k] - k (the
// leavers ascending, so non-decreasing): the stayers before the k-th leaver number below[k],
// so the j-th is j plus the number of leavers with below[k] <= j.
__global__ void stay_kernel(const std::uint32_t* below, std::size_t m, std::size_t kept, std::uint32_t* stay) {
  ORBIS_FOR_EACH(j, kept) {
    std::size_t lo = 0, hi = m;
    while (lo < hi) {
      const std::size_t mid = (lo + hi) / 2;
      if (below[mid] <= j) lo = mid + 1;
      else hi = mid;
    }
    stay[j] = static_cast<std::uint32_t>(j + lo);
  }
}

// The rank's particles after the migration are the stayers in their order, then the arrivals:
// element j of that set is old[stay[j]] for j < kept, else arrived[j - kept]. out[k] is element
// order[k] of it (order null: element k), for `blocks` blocks of `count` (x | y | z: 3).
template <typename T>
__global__ void gather_kernel(const T* old, std::size_t n_old, const T* arrived, std::size_t n_arrived,
                              const std::uint32_t* stay, std::size_t kept, const std::uint32_t* order,
                              std::size_t count, int blocks, T* out) {
  ORBIS_FOR_EACH(k, count) {
    const std::size_t j = order ? order[k] : k;
    for (int d = 0; d < blocks; ++d)
      out[d * count + k] = j < kept ? old[d * n_old + stay[j]] : arrived[d * n_arrived + (j - kept)];
  }
}

// Host vector -> device array (grown to hold it), queued on `stream`; the caller waits before
// the vector goes.
template <typename T>
void upload_vector(const std::vector<T>& from, DeviceArray<T>& to, cudaStream_t stream) {
  to.ensure_exact(from.size());
  if (!from.empty())
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(to.data(), from.data(), from.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
}

// The leavers (indices ascending) with their groups, downloaded.
Migrants download_leavers(const DeviceParticleState& state, std::size_t n, const std::vector<std::uint32_t>& leaving,
                          const DeviceArray<std::uint32_t>& leaving_d, const std::vector<std::uint32_t>& group,
                          cudaStream_t stream) {
  const std::size_t m = leaving.size();
  Migrants out;
  out.particles.resize(m);
  out.group.resize(m);
  for (std::size_t k = 0; k < m; ++k) out.group[k] = group[leaving[k]];
  if (m == 0) return out;
  DeviceArray<double> pos, mom;
  DeviceArray<std::uint64_t> id;
  DeviceArray<std::uint8_t> bin;
  pos.ensure_exact(3 * m);
  mom.ensure_exact(3 * m);
  id.ensure_exact(m);
  bin.ensure_exact(m);
  gather_leavers_kernel<<<grid_for(m), kThreads, 0, stream>>>(state.pos.data(), state.mom.data(), state.id.data(),
                                                                state.bin.data(), n, leaving_d.data(), m, pos.data(),
                                                                mom.data(), id.data(), bin.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  Particles& p = out.particles;
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(p.pos.data(), pos.data(), 3 * m * sizeof(double), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(p.mom.data(), mom.data(), 3 * m * sizeof(double), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(p.id.data(), id.data(), m * sizeof(std::uint64_t), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(p.time_bin.data(), bin.data(), m, cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  pos.release();
  mom.release();
  id.release();
  bin.release();
  return out;
}

// The arrivals on the device: positions and momenta x | y | z of m, ids, bins.
struct Arrivals {
  DeviceArray<double> pos, mom;
  DeviceArray<std::uint64_t> id;
  DeviceArray<std::uint8_t> bin;
  void release() {
    pos.release();
    mom.release();
    id.release();
    bin.release();
  }
};
void upload_arrivals(const Particles& p, Arrivals& to, cudaStream_t stream) {
  const std::size_t m = p.size();
  if (m == 0) return;
  to.pos.ensure_exact(3 * m);
  to.mom.ensure_exact(3 * m);
  DeviceArray<double> interleaved;
  interleaved.ensure_exact(3 * m);
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(interleaved.data(), p.pos.data(), 3 * m * sizeof(double), cudaMemcpyHostToDevice,
                                   stream));
  deinterleave(interleaved.data(), m, to.pos.data(), stream);
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(interleaved.data(), p.mom.data(), 3 * m * sizeof(double), cudaMemcpyHostToDevice,
                                   stream));
  deinterleave(interleaved.data(), m, to.mom.data(), stream);
  upload_vector(p.id, to.id, stream);
  upload_vector(p.time_bin, to.bin, stream);
  interleaved.release();
}

// One state array in the new order: gathered into scratch (the old array is read), the array
// grown if it must be, the result copied in.
template <typename T>
void permute_into(DeviceArray<T>& array, const T* arrived, std::size_t n_old, std::size_t n_arrived,
                  const std::uint32_t* stay, std::size_t kept, const std::uint32_t* order, std::size_t count,
                  int blocks, DeviceArray<double>& scratch, cudaStream_t stream) {
  T* out = reinterpret_cast<T*>(scratch.data());   // 3 doubles a particle: room for any state array
  gather_kernel<<<grid_for(count), kThreads, 0, stream>>>(array.data(), n_old, arrived, n_arrived, stay, kept, order,
                                                          count, blocks, out);
  ORBIS_CUDA_CHECK(cudaGetLastError());
  fit_particles(array, static_cast<std::size_t>(blocks), count, true);
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(array.data(), out, static_cast<std::size_t>(blocks) * count * sizeof(T),
                                   cudaMemcpyDeviceToDevice, stream));
}

}  // namespace

std::size_t update_domains_cuda(RankDomains& domains, double work, const DeviceParticleState& state, std::size_t n,
                                double box, DeviceArray<double>& scratch, cudaStream_t stream) {
  const Comm& comm = domains.comm();
  if (n > UINT32_MAX) fail("internal: {} particles on one rank (at most 2^32 - 1)", n);
  AllocationStream on_stream(stream);
  // Wrapped as the host engine's positions are at its update (the same function, the same bits).
  if (n > 0) wrap_positions(state.pos.data(), n, box, stream);

  // 1. The top tree on the device; the groups and the runs on the host.
  std::vector<std::uint32_t> group;
  {
    Stopwatch watch;
    const double comm_before = comm.stats().seconds;
    DeviceGlobalTopTree device_top;
    const GlobalTopTree top = device_top.build(state.pos.data(), state.pos.data() + n, state.pos.data() + 2 * n, n,
                                               box, domains.max_leaf(), domains.top_depth(), comm, stream);
    if (top.particle_node().size() != n)
      fail("internal: rank domains: a top tree of {} particles for {}", top.particle_node().size(), n);
    group = domains.assign_groups(top, work, watch.seconds(), comm.stats().seconds - comm_before);
  }

  // 2. The migration: the leavers down and through MPI, the arrivals up; on the device the
  // stayers' indices (in their order) and the arrivals' state.
  Stopwatch watch;
  const NodeDomains& runs = domains.domains();
  const int me = comm.rank();
  const std::vector<std::uint32_t> leaving = leaving_indices(group, runs, me);
  const std::size_t m_out = leaving.size(), kept = n - m_out;
  DeviceArray<std::uint32_t> leaving_d;
  upload_vector(leaving, leaving_d, stream);
  const Migrants arrived = exchange_migrants(download_leavers(state, n, leaving, leaving_d, group, stream), runs, comm);
  const std::size_t m_in = arrived.particles.size(), count = kept + m_in;
  if (count > UINT32_MAX) fail("internal: {} particles on one rank (at most 2^32 - 1)", count);
  std::vector<std::uint32_t> below(m_out);
  for (std::size_t k = 0; k < m_out; ++k) below[k] = leaving[k] - static_cast<std::uint32_t>(k);
  upload_vector(below, leaving_d, stream);   // the indices are no longer needed
  DeviceArray<std::uint32_t> stay;
  stay.ensure_exact(kept);
  if (kept > 0) {
    stay_kernel<<<grid_for(kept), kThreads, 0, stream>>>(leaving_d.data(), m_out, kept, stay.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  Arrivals arrivals;
  upload_arrivals(arrived.particles, arrivals, stream);
  // The own groups (less the first own group's number) of the particles in that order, for
  // the subtree order: a stayer's place is its index less the leavers before it.
  const std::uint32_t g_begin = runs.begin(me);
  std::vector<std::int32_t> own_group(count);
  const std::ptrdiff_t n_signed = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t s = 0; s < n_signed; ++s) {
    const auto i = static_cast<std::uint32_t>(s);
    const auto before = static_cast<std::size_t>(std::lower_bound(leaving.begin(), leaving.end(), i) - leaving.begin());
    if (before < m_out && leaving[before] == i) continue;
    own_group[i - before] = static_cast<std::int32_t>(group[i] - g_begin);
  }
  for (std::size_t j = 0; j < m_in; ++j) own_group[kept + j] = static_cast<std::int32_t>(arrived.group[j] - g_begin);
  DeviceArray<std::int32_t> own_group_d;
  upload_vector(own_group, own_group_d, stream);
  // The positions of that set, for the subtree order.
  fit_particles(scratch, 3, count, true);
  if (count > 0) {
    gather_kernel<<<grid_for(count), kThreads, 0, stream>>>(state.pos.data(), n, arrivals.pos.data(), m_in,
                                                            stay.data(), kept, nullptr, count, 3, scratch.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));   // the host vectors uploaded go
  const double migrate_seconds = watch.seconds();
  watch.restart();

  // 3. The subtree order of that set, and the state permuted by it.
  DeviceArray<std::uint32_t> order;
  order.ensure_exact(count);
  std::vector<std::uint32_t> offsets;
  subtree_order_by_group_cuda(scratch.data(), scratch.data() + count, scratch.data() + 2 * count, own_group_d.data(),
                              count, static_cast<std::int32_t>(runs.end(me) - g_begin), domains.max_leaf(),
                              order.data(), offsets, stream);
  own_group_d.release();
  if (count > 0) {
    permute_into(state.pos, arrivals.pos.data(), n, m_in, stay.data(), kept, order.data(), count, 3, scratch, stream);
    permute_into(state.mom, arrivals.mom.data(), n, m_in, stay.data(), kept, order.data(), count, 3, scratch, stream);
    permute_into(state.id, arrivals.id.data(), n, m_in, stay.data(), kept, order.data(), count, 1, scratch, stream);
    permute_into(state.bin, arrivals.bin.data(), n, m_in, stay.data(), kept, order.data(), count, 1, scratch, stream);
  }
  order.release();
  stay.release();
  leaving_d.release();
  arrivals.release();
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  domains.finish_update(std::move(offsets), count, m_out, migrate_seconds, watch.seconds());
  return count;
}

}  // namespace orbis::gpu
