// The CUDA P2P evaluator: host preparation, uploads, device grouping, the kernel and the
// download, all queued on one stream so that start() returns while the GPU works.
//
// Tasks travel packed (8 bytes: target, source | image) from pinned memory, in slices: the
// host packs slice i + 1 (OpenMP) while slice i is copied, and the walk's buffers are read
// in place (P2PInput::task_spans), so the step never concatenates its task list. Device
// memory is planned before any allocation: particles, leaves and accelerations must fit
// (else a clear error); the tasks are processed in chunks of whole target leaves when they
// do not fit all at once, each chunk sorted and evaluated apart, which writes each target
// once and gives bitwise the same sums as one chunk.
#include "gpu/p2p_cuda.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "fmm/p2p_cuda_factory.hpp"
#include "fmm/p2p_prepare.hpp"
#include "fmm/truncation.hpp"
#include "gpu/cuda_check.cuh"
#include "gpu/pair_energy_cuda.cuh"
#include "gpu/device_buffer.cuh"
#include "gpu/device_memory_plan.hpp"
#include "gpu/orb_tree_cuda.cuh"
#include "gpu/p2p_cuda_grouping.cuh"
#include "gpu/p2p_cuda_launch.cuh"
#include "gpu/p2p_cuda_kernel.cuh"
#include "gpu/walk_cuda.cuh"

namespace orbis {

using gpu::DeviceArray;
using gpu::PinnedArray;
static_assert(CudaP2PEvaluator::kMaxLeafCount <= static_cast<unsigned>(gpu::kTileCap),
              "a source leaf must fit in one tile");

namespace {

template <typename R, bool Coef>
const void* kernel_for(int order) {
  switch (order) {
    case kNoTruncation: return reinterpret_cast<const void*>(&gpu::p2p_groups_kernel<kNoTruncation, R, Coef>);
    case kExactTruncation: return reinterpret_cast<const void*>(&gpu::p2p_groups_kernel<kExactTruncation, R, Coef>);
    case 0: return reinterpret_cast<const void*>(&gpu::p2p_groups_kernel<0, R, Coef>);
    case 1: return reinterpret_cast<const void*>(&gpu::p2p_groups_kernel<1, R, Coef>);
    case 2: return reinterpret_cast<const void*>(&gpu::p2p_groups_kernel<2, R, Coef>);
    case 3: return reinterpret_cast<const void*>(&gpu::p2p_groups_kernel<3, R, Coef>);
    case 4: return reinterpret_cast<const void*>(&gpu::p2p_groups_kernel<4, R, Coef>);
    default: fail("P2P: taylor_order = {} is not in -1..4", order);
  }
}
template <typename R>
const void* kernel_for(int order, bool coef) {
  // The exact path and the Newtonian kernel read no table: one instantiation serves both forms.
  if (order < 0) return kernel_for<R, false>(order);
  return coef ? kernel_for<R, true>(order) : kernel_for<R, false>(order);
}

double gib(std::size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

// Caller-order positions, as the host holds them (x y z per particle), into x | y | z.
__global__ void deinterleave_kernel(const double* xyz, std::size_t n, double* out) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] = xyz[3 * i];
    out[n + i] = xyz[3 * i + 1];
    out[2 * n + i] = xyz[3 * i + 2];
  }
}

unsigned grid_for(std::size_t items, unsigned block) {
  return static_cast<unsigned>(std::min<std::size_t>((items + block - 1) / block + 1, 65535u * 16u));
}

}  // namespace

struct CudaP2PEvaluator::Impl {
  int device = 0;
  std::string name;
  int sm_count = 0;
  std::size_t smem_optin = 0;
  cudaStream_t stream = nullptr;
  std::vector<cudaEvent_t> events;   // 4 per chunk + 2, created on demand

  gpu::DeviceGrouping grouping;
  gpu::GroupSchedule schedule;   // the groups in the kernel's order
  DeviceArray<float> pos_f;          // x | y | z, n each
  DeviceArray<double> pos_d;
  DeviceArray<gpu::DeviceLeaf> leaves;
  DeviceArray<double> acc;           // 3n
  DeviceArray<float2> table_f;       // {T_i, E_i}
  DeviceArray<double2> table_d;
  DeviceArray<float4> coef_f;        // {c0..c3}
  DeviceArray<double4_32a> coef_d;
  DeviceArray<float> coef4_f;        // c4
  DeviceArray<double> coef4_d;
  int table_f_size = 0, table_d_size = 0;
  bool coef_form = true;
  DeviceArray<std::uint32_t> next_group;
  DeviceArray<unsigned long long> counters;
  PinnedArray<unsigned char> host_pos;
  PinnedArray<double> host_acc;
  PinnedArray<std::uint32_t> host_targets, host_sources;   // all tasks, packed
  std::size_t max_chunk_tasks = 0;   // test hook: 0 = as device memory allows

