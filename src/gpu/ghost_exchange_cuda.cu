#include "gpu/ghost_exchange_cuda.cuh"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "gpu/cuda_check.cuh"

namespace orbis::gpu {
namespace {

constexpr unsigned kThreads = 256;
unsigned grid_for(std::size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// One block per group: each thread's min/max over a stride of the members, then the block's.
// Min and max are exact, so any order gives the host loop's values (the sign of a zero aside,
// which no comparison of the boxes sees).
__global__ void own_group_boxes_kernel(const double* pos, std::size_t n, const std::uint32_t* offsets, double* boxes) {
  __shared__ double lo[3][kThreads], hi[3][kThreads];
  const std::uint32_t first = offsets[blockIdx.x], end = offsets[blockIdx.x + 1];
  const unsigned t = threadIdx.x;
  for (int d = 0; d < 3; ++d) {
    double a = HUGE_VAL, b = -HUGE_VAL;
    for (std::uint32_t i = first + t; i < end; i += kThreads) {
      const double x = pos[d * n + i];
      a = x < a ? x : a;
      b = x > b ? x : b;
    }
    lo[d][t] = a;
    hi[d][t] = b;
  }
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
    if (t < half)
      for (int d = 0; d < 3; ++d) {
        lo[d][t] = lo[d][t + half] < lo[d][t] ? lo[d][t + half] : lo[d][t];
        hi[d][t] = hi[d][t + half] > hi[d][t] ? hi[d][t + half] : hi[d][t];
      }
    __syncthreads();
  }
  if (t < 3) {
    boxes[6 * static_cast<std::size_t>(blockIdx.x) + t] = lo[t][0];
    boxes[6 * static_cast<std::size_t>(blockIdx.x) + 3 + t] = hi[t][0];
  }
}

// packed[k] = the position of own particle sent[k] (x y z).
__global__ void pack_sent_kernel(const double* pos, std::size_t n, const std::uint32_t* sent, std::size_t count,
                                 double* packed) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (k >= count) return;
  const std::size_t i = sent[k];
  for (int d = 0; d < 3; ++d) packed[3 * k + d] = pos[d * n + i];
}

// The received ghosts (x y z each) into the sources' x | y | z blocks of `stride`, from `at` on.
__global__ void unpack_ghosts_kernel(const double* packed, std::size_t count, double* sources, std::size_t stride,
                                     std::size_t at) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (k >= count) return;
  for (int d = 0; d < 3; ++d) sources[d * stride + at + k] = packed[3 * k + d];
}

}  // namespace

