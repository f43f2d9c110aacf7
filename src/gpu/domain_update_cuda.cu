#include "gpu/domain_update_cuda.cuh"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

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

// group[i]: the position of node[i] in `nodes` (the groups' top nodes ascending: the
// lower_bound RankDomains::assign_groups takes on the host); count[g] (zeroed before): the
// particles of group g (integer atomics: exact in any order), one atomic per group a warp
// holds (the particles are mostly group by group after the first update). Whole warps run
// the loop together. A node not among them (none should be) is counted nowhere, which the
// caller's sum of the counts sees.
__global__ void group_kernel(const std::int32_t* node, std::size_t n, const std::int32_t* nodes, std::uint32_t n_groups,
                             std::uint32_t* group, unsigned long long* count) {
  constexpr unsigned kFullMask = 0xffffffffu;
  const unsigned lane = threadIdx.x & 31u;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t base = blockIdx.x * static_cast<std::size_t>(blockDim.x) + (threadIdx.x & ~31u); base < n;
       base += stride) {
    const std::size_t i = base + lane;
    long long g = -1;
    if (i < n) {
      const std::int32_t v = node[i];
      std::uint32_t lo = 0, hi = n_groups;
      while (lo < hi) {
        const std::uint32_t mid = (lo + hi) / 2;
        if (nodes[mid] < v) lo = mid + 1;
        else hi = mid;
      }
      group[i] = lo;
      if (lo < n_groups && nodes[lo] == v) g = lo;
    }
    const unsigned peers = __match_any_sync(kFullMask, g);
    if (g >= 0 && lane == static_cast<unsigned>(__ffs(peers) - 1))
      atomicAdd(&count[g], static_cast<unsigned long long>(__popc(peers)));
  }
}

// Particle i leaves (leave true) or stays (false): its group is outside (inside) this rank's
// run [begin, end) (NodeDomains::owner(group) != rank, as leaving_indices asks).
struct LeavesRun {
  const std::uint32_t* group;
  std::uint32_t begin, end;
  bool leave;
  __host__ __device__ bool operator()(std::uint32_t i) const {
    const std::uint32_t g = group[i];
    return (g < begin || g >= end) == leave;
  }
};

// The leavers' state and groups, the state interleaved as the host's vectors (pos, mom: 3
// doubles a leaver).
__global__ void gather_leavers_kernel(const double* pos, const double* mom, const std::uint64_t* id,
                                      const std::uint8_t* bin, const std::uint32_t* group, std::size_t n,
                                      const std::uint32_t* leaving, std::size_t m, double* out_pos, double* out_mom,
                                      std::uint64_t* out_id, std::uint8_t* out_bin, std::uint32_t* out_group) {
  ORBIS_FOR_EACH(k, m) {
    const std::size_t i = leaving[k];
    for (int d = 0; d < 3; ++d) {
      out_pos[3 * k + d] = pos[d * n + i];
      out_mom[3 * k + d] = mom[d * n + i];
    }
    out_id[k] = id[i];
    out_bin[k] = bin[i];
    out_group[k] = group[i];
  }
}