  bool pending = false;
  bool device_tree_step = false;   // the pending evaluation came from start_tree_step
  bool count = false;
  std::size_t n_particles = 0;
  double interactions = 0;
  bool double_precision = false;
  Stopwatch wall;
  CudaP2PTimings timings;
  CudaP2POccupancy occupancy;
  std::size_t n_chunks = 1;

  // The device tree step (start_tree_step): positions in, tree, walk; a second stream
  // brings the tree and the M2L lists to the host while the P2P runs on `stream`.
  gpu::DeviceOrbTree tree;
  gpu::DeviceWalk walk;
  DeviceArray<double> pos_in;                 // x | y | z, caller order
  DeviceArray<WalkNode> walk_nodes;
  PinnedArray<Vec3d> host_pos_in;
  cudaStream_t copy_stream = nullptr;
  std::vector<InteractionTask> fallback_tasks;   // the walk's tasks when they take the host path
  std::vector<TaskSpan> fallback_spans;

  // What the kernel of one evaluation needs, fixed before any task is queued.
  template <typename R>
  struct KernelPlan {
    const void* kernel = nullptr;
    std::size_t table_bytes = 0;
    int per_sm = 0;
    P2PPairConstants<R> k;
  };
  template <typename R> KernelPlan<R> plan_kernel(const P2PSettings& s);
  template <typename R>
  void launch_groups(const KernelPlan<R>& plan, const P2PSettings& s, std::size_t n, const gpu::DeviceLeaf* dleaves,
                     std::size_t nl, std::size_t entries, std::size_t tasks, std::size_t targets_here,
                     cudaEvent_t grouped);
  template <typename R> void queue(const P2PSettings& s, const P2PInput& in);
  template <typename R> void queue_tree_step(const P2PSettings& s, const DeviceTreeStep& step, DeviceTreeResult& out);
  template <typename R> void ensure_table(int size);
  cudaEvent_t event(std::size_t i) {
    while (events.size() <= i) {
      cudaEvent_t e;
      ORBIS_CUDA_CHECK(cudaEventCreate(&e));
      events.push_back(e);
    }
    return events[i];
  }
};

template <typename R>
void CudaP2PEvaluator::Impl::ensure_table(int size) {
  using R2 = typename gpu::Vec2Of<R>::type;
  using R4 = typename gpu::Vec4Of<R>::type;
  int& current = std::is_same_v<R, float> ? table_f_size : table_d_size;
  if (current == size) return;
  const TruncationTable<R> table(size);   // built in double, rounded to R once
  std::vector<R2> te(size);
  std::vector<R4> c(size);
  for (int i = 0; i < size; ++i) {
    te[i] = R2{table.t()[i], table.e()[i]};
    c[i] = R4{table.coef(0)[i], table.coef(1)[i], table.coef(2)[i], table.coef(3)[i]};
  }
  R2* dte;
  R4* dc;
  R* dc4;
  if constexpr (std::is_same_v<R, float>) {
    table_f.ensure(size); coef_f.ensure(size); coef4_f.ensure(size);
    dte = table_f.data(); dc = coef_f.data(); dc4 = coef4_f.data();
  } else {
    table_d.ensure(size); coef_d.ensure(size); coef4_d.ensure(size);
    dte = table_d.data(); dc = coef_d.data(); dc4 = coef4_d.data();
  }
  ORBIS_CUDA_CHECK(cudaMemcpy(dte, te.data(), size * sizeof(R2), cudaMemcpyHostToDevice));
  ORBIS_CUDA_CHECK(cudaMemcpy(dc, c.data(), size * sizeof(R4), cudaMemcpyHostToDevice));
  ORBIS_CUDA_CHECK(cudaMemcpy(dc4, table.coef(4).data(), size * sizeof(R), cudaMemcpyHostToDevice));
  current = size;
}

namespace {

// Tasks per host slice of the single-chunk upload: packed on the host while the previous
// slice is in flight (32 MB of packed tasks per slice).
constexpr std::size_t kSliceTasks = std::size_t{1} << 22;
// Device memory kept free for the CUDA context, CUB's temporaries and fragmentation.
constexpr std::size_t kMargin = std::size_t{256} << 20;

// Greedy chunks of consecutive target leaves holding at most `cap` tasks each.
std::vector<std::uint32_t> chunk_bounds(const std::vector<std::uint64_t>& per_target, std::size_t cap) {
  std::vector<std::uint32_t> bounds{0};
  std::uint64_t in_chunk = 0;
  for (std::size_t l = 0; l < per_target.size(); ++l) {
    if (per_target[l] > cap)
      fail("P2P: target leaf {} alone has {} tasks, more than the {} the GPU's free memory holds at "
           "once: lower [gravity] max_leaf or free device memory",
           l, per_target[l], cap);
    if (in_chunk + per_target[l] > cap) {
      bounds.push_back(static_cast<std::uint32_t>(l));
      in_chunk = 0;
    }
    in_chunk += per_target[l];
  }
  bounds.push_back(static_cast<std::uint32_t>(per_target.size()));
  return bounds;
}

}  // namespace