void own_group_boxes(const double* pos, std::size_t n, const std::uint32_t* offsets, std::size_t groups,
                     double* boxes, cudaStream_t stream) {
  if (groups == 0) return;
  own_group_boxes_kernel<<<static_cast<unsigned>(groups), kThreads, 0, stream>>>(pos, n, offsets, boxes);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

DeviceGhosts::DeviceGhosts(const Comm& comm, std::unique_ptr<GhostTransport> transport)
    : comm_(comm), transport_(std::move(transport)) {
  const char* env = std::getenv("ORBIS_TIME_GHOSTS");
  timed_ = env && std::string(env) == "1";
  if (transport_ && transport_->alltoallv()) transport_->alltoallv()->set_timed(timed_);
}

GhostTimes DeviceGhosts::times() const {
  GhostTimes out = times_;
  if (transport_ && transport_->alltoallv()) out.transport = transport_->alltoallv()->times();
  return out;
}

void DeviceGhosts::reset_times() {
  times_ = GhostTimes{};
  if (transport_ && transport_->alltoallv()) transport_->alltoallv()->reset_times();
}

std::size_t DeviceGhosts::refresh(RankDomains& domains, const double* pos, std::size_t n, double r_cut,
                                  DeviceArray<double>& sources, const std::function<double*(std::size_t)>& scratch,
                                  bool* same_set, cudaStream_t stream) {
  traffic_ = GhostTraffic{};
  ++times_.refreshes;
  if (!transport_) {   // collective: every rank refreshes
    transport_ = std::make_unique<AlltoallvGhostTransport>(
        make_device_alltoallv(comm_, rank_exchange(), "ghost refresh"));
    transport_->alltoallv()->set_timed(timed_);
  }
  Stopwatch watch;
  if (timed_) {
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    times_.queued += watch.seconds();
    watch.restart();
  }
  const std::vector<std::uint32_t>& offsets = domains.own_offsets();
  if (offsets.empty() || offsets.back() != n)
    fail("internal: device ghosts for {} particles, the last domain update left {}", n,
         offsets.empty() ? 0u : offsets.back());
  // The own groups' boxes: on the device, only they come down.
  const std::size_t groups = offsets.size() - 1;
  if (offsets != offsets_host_) {   // a domain update: the groups are others
    offsets_.ensure(offsets.size());
    offsets_.upload(offsets.data(), offsets.size());
    offsets_host_ = offsets;
  }
  lo_.resize(groups);
  hi_.resize(groups);
  if (groups > 0) {
    boxes_.ensure(6 * groups);
    host_boxes_.ensure(6 * groups);
    own_group_boxes(pos, n, offsets_.data(), groups, boxes_.data(), stream);
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(host_boxes_.data(), boxes_.data(), 6 * groups * sizeof(double),
                                     cudaMemcpyDeviceToHost, stream));
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    const double* b = host_boxes_.data();
    for (std::size_t g = 0; g < groups; ++g) {
      lo_[g] = Vec3d{b[6 * g], b[6 * g + 1], b[6 * g + 2]};
      hi_[g] = Vec3d{b[6 * g + 3], b[6 * g + 4], b[6 * g + 5]};
    }
    traffic_.boxes_down = 6 * groups * sizeof(double);
  }
  times_.boxes += watch.seconds();
  watch.restart();

  // The decision (collective) and, at a new choice, its send list up.
  const double comm_before = comm_.stats().seconds;
  const RankDomains::GhostPlan plan = domains.plan_ghosts(lo_, hi_, r_cut);
  times_.plan_comm += comm_.stats().seconds - comm_before;
  times_.plan += watch.seconds();
  const DomainReport& report = domains.report();
  times_.plan_tests += report.times.ghost_tests;
  times_.plan_routes += report.times.ghost_routes;
  if (report.rechosen) ++times_.rechoices;
  watch.restart();
  const GhostRoutes& routes = *plan.routes;
  const std::size_t n_sent = routes.sent.size();
  if (!plan.kept || !sent_current_) {
    if (n_sent > 0) {
      sent_.ensure(n_sent);
      sent_.upload(routes.sent.data(), n_sent);
    }
    sent_current_ = true;
    traffic_.routes_up = n_sent * sizeof(std::uint32_t);
  }
  times_.routes += watch.seconds();

  // The own particles first, copied on the device; then the ghosts, packed (into the
  // transport's own buffer when it has one: CUDA IPC's exported buffer), exchanged and
  // written after them.
  const std::size_t n_sources = domains.group_offsets().back();
  const std::size_t n_recv = n_sources - n;
  if (Comm::total(routes.recv_counts) != n_recv)
    fail("internal: {} ghosts expected, their groups hold {}", Comm::total(routes.recv_counts), n_recv);
  // 1/16 more when it grows, as the state's arrays (gpu::fit_particles).
  if (n_sources > sources.capacity() / 3) sources.ensure_exact(3 * (n_sources + n_sources / 16));
  double* packed = transport_->send_buffer(3 * n_sent);   // collective
  double* received = nullptr;
  if (packed) {
    received = scratch(3 * n_recv);
  } else {
    packed = scratch(3 * (n_sent + n_recv));
    received = packed + 3 * n_sent;
  }
  watch.restart();
  if (n > 0)
    for (int d = 0; d < 3; ++d)
      ORBIS_CUDA_CHECK(cudaMemcpyAsync(sources.data() + d * n_sources, pos + d * n, n * sizeof(double),
                                       cudaMemcpyDeviceToDevice, stream));
  if (n_sent > 0) {
    pack_sent_kernel<<<grid_for(n_sent), kThreads, 0, stream>>>(pos, n, sent_.data(), n_sent, packed);
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  if (timed_) {
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    times_.pack += watch.seconds();
  }
  transport_->exchange(packed, routes.counts, received, routes.recv_counts, stream);
  watch.restart();
  if (n_recv > 0) {
    unpack_ghosts_kernel<<<grid_for(n_recv), kThreads, 0, stream>>>(received, n_recv, sources.data(), n_sources, n);
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));   // the staging buffers are reused at once
  times_.unpack += watch.seconds();
  const bool staged = !transport_->peer_to_peer();
  traffic_.positions_down = staged ? n_sent * 3 * sizeof(double) : 0;
  traffic_.positions_up = staged ? n_recv * 3 * sizeof(double) : 0;
  if (same_set) *same_set = plan.kept;
  return n_sources;
}

}  // namespace orbis::gpu