// own_group[j]: the group, less g_begin, of element j of the set after the migration (the
// stayer stay[j] for j < kept, else arrival j - kept).
__global__ void own_group_kernel(const std::uint32_t* group, const std::uint32_t* stay, std::size_t kept,
                                 const std::uint32_t* arrived, std::size_t count, std::uint32_t g_begin,
                                 std::int32_t* own_group) {
  ORBIS_FOR_EACH(j, count) {
    const std::uint32_t g = j < kept ? group[stay[j]] : arrived[j - kept];
    own_group[j] = static_cast<std::int32_t>(g - g_begin);
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

// Each particle's group (group: n entries) from its top node on the device, and the
// particles of each group here (downloaded: one entry a group).
std::vector<std::uint64_t> group_particles(const std::int32_t* node, std::size_t n,
                                           const std::vector<std::int32_t>& nodes, DeviceArray<std::uint32_t>& group,
                                           cudaStream_t stream) {
  const auto n_groups = static_cast<std::uint32_t>(nodes.size());
  DeviceArray<std::int32_t> nodes_d;
  DeviceArray<unsigned long long> count_d;
  upload_vector(nodes, nodes_d, stream);
  count_d.ensure_exact(n_groups);
  ORBIS_CUDA_CHECK(cudaMemsetAsync(count_d.data(), 0, n_groups * sizeof(unsigned long long), stream));
  group.ensure_exact(n);
  if (n > 0) {
    group_kernel<<<grid_for(n), kThreads, 0, stream>>>(node, n, nodes_d.data(), n_groups, group.data(),
                                                       count_d.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  std::vector<unsigned long long> down(n_groups);
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(down.data(), count_d.data(), n_groups * sizeof(unsigned long long),
                                   cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  nodes_d.release();
  count_d.release();
  std::vector<std::uint64_t> count(down.begin(), down.end());
  std::uint64_t total = 0;
  for (std::uint64_t c : count) total += c;
  if (total != n) fail("internal: rank domains: {} of {} particles in a top-tree group", total, n);
  return count;
}

// split[0, m): the particles whose group another rank owns, ascending (leaving_indices);
// split[m, n): the others, ascending. Returns m.
std::size_t split_leavers(const DeviceArray<std::uint32_t>& group, std::size_t n, std::uint32_t g_begin,
                          std::uint32_t g_end, DeviceArray<std::uint32_t>& split, cudaStream_t stream) {
  split.ensure_exact(n);
  if (n == 0) return 0;
  const thrust::counting_iterator<std::uint32_t> index(0);
  const auto items = static_cast<std::int64_t>(n);
  DeviceArray<std::int64_t> selected;
  selected.ensure_exact(2);
  std::size_t temp_bytes = 0;
  ORBIS_CUDA_CHECK(cub::DeviceSelect::If(nullptr, temp_bytes, index, split.data(), selected.data(), items,
                                         LeavesRun{group.data(), g_begin, g_end, true}, stream));
  DeviceArray<unsigned char> temp;
  temp.ensure_exact(std::max<std::size_t>(temp_bytes, 1));
  ORBIS_CUDA_CHECK(cub::DeviceSelect::If(temp.data(), temp_bytes, index, split.data(), selected.data(), items,
                                         LeavesRun{group.data(), g_begin, g_end, true}, stream));
  std::int64_t m = 0;
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(&m, selected.data(), sizeof m, cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  ORBIS_CUDA_CHECK(cub::DeviceSelect::If(temp.data(), temp_bytes, index, split.data() + m, selected.data() + 1, items,
                                         LeavesRun{group.data(), g_begin, g_end, false}, stream));
  std::int64_t kept = 0;
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(&kept, selected.data() + 1, sizeof kept, cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  temp.release();
  selected.release();
  if (m < 0 || m + kept != items) fail("internal: rank domains: {} leaving and {} staying of {} particles", m, kept, n);
  return static_cast<std::size_t>(m);
}

// The leavers (leaving: m indices ascending, on the device) with their groups, downloaded.
Migrants download_leavers(const DeviceParticleState& state, const DeviceArray<std::uint32_t>& group, std::size_t n,
                          const std::uint32_t* leaving, std::size_t m, cudaStream_t stream) {
  Migrants out;
  out.particles.resize(m);
  out.group.resize(m);
  if (m == 0) return out;
  DeviceArray<double> pos, mom;
  DeviceArray<std::uint64_t> id;
  DeviceArray<std::uint8_t> bin;
  DeviceArray<std::uint32_t> group_out;
  pos.ensure_exact(3 * m);
  mom.ensure_exact(3 * m);
  id.ensure_exact(m);
  bin.ensure_exact(m);
  group_out.ensure_exact(m);
  gather_leavers_kernel<<<grid_for(m), kThreads, 0, stream>>>(state.pos.data(), state.mom.data(), state.id.data(),
                                                                state.bin.data(), group.data(), n, leaving, m,
                                                                pos.data(), mom.data(), id.data(), bin.data(),
                                                                group_out.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  Particles& p = out.particles;
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(p.pos.data(), pos.data(), 3 * m * sizeof(double), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(p.mom.data(), mom.data(), 3 * m * sizeof(double), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(p.id.data(), id.data(), m * sizeof(std::uint64_t), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(p.time_bin.data(), bin.data(), m, cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(out.group.data(), group_out.data(), m * sizeof(std::uint32_t),
                                   cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  pos.release();
  mom.release();
  id.release();
  bin.release();
  group_out.release();
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

  // 1. The top tree, each particle's group and the groups' local counts on the device; the
  // runs on the host, from the counts.
  DeviceArray<std::uint32_t> group;
  {
    Stopwatch watch;
    const double comm_before = comm.stats().seconds;
    GlobalTopTree top;
    double top_seconds = 0, top_comm_seconds = 0;
    std::vector<std::uint64_t> local_count;
    {
      DeviceGlobalTopTree device_top;
      top = device_top.build(state.pos.data(), state.pos.data() + n, state.pos.data() + 2 * n, n, box,
                             domains.max_leaf(), domains.top_depth(), comm, stream, false);
      top_seconds = watch.seconds();
      top_comm_seconds = comm.stats().seconds - comm_before;
      watch.restart();
      local_count =
          group_particles(device_top.device_particle_node(), n, RankDomains::group_nodes(top), group, stream);
    }   // the top tree's device arrays go
    domains.assign_groups(top, local_count, work, top_seconds, top_comm_seconds, watch.seconds());
  }

  // 2. The migration: the leavers down and through MPI, the arrivals up; on the device the
  // stayers' indices (in their order), the arrivals' state and the groups of that set.
  Stopwatch watch;
  const NodeDomains& runs = domains.domains();
  const int me = comm.rank();
  const std::uint32_t g_begin = runs.begin(me);
  DeviceArray<std::uint32_t> split;   // the leavers' indices, then the stayers'
  const std::size_t m_out = split_leavers(group, n, g_begin, runs.end(me), split, stream), kept = n - m_out;
  const std::uint32_t* stay = split.data() + m_out;
  const Migrants arrived = exchange_migrants(download_leavers(state, group, n, split.data(), m_out, stream), runs, comm);
  const std::size_t m_in = arrived.particles.size(), count = kept + m_in;
  if (count > UINT32_MAX) fail("internal: {} particles on one rank (at most 2^32 - 1)", count);
  Arrivals arrivals;
  upload_arrivals(arrived.particles, arrivals, stream);
  // The own groups (less the first own group's number) of the particles in that order, for
  // the subtree order.
  DeviceArray<std::int32_t> own_group_d;
  own_group_d.ensure_exact(count);
  if (count > 0) {
    DeviceArray<std::uint32_t> arrived_group;
    upload_vector(arrived.group, arrived_group, stream);
    own_group_kernel<<<grid_for(count), kThreads, 0, stream>>>(group.data(), stay, kept, arrived_group.data(), count,
                                                               g_begin, own_group_d.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    arrived_group.release();
  }
  group.release();
  // The positions of that set, for the subtree order.
  fit_particles(scratch, 3, count, true);
  if (count > 0) {
    gather_kernel<<<grid_for(count), kThreads, 0, stream>>>(state.pos.data(), n, arrivals.pos.data(), m_in, stay,
                                                            kept, nullptr, count, 3, scratch.data());
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
    permute_into(state.pos, arrivals.pos.data(), n, m_in, stay, kept, order.data(), count, 3, scratch, stream);
    permute_into(state.mom, arrivals.mom.data(), n, m_in, stay, kept, order.data(), count, 3, scratch, stream);
    permute_into(state.id, arrivals.id.data(), n, m_in, stay, kept, order.data(), count, 1, scratch, stream);
    permute_into(state.bin, arrivals.bin.data(), n, m_in, stay, kept, order.data(), count, 1, scratch, stream);
  }
  order.release();
  split.release();
  arrivals.release();
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  domains.finish_update(std::move(offsets), count, m_out, migrate_seconds, watch.seconds());
  return count;
}

}  // namespace orbis::gpu