template <typename R>
CudaP2PEvaluator::Impl::KernelPlan<R> CudaP2PEvaluator::Impl::plan_kernel(const P2PSettings& s) {
  KernelPlan<R> plan;
  // Shared memory for the table; beyond the default 48 KB it must be opted into.
  const int order = p2p_order_of(s);   // the Taylor order, or -1 / -2 (no table)
  const bool coef = coef_form && order >= 0;
  plan.table_bytes = order >= 0 ? gpu::table_smem_bytes<R>(s.table_size, coef, order) : 0;
  plan.kernel = kernel_for<R>(order, coef);
  cudaFuncAttributes attr{};
  ORBIS_CUDA_CHECK(cudaFuncGetAttributes(&attr, plan.kernel));
  if (attr.sharedSizeBytes + plan.table_bytes > smem_optin)
    fail("P2P: a T(x) table of {} nodes ({} KB) does not fit in the GPU's shared memory next to "
         "the kernel's {} KB (at most {} KB); lower [gravity] taylor_table_size",
         s.table_size, plan.table_bytes / 1024, attr.sharedSizeBytes / 1024, smem_optin / 1024);
  if (plan.table_bytes > 48 * 1024)
    ORBIS_CUDA_CHECK(cudaFuncSetAttribute(plan.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(plan.table_bytes)));
  ORBIS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&plan.per_sm, plan.kernel, gpu::kBlock,
                                                                 plan.table_bytes));
  if (plan.per_sm < 1) fail("P2P: the kernel cannot run on {} (no resident block fits)", name);
  plan.k = pair_constants_of<R>(s);
  ensure_table<R>(s.table_size);
  return plan;
}

// Queues on `stream` the grouping of `entries` task entries already in the grouping's
// upload arrays (`tasks` once expanded), the event `grouped`, and the kernel over the
// target groups.
template <typename R>
void CudaP2PEvaluator::Impl::launch_groups(const KernelPlan<R>& plan, const P2PSettings& s, std::size_t n,
                                           const gpu::DeviceLeaf* dleaves, std::size_t nl, std::size_t entries,
                                           std::size_t tasks, std::size_t targets_here, cudaEvent_t grouped) {
  ORBIS_CUDA_CHECK(cudaMemsetAsync(next_group.data(), 0, sizeof(std::uint32_t), stream));
  grouping.run(stream, entries, tasks, nl);
  ORBIS_CUDA_CHECK(cudaEventRecord(grouped, stream));
  if (tasks == 0) return;
  DeviceArray<R>& dpos = *[&] {
    if constexpr (std::is_same_v<R, float>) return &pos_f; else return &pos_d;
  }();
  gpu::P2PKernelArgs<R> a;
  a.groups = schedule.run(grouping.groups(), grouping.n_groups(), std::min(nl, tasks), stream);
  a.n_groups = grouping.n_groups();
  a.sources = grouping.sorted_sources();
  a.leaves = dleaves;
  a.x = dpos.data();
  a.y = dpos.data() + n;
  a.z = dpos.data() + 2 * n;
  if constexpr (std::is_same_v<R, float>) {
    a.table = table_f.data(); a.coef = coef_f.data(); a.coef4 = coef4_f.data();
  } else {
    a.table = table_d.data(); a.coef = coef_d.data(); a.coef4 = coef4_d.data();
  }
  a.table_size = p2p_order_of(s) >= 0 ? s.table_size : 0;   // the exact path (and T = 1) stage no table
  a.k = plan.k;
  a.box = s.box_mpc_h;
  a.acc = acc.data();
  a.next_group = next_group.data();
  a.counters = count ? counters.data() : nullptr;
  // Persistent blocks: as many as fit at once, never more than there can be groups.
  const std::size_t grid = std::min<std::size_t>(std::min(targets_here, tasks),
                                                 static_cast<std::size_t>(plan.per_sm) * sm_count);
  void* args[] = {&a};
  ORBIS_CUDA_CHECK(cudaLaunchKernel(plan.kernel, dim3(static_cast<unsigned>(std::max<std::size_t>(grid, 1))),
                                    dim3(gpu::kBlock), args, plan.table_bytes, stream));
}

template <typename R>
void CudaP2PEvaluator::Impl::queue(const P2PSettings& s, const P2PInput& in) {
  const std::vector<Vec3d>& pos = *in.positions;
  const std::vector<Leaf>& host_leaves = *in.leaves;
  const std::vector<TaskSpan> spans = task_spans_of(in);
  const std::size_t n = pos.size(), nl = host_leaves.size(), entries = span_entries(spans);
  // Tasks after expansion: the walk's spans hold mutual pairs as one entry (at most twice
  // as many tasks), a plain list never does. Exact once packed.
  const std::size_t nt_plan = in.task_spans ? 2 * entries : entries;
  const KernelPlan<R> plan = plan_kernel<R>(s);

  // Device memory plan, before any allocation. Particle arrays must fit whole; the tasks of
  // one chunk take 8 bytes each as uploaded, 8 more as expanded (the sort's other buffer)
  // and up to 4 for the expansion's scan.
  DeviceArray<R>& dpos = *[&] {
    if constexpr (std::is_same_v<R, float>) return &pos_f; else return &pos_d;
  }();
  std::size_t free_bytes = 0, total_bytes = 0;
  ORBIS_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const std::size_t held = dpos.capacity() * sizeof(R) + acc.capacity() * sizeof(double) +
                           leaves.capacity() * sizeof(gpu::DeviceLeaf) +
                           grouping.held_bytes() + schedule.held_bytes();
  const std::size_t usable = free_bytes + held > kMargin ? free_bytes + held - kMargin : 0;
  auto padded = [](std::size_t bytes) { return bytes + bytes / 8 + 64; };
  const std::size_t fixed = padded(3 * n * sizeof(R)) + padded(3 * n * sizeof(double)) +
                            padded(nl * sizeof(gpu::DeviceLeaf)) + padded(4 * nl * 6 * sizeof(std::uint32_t)) +
                            (std::size_t{16} << 20);   // groups (per target leaf), tables, counters
  if (fixed > usable)
    fail("P2P on GPU {} ({}) needs {:.2f} GiB of device memory for {} particles and {} leaves, but "
         "{:.2f} GiB of {:.2f} GiB are free: run on more MPI ranks (fewer particles each) or use "
         "[gpu] p2p_precision = \"float\"",
         device, name, gib(fixed + kMargin), n, nl, gib(free_bytes + held), gib(total_bytes));
  // 20 bytes a task (+1/8 array headroom), at most what one grouping holds.
  const std::size_t cap =
      std::max<std::size_t>(p2p_chunk_tasks(usable, fixed, 24, max_chunk_tasks, gpu::DeviceGrouping::kMaxTasks), 1);

  std::vector<std::uint32_t> bounds{0, static_cast<std::uint32_t>(nl)};
  std::vector<std::size_t> chunk_offsets{0, entries};   // entries per chunk (= tasks when chunked)
  Stopwatch prep;
  if (nt_plan > cap) bounds = chunk_bounds(tasks_per_target(spans, nl), cap);
  n_chunks = bounds.size() - 1;

  dpos.ensure(std::max<std::size_t>(3 * n, 1));
  acc.ensure(std::max<std::size_t>(3 * n, 1));
  leaves.ensure(std::max<std::size_t>(nl, 1));
  next_group.ensure(1);
  counters.ensure(2);
  host_targets.ensure(std::max<std::size_t>(nt_plan, 1));
  host_sources.ensure(std::max<std::size_t>(nt_plan, 1));

  // Leaf-relative positions straight into pinned memory (so the upload is asynchronous).
  host_pos.ensure(std::max<std::size_t>(3 * n * sizeof(R), 1));
  R* hx = reinterpret_cast<R*>(host_pos.data());
  leaf_relative_positions(pos, host_leaves, plan.k.length_scale, hx, hx + n, hx + 2 * n);
  host_acc.ensure(std::max<std::size_t>(3 * n, 1));

  ORBIS_CUDA_CHECK(cudaEventRecord(event(0), stream));
  if (n > 0)
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(dpos.data(), hx, 3 * n * sizeof(R), cudaMemcpyHostToDevice, stream));
  if (nl > 0)
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(leaves.data(), host_leaves.data(), nl * sizeof(Leaf),
                                     cudaMemcpyHostToDevice, stream));
  ORBIS_CUDA_CHECK(cudaMemsetAsync(acc.data(), 0, std::max<std::size_t>(3 * n, 1) * sizeof(double), stream));
  ORBIS_CUDA_CHECK(cudaMemsetAsync(counters.data(), 0, 2 * sizeof(unsigned long long), stream));

  PackedCount packed;
  std::vector<std::size_t> chunk_tasks;   // tasks (expanded) per chunk
  if (n_chunks == 1) {
    // Slices of entries packed on the host while the previous slice is in flight.
    std::uint32_t* up_t = grouping.upload_targets(nt_plan);
    std::uint32_t* up_s = grouping.upload_sources(nt_plan);
    for (std::size_t a = 0; a < entries; a += kSliceTasks) {
      const std::size_t b = std::min(entries, a + kSliceTasks);
      const PackedCount part = pack_p2p_tasks(spans, a, b, host_leaves, host_targets.data() + a, host_sources.data() + a);
      packed.pairs += part.pairs;
      packed.tasks += part.tasks;
      ORBIS_CUDA_CHECK(cudaMemcpyAsync(up_t + a, host_targets.data() + a, (b - a) * sizeof(std::uint32_t),
                                       cudaMemcpyHostToDevice, stream));
      ORBIS_CUDA_CHECK(cudaMemcpyAsync(up_s + a, host_sources.data() + a, (b - a) * sizeof(std::uint32_t),
                                       cudaMemcpyHostToDevice, stream));
    }
    chunk_tasks.push_back(packed.tasks);
  } else {
    packed = pack_p2p_tasks_chunked(spans, host_leaves, bounds, host_targets.data(), host_sources.data(),
                                    chunk_offsets);
    for (std::size_t c = 0; c < n_chunks; ++c) chunk_tasks.push_back(chunk_offsets[c + 1] - chunk_offsets[c]);
  }
  const std::size_t chunk_max = *std::max_element(chunk_tasks.begin(), chunk_tasks.end());
  interactions = static_cast<double>(packed.pairs);
  timings.host_prepare = prep.seconds();

  // Per chunk: [upload,] group, kernel; events 1 + 3c .. 3 + 3c mark their ends.
  for (std::size_t c = 0; c < n_chunks; ++c) {
    const std::size_t ct = chunk_tasks[c];
    const std::size_t ce = n_chunks == 1 ? entries : ct;   // entries uploaded for this chunk
    if (n_chunks > 1 && ct > 0) {
      const std::size_t t0 = chunk_offsets[c];
      ORBIS_CUDA_CHECK(cudaMemcpyAsync(grouping.upload_targets(chunk_max), host_targets.data() + t0,
                                       ct * sizeof(std::uint32_t), cudaMemcpyHostToDevice, stream));
      ORBIS_CUDA_CHECK(cudaMemcpyAsync(grouping.upload_sources(chunk_max), host_sources.data() + t0,
                                       ct * sizeof(std::uint32_t), cudaMemcpyHostToDevice, stream));
    }
    ORBIS_CUDA_CHECK(cudaEventRecord(event(1 + 3 * c), stream));
    launch_groups<R>(plan, s, n, leaves.data(), nl, ce, ct, bounds[c + 1] - bounds[c], event(2 + 3 * c));
    ORBIS_CUDA_CHECK(cudaEventRecord(event(3 + 3 * c), stream));
  }
  if (n > 0)
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(host_acc.data(), acc.data(), 3 * n * sizeof(double),
                                     cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaEventRecord(event(4 + 3 * (n_chunks - 1)), stream));
}

// Events of the tree step, after those of one chunk (0-4): positions up, tree built, walked.
constexpr std::size_t kEventUploaded = 5, kEventBuilt = 6, kEventWalked = 7;

template <typename R>
void CudaP2PEvaluator::Impl::queue_tree_step(const P2PSettings& s, const DeviceTreeStep& step, DeviceTreeResult& out) {
  const std::vector<Vec3d>& positions = *step.positions;
  const std::size_t n = positions.size();
  if (n == 0) fail("P2P on GPU: no particles");
  if (step.max_leaf < 1 || static_cast<unsigned>(step.max_leaf) > kMaxLeafCount)
    fail("P2P on GPU: [gravity] max_leaf = {} must be in [1, {}] (a source leaf fills one tile)", step.max_leaf,
         kMaxLeafCount);
  const KernelPlan<R> plan = plan_kernel<R>(s);
  Stopwatch watch;

  // Positions up: slice by slice into pinned memory by all threads, each slice's copy to the
  // device running while the next is staged (a pageable copy would go at a fraction of the
  // bus speed); then x | y | z on the device.
  host_pos_in.ensure(n);
  pos_in.ensure(6 * n);   // interleaved as uploaded, then x | y | z
  double* up = pos_in.data() + 3 * n;
  ORBIS_CUDA_CHECK(cudaEventRecord(event(0), stream));
  constexpr std::size_t kSlices = 8;
  for (std::size_t k = 0; k < kSlices; ++k) {
    const std::size_t a = n * k / kSlices, b = n * (k + 1) / kSlices;
    if (b == a) continue;
#pragma omp parallel for schedule(static)
    for (std::int64_t c = 0; c < 32; ++c) {
      const std::size_t lo = a + (b - a) * static_cast<std::size_t>(c) / 32;
      const std::size_t hi = a + (b - a) * static_cast<std::size_t>(c + 1) / 32;
      if (hi > lo) std::memcpy(static_cast<void*>(host_pos_in.data() + lo), &positions[lo], (hi - lo) * sizeof(Vec3d));
    }
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(up + 3 * a, host_pos_in.data() + a, (b - a) * sizeof(Vec3d),
                                     cudaMemcpyHostToDevice, stream));
  }
  const double staging = watch.seconds();
  deinterleave_kernel<<<grid_for(n, 256), 256, 0, stream>>>(up, n, pos_in.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  ORBIS_CUDA_CHECK(cudaEventRecord(event(kEventUploaded), stream));

  tree.build(pos_in.data(), pos_in.data() + n, pos_in.data() + 2 * n, n, step.max_leaf, 1.0, stream,
             step.walk.top_levels);
  ORBIS_CUDA_CHECK(cudaEventRecord(event(kEventBuilt), stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  out.tree_seconds = watch.seconds();
  watch.restart();

  const std::size_t nn = tree.n_nodes(), nl = tree.n_leaves();
  walk_nodes.ensure(nn);
  tree.walk_nodes(walk_nodes.data(), step.walk.top_levels, stream);
  walk.run(walk_nodes.data(), nn, nl, step.walk, stream);
  ORBIS_CUDA_CHECK(cudaEventRecord(event(kEventWalked), stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  out.walk_seconds = watch.seconds();
  const std::size_t entries = walk.p2p_entries(), tasks = walk.p2p_tasks();
  out.p2p_tasks = tasks;

  // When the task list does not fit in device memory next to everything else (or the
  // chunk test hook asks for less), the tasks take the host path, which splits them into
  // chunks of whole target leaves: the same tasks in the same order, so the same sums.
  std::size_t free_bytes = 0, total_bytes = 0;
  ORBIS_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  // Likewise a task list longer than one grouping holds (gpu::DeviceGrouping::kMaxTasks).
  const bool too_many = tasks > gpu::DeviceGrouping::kMaxTasks || (max_chunk_tasks > 0 && tasks > max_chunk_tasks);
  if (too_many || grouping.growth_bytes(entries, tasks, nl) + schedule.growth_bytes(std::min(nl, tasks)) +
                          (std::is_same_v<R, float> ? pos_f.growth_bytes(3 * n) : pos_d.growth_bytes(3 * n)) +
                          acc.growth_bytes(3 * n) + kMargin > free_bytes) {
    tree.download(*out.tree, positions, copy_stream);
    walk.download_m2l(*out.m2l, *out.m2l_offsets, copy_stream);
    std::vector<std::uint32_t> targets, sources;
    walk.download_p2p(targets, sources, stream);
    fallback_tasks.resize(entries);
#pragma omp parallel for schedule(static)
    for (std::int64_t e = 0; e < static_cast<std::int64_t>(entries); ++e) {
      InteractionTask& t = fallback_tasks[static_cast<std::size_t>(e)];
      t.target = targets[e] & ~kMutualBit;
      t.source = packed_leaf(sources[e]);
      for (int d = 0; d < 3; ++d) t.image[d] = static_cast<std::int8_t>(packed_image(sources[e], d));
      t.flags = (targets[e] & kMutualBit) ? kMutualTask : 0;
    }
    fallback_spans.assign(1, TaskSpan{fallback_tasks.data(), entries});
    queue<R>(s, P2PInput{&out.tree->positions(), &out.tree->leaves(), nullptr, &fallback_spans});
    return;
  }

  // P2P: leaf-relative positions, the walk's entries into the grouping's arrays, then the
  // grouping and the kernel as for uploaded tasks.
  DeviceArray<R>& dpos = *[&] {
    if constexpr (std::is_same_v<R, float>) return &pos_f; else return &pos_d;
  }();
  dpos.ensure(3 * n);
  acc.ensure(3 * n);
  next_group.ensure(1);
  counters.ensure(3);   // occupancy (2), pairs
  host_acc.ensure(3 * n + 1);
  gpu::device_leaf_relative_positions(tree.tree_x(), tree.tree_y(), tree.tree_z(), tree.leaves(), nl, n,
                                      plan.k.length_scale, dpos.data(), stream);
  ORBIS_CUDA_CHECK(cudaMemsetAsync(acc.data(), 0, 3 * n * sizeof(double), stream));
  ORBIS_CUDA_CHECK(cudaMemsetAsync(counters.data(), 0, 3 * sizeof(unsigned long long), stream));
  if (entries > 0) {
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(grouping.upload_targets(tasks), walk.p2p_targets(),
                                     entries * sizeof(std::uint32_t), cudaMemcpyDeviceToDevice, stream));
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(grouping.upload_sources(tasks), walk.p2p_sources(),
                                     entries * sizeof(std::uint32_t), cudaMemcpyDeviceToDevice, stream));
    gpu::P2PKernelRunner::count_pairs(walk.p2p_targets(), walk.p2p_sources(), entries, tree.leaves(), nullptr,
                                      counters.data() + 2, stream);
  }
  ORBIS_CUDA_CHECK(cudaEventRecord(event(1), stream));
  launch_groups<R>(plan, s, n, tree.leaves(), nl, entries, tasks, nl, event(2));
  ORBIS_CUDA_CHECK(cudaEventRecord(event(3), stream));
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(host_acc.data(), acc.data(), 3 * n * sizeof(double), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(host_acc.data() + 3 * n, counters.data() + 2, sizeof(unsigned long long),
                                   cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaEventRecord(event(4), stream));
  n_chunks = 1;
  device_tree_step = true;

  // The host's copies for the far field, on the other stream (the walk's and the tree's
  // arrays are only read from here on), while the P2P runs.
  Stopwatch copies;
  tree.download(*out.tree, positions, copy_stream);
  walk.download_m2l(*out.m2l, *out.m2l_offsets, copy_stream);
  timings.host_prepare = staging;
  timings.host_tree = copies.seconds();
}

CudaP2PEvaluator::CudaP2PEvaluator(int device) : impl_(std::make_unique<Impl>()) {
  std::string why;
  if (!cuda_device_usable(device, &why)) fail("[gpu] backend = \"cuda\", but {}", why);
  impl_->device = device;
  ORBIS_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  ORBIS_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  impl_->name = prop.name;
  impl_->sm_count = prop.multiProcessorCount;
  impl_->smem_optin = prop.sharedMemPerBlockOptin;
  ORBIS_CUDA_CHECK(cudaStreamCreateWithFlags(&impl_->stream, cudaStreamNonBlocking));
  ORBIS_CUDA_CHECK(cudaStreamCreateWithFlags(&impl_->copy_stream, cudaStreamNonBlocking));
  impl_->event(kEventWalked);
}

CudaP2PEvaluator::~CudaP2PEvaluator() {
  if (!impl_) return;
  cudaSetDevice(impl_->device);
  if (impl_->stream) cudaStreamSynchronize(impl_->stream);   // no throw from a destructor
  if (impl_->copy_stream) cudaStreamSynchronize(impl_->copy_stream);
  for (auto& e : impl_->events)
    if (e) cudaEventDestroy(e);
  if (impl_->stream) cudaStreamDestroy(impl_->stream);
  if (impl_->copy_stream) cudaStreamDestroy(impl_->copy_stream);
}

void CudaP2PEvaluator::start(const P2PSettings& settings, const P2PInput& input) {
  Impl& m = *impl_;
  if (m.pending) fail("CudaP2PEvaluator::start() called twice without finish()");
  m.wall.restart();
  check_p2p_settings(settings, input, kMaxLeafCount);   // tasks are checked as they are packed
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  m.n_particles = input.positions->size();
  m.double_precision = settings.double_precision;
  m.device_tree_step = false;
  if (settings.double_precision) m.queue<double>(settings, input);
  else m.queue<float>(settings, input);
  m.pending = true;
}

void CudaP2PEvaluator::start_tree_step(const P2PSettings& settings, const DeviceTreeStep& step,
                                       DeviceTreeResult& out) {
  Impl& m = *impl_;
  if (m.pending) fail("CudaP2PEvaluator::start_tree_step() called while an evaluation is pending");
  if (!step.positions || !out.tree || !out.m2l || !out.m2l_offsets)
    fail("CudaP2PEvaluator::start_tree_step(): missing positions or outputs");
  m.wall.restart();
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  m.n_particles = step.positions->size();
  m.double_precision = settings.double_precision;
  m.device_tree_step = false;   // until the device path queued its P2P (not the fallback)
  // The evaluation is pending from here: finish() waits for the device even if the host
  // copies below fail.
  m.pending = true;
  if (settings.double_precision) m.queue_tree_step<double>(settings, step, out);
  else m.queue_tree_step<float>(settings, step, out);
}

P2PStats CudaP2PEvaluator::finish(std::vector<Vec3d>& acc) {
  Impl& m = *impl_;
  if (!m.pending) fail("CudaP2PEvaluator::finish() without start()");
  m.pending = false;
  Stopwatch wait;
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  ORBIS_CUDA_CHECK(cudaGetLastError());
  const std::size_t n = m.n_particles;
  copy_accelerations(m.host_acc.data(), n, acc);
  m.timings.finish_wait = wait.seconds();
  auto ms = [&](std::size_t a, std::size_t b) {
    float t = 0;
    ORBIS_CUDA_CHECK(cudaEventElapsedTime(&t, m.event(a), m.event(b)));
    return 1e-3 * t;
  };
  m.timings.upload = m.timings.grouping = m.timings.kernel = 0;
  for (std::size_t c = 0; c < m.n_chunks; ++c) {
    m.timings.upload += ms(c == 0 ? 0 : 3 * c, 1 + 3 * c);   // chunk > 0: from the last kernel's end
    m.timings.grouping += ms(1 + 3 * c, 2 + 3 * c);
    m.timings.kernel += ms(2 + 3 * c, 3 + 3 * c);
  }
  m.timings.download = ms(3 + 3 * (m.n_chunks - 1), 4 + 3 * (m.n_chunks - 1));
  m.timings.chunks = static_cast<int>(m.n_chunks);
  m.timings.device_tree = m.device_tree_step;
  m.timings.tree = m.timings.walk = 0;
  if (m.device_tree_step) {
    m.timings.upload = ms(0, kEventUploaded);
    m.timings.tree = ms(kEventUploaded, kEventBuilt);
    m.timings.walk = ms(kEventBuilt, kEventWalked);
    unsigned long long pairs = 0;
    std::memcpy(&pairs, m.host_acc.data() + 3 * n, sizeof(pairs));
    m.interactions = static_cast<double>(pairs);
  }
  m.occupancy = {};
  if (m.count) {
    unsigned long long c[2] = {};
    ORBIS_CUDA_CHECK(cudaMemcpy(c, m.counters.data(), sizeof(c), cudaMemcpyDeviceToHost));
    m.occupancy.lane_slots = static_cast<double>(c[0]);
    m.occupancy.pairs = static_cast<double>(c[1]);
  }
  P2PStats stats;
  stats.seconds = m.wall.seconds();
  stats.interactions = m.interactions;
  stats.where = fmt::format("cuda ({}, {}{}{})", m.name, m.double_precision ? "double" : "float",
                            m.device_tree_step ? ", tree and walk on the GPU" : "",
                            m.n_chunks > 1 ? fmt::format(", {} chunks", m.n_chunks) : std::string());
  return stats;
}

P2PStats CudaP2PEvaluator::evaluate(const P2PSettings& settings, const P2PInput& input,
                                    std::vector<Vec3d>& acc) {
  start(settings, input);
  return finish(acc);
}

std::string CudaP2PEvaluator::device_name() const { return impl_->name; }
const CudaP2PTimings& CudaP2PEvaluator::timings() const { return impl_->timings; }
void CudaP2PEvaluator::set_count_occupancy(bool on) { impl_->count = on; }
void CudaP2PEvaluator::set_coefficient_table(bool on) { impl_->coef_form = on; }
CudaP2POccupancy CudaP2PEvaluator::occupancy() const { return impl_->occupancy; }
void CudaP2PEvaluator::set_max_tasks_per_chunk(std::size_t n) { impl_->max_chunk_tasks = n; }

GroupedTasks CudaP2PEvaluator::group_on_device(const std::vector<InteractionTask>& host_tasks,
                                               std::size_t n_leaves) {
  Impl& m = *impl_;
  ORBIS_CUDA_CHECK(cudaSetDevice(m.device));
  const std::size_t nt = host_tasks.size();
  // The upload format (targets, packed sources); leaf counts play no part in the grouping.
  std::vector<Leaf> dummy(n_leaves);
  std::vector<std::uint32_t> targets(nt), packed(nt);
  pack_p2p_tasks({TaskSpan{host_tasks.data(), nt}}, 0, nt, dummy, targets.data(), packed.data());
  if (nt > 0) {
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(m.grouping.upload_targets(nt), targets.data(), nt * sizeof(std::uint32_t),
                                     cudaMemcpyHostToDevice, m.stream));
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(m.grouping.upload_sources(nt), packed.data(), nt * sizeof(std::uint32_t),
                                     cudaMemcpyHostToDevice, m.stream));
  }
  m.grouping.run(m.stream, nt, nt, n_leaves);
  std::uint32_t n_groups = 0;
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(&n_groups, m.grouping.n_groups(), sizeof(n_groups),
                                   cudaMemcpyDeviceToHost, m.stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  GroupedTasks out;
  out.tasks.resize(nt);
  out.groups.resize(n_groups);
  if (nt > 0) {
    ORBIS_CUDA_CHECK(cudaMemcpy(targets.data(), m.grouping.sorted_targets(), nt * sizeof(std::uint32_t),
                                cudaMemcpyDeviceToHost));
    ORBIS_CUDA_CHECK(cudaMemcpy(packed.data(), m.grouping.sorted_sources(), nt * sizeof(std::uint32_t),
                                cudaMemcpyDeviceToHost));
  }
  for (std::size_t q = 0; q < nt; ++q) {
    InteractionTask& t = out.tasks[q];
    t.target = targets[q];
    t.source = packed_leaf(packed[q]);
    for (int d = 0; d < 3; ++d) t.image[d] = static_cast<std::int8_t>(packed_image(packed[q], d));
  }
  if (n_groups > 0)
    ORBIS_CUDA_CHECK(cudaMemcpy(out.groups.data(), m.grouping.groups(), n_groups * sizeof(GroupIdx),
                                cudaMemcpyDeviceToHost));
  return out;
}

// ------------------------------------------------------------------ factory hooks

double CudaP2PEvaluator::pair_potential_sum(const PairPotentialInput& input) {
  return gpu::pair_potential_sum(input, impl_->device);
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

bool cuda_device_usable(int device, std::string* why) {
  auto say = [why](std::string s) {
    if (why) *why = std::move(s);
    return false;
  };
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();   // clear the sticky-free error state
    return say(e == cudaSuccess ? std::string("no CUDA device is present")
                                : fmt::format("no usable CUDA device ({})", cudaGetErrorString(e)));
  }
  if (device < 0 || device >= count)
    return say(fmt::format("[gpu] device = {} does not exist ({} CUDA device{})", device, count,
                           count == 1 ? "" : "s"));
  if (cudaSetDevice(device) != cudaSuccess) {
    cudaGetLastError();
    return say(fmt::format("CUDA device {} cannot be selected", device));
  }
  // The kernel must have machine code for this device (the build targets CMAKE_CUDA_ARCHITECTURES).
  cudaFuncAttributes attr{};
  const cudaError_t k = cudaFuncGetAttributes(&attr, &gpu::p2p_groups_kernel<3, float, true>);
  if (k != cudaSuccess) {
    cudaGetLastError();
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, device);
    return say(fmt::format("this build has no P2P kernel for {} (compute capability {}.{}): {}",
                           prop.name, prop.major, prop.minor, cudaGetErrorString(k)));
  }
  return true;
}

std::size_t cuda_device_free_memory(int device) {
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaSetDevice(device) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return free_bytes;
}

std::unique_ptr<P2PEvaluator> make_cuda_p2p_evaluator(int device) {
  return std::make_unique<CudaP2PEvaluator>(device);
}

}  // namespace orbis
