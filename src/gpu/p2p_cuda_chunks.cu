#include "gpu/p2p_cuda_chunks.cuh"

#include <algorithm>

#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "core/error.hpp"
#include "fmm/tasks.hpp"
#include "gpu/cub_counts.cuh"
#include "gpu/device_memory_plan.hpp"

namespace orbis::gpu {
namespace {

constexpr unsigned kThreads = 256;
unsigned blocks_for(std::size_t n) { return static_cast<unsigned>(std::max<std::size_t>(1, (n + kThreads - 1) / kThreads)); }

__host__ __device__ __forceinline__ bool in_chunk(std::uint32_t leaf, std::uint32_t lo, std::uint32_t hi) {
  return leaf >= lo && leaf < hi;
}

// Tasks of entry e whose target lies in [lo, hi): its forward task, and a mutual entry's reverse.
struct TasksInChunk {
  const std::uint32_t* t;
  const std::uint32_t* s;
  std::uint32_t lo, hi;
  __host__ __device__ std::uint32_t operator()(std::size_t e) const {
    const std::uint32_t target = t[e] & ~kMutualBit;
    std::uint32_t c = in_chunk(target, lo, hi) ? 1u : 0u;
    if ((t[e] & kMutualBit) && in_chunk(packed_leaf(s[e]), lo, hi)) ++c;
    return c;
  }
};
using TaskCountIter = thrust::transform_iterator<TasksInChunk, thrust::counting_iterator<std::size_t>>;

// The chunk's tasks at their scanned positions: forward first, then the reverse one, as the
// one-chunk expansion (DeviceGrouping) orders them.
__global__ void expand_chunk(const std::uint32_t* t, const std::uint32_t* s, std::size_t entries, std::uint32_t lo,
                             std::uint32_t hi, const std::uint32_t* position, std::uint32_t* out_t,
                             std::uint32_t* out_s) {
  const std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (e >= entries) return;
  const std::uint32_t target = t[e] & ~kMutualBit, w = s[e];
  std::uint32_t p = position[e];
  if (in_chunk(target, lo, hi)) {
    out_t[p] = target;
    out_s[p] = w;
    ++p;
  }
  const std::uint32_t source = packed_leaf(w);
  if ((t[e] & kMutualBit) && in_chunk(source, lo, hi)) {
    const std::int8_t back[3] = {static_cast<std::int8_t>(-packed_image(w, 0)), static_cast<std::int8_t>(-packed_image(w, 1)),
                                 static_cast<std::int8_t>(-packed_image(w, 2))};
    out_t[p] = source;
    out_s[p] = pack_source(target, back);
  }
}

// Tasks per target leaf (integer atomics: exact in any order).
__global__ void tasks_per_leaf(const std::uint32_t* t, const std::uint32_t* s, std::size_t entries,
                               std::uint32_t* counts) {
  const std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (e >= entries) return;
  atomicAdd(counts + (t[e] & ~kMutualBit), 1u);
  if (t[e] & kMutualBit) atomicAdd(counts + packed_leaf(s[e]), 1u);
}

__global__ void pack_groups(const std::uint32_t* unique, const std::uint32_t* starts, const std::uint32_t* counts,
                            const std::uint32_t* n_groups, GroupIdx* groups) {
  const std::uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g < *n_groups) groups[g] = GroupIdx{unique[g], starts[g], counts[g]};
}

int key_bits(std::size_t n_leaves) {
  int bits = 1;
  while (bits < 32 && (std::uint64_t{1} << bits) < n_leaves) ++bits;
  return bits;
}

}  // namespace

DeviceP2PChunks::~DeviceP2PChunks() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

cudaEvent_t DeviceP2PChunks::event(std::size_t i) {
  while (events_.size() <= i) {
    cudaEvent_t e;
    ORBIS_CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
  }
  return events_[i];
}

double DeviceP2PChunks::sort_seconds() const {
  double s = 0;
  for (std::size_t k = 0; k + 2 < events_used_; k += 3) {
    ORBIS_CUDA_CHECK(cudaEventSynchronize(events_[k + 2]));
    float ms = 0;
    ORBIS_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[k], events_[k + 1]));
    s += 1e-3 * ms;
  }
  return s;
}

double DeviceP2PChunks::kernel_seconds() const {
  double s = 0;
  for (std::size_t k = 0; k + 2 < events_used_; k += 3) {
    ORBIS_CUDA_CHECK(cudaEventSynchronize(events_[k + 2]));
    float ms = 0;
    ORBIS_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[k + 1], events_[k + 2]));
    s += 1e-3 * ms;
  }
  return s;
}

std::size_t DeviceP2PChunks::bytes_for(std::size_t entries, std::size_t chunk_tasks, std::size_t n_leaves) {
  // Entry positions; keys and values twice (the sort's buffers); per leaf the groups and
  // their schedule (kP2PBytesPerLeaf, as the memory plan counts them); the sorts' temporaries
  // (about one more key array).
  return entries * 4 + chunk_tasks * 20 + n_leaves * kP2PBytesPerLeaf + (std::size_t{16} << 20);
}

void DeviceP2PChunks::release() {
  position_.release();
  for (auto& k : keys_) k.release();
  for (auto& v : values_) v.release();
  for (auto* a : {&unique_, &counts_, &starts_}) a->release();
  groups_.release();
  schedule_.release();
  temp_.release();
}

std::size_t DeviceP2PChunks::held_bytes() const {
  return (position_.capacity() + keys_[0].capacity() + keys_[1].capacity() + values_[0].capacity() +
          values_[1].capacity() + unique_.capacity() + counts_.capacity() + starts_.capacity()) * 4 +
         groups_.capacity() * sizeof(GroupIdx) + temp_.capacity() + schedule_.held_bytes();
}

void DeviceP2PChunks::run(const std::uint32_t* et, const std::uint32_t* es, std::size_t entries, std::size_t tasks,
                          std::size_t n_leaves, std::size_t max_tasks, const P2PKernelRunner& runner, P2PLaunch launch,
                          cudaStream_t stream) {
  // A chunk's groups hold task positions in 32 bits, and CUB's run-length encoding counts in
  // int: never more than kMaxP2PChunkTasks tasks at once, whatever the caller allows.
  static_assert(kMaxP2PChunkTasks == kCubMaxItems, "a chunk is one run-length encoding");
  const std::size_t most = std::min(kMaxP2PChunkTasks, max_cub_items_);
  if (tasks > most && (max_tasks == 0 || max_tasks > most)) max_tasks = most;
  // Chunks of consecutive target leaves, greedily up to max_tasks tasks each.
  bounds_.assign({0, static_cast<std::uint32_t>(n_leaves)});
  chunk_tasks_.assign({tasks});
  if (max_tasks > 0 && tasks > max_tasks) {
    counts_.ensure(n_leaves);
    host_counts_.ensure(n_leaves);
    ORBIS_CUDA_CHECK(cudaMemsetAsync(counts_.data(), 0, n_leaves * sizeof(std::uint32_t), stream));
    tasks_per_leaf<<<blocks_for(entries), kThreads, 0, stream>>>(et, es, entries, counts_.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(host_counts_.data(), counts_.data(), n_leaves * sizeof(std::uint32_t),
                                     cudaMemcpyDeviceToHost, stream));
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    bounds_.assign({0});
    chunk_tasks_.clear();
    std::size_t in_chunk = 0;
    for (std::size_t l = 0; l < n_leaves; ++l) {
      const std::uint32_t c = host_counts_.data()[l];
      if (c > max_tasks)
        fail("P2P on the GPU: target leaf {} alone has {} tasks, more than the {} a chunk may hold: a larger "
             "[gravity] max_leaf (fewer, larger source leaves), a smaller [gravity] r_cut_over_rs, or more free "
             "device memory", l, c, max_tasks);
      if (in_chunk + c > max_tasks) {
        bounds_.push_back(static_cast<std::uint32_t>(l));
        chunk_tasks_.push_back(in_chunk);
        in_chunk = 0;
      }
      in_chunk += c;
    }
    bounds_.push_back(static_cast<std::uint32_t>(n_leaves));
    chunk_tasks_.push_back(in_chunk);
  }
  const std::size_t cap = std::max<std::size_t>(*std::max_element(chunk_tasks_.begin(), chunk_tasks_.end()), 1);
  std::uint32_t most_leaves = 1;
  for (std::size_t c = 0; c + 1 < bounds_.size(); ++c) most_leaves = std::max(most_leaves, bounds_[c + 1] - bounds_[c]);

  // Exact sizes: the step gives these back to the pool after its P2P (release()).
  position_.ensure_exact(std::max<std::size_t>(entries, 1));
  for (int b = 0; b < 2; ++b) {
    keys_[b].ensure_exact(cap);
    values_[b].ensure_exact(cap);
  }
  for (auto* a : {&unique_, &counts_, &starts_}) a->ensure(most_leaves);
  n_groups_.ensure(1);
  groups_.ensure(most_leaves);
  // Temporary storage for the largest call of each kind.
  const TaskCountIter sizes(thrust::counting_iterator<std::size_t>(0), TasksInChunk{et, es, 0, 0});
  const std::size_t scan = exclusive_sum_bytes(sizes, position_.data(), entries, max_cub_items_);
  const std::size_t sort = radix_sort_pairs_bytes<std::uint32_t, std::uint32_t>(cap, 0, key_bits(n_leaves),
                                                                                 max_cub_items_);
  const std::size_t rle = run_length_encode_bytes(keys_[0].data(), unique_.data(), counts_.data(), n_groups_.data(),
                                                  cap, max_cub_items_);
  const std::size_t group_scan = exclusive_sum_bytes(counts_.data(), starts_.data(), most_leaves, max_cub_items_);
  temp_.ensure(std::max({scan, sort, rle, group_scan}));

  events_used_ = 0;
  for (std::size_t c = 0; c + 1 < bounds_.size(); ++c) {
    const std::size_t n = chunk_tasks_[c];
    if (n == 0) continue;
    ORBIS_CUDA_CHECK(cudaEventRecord(event(events_used_), stream));
    const std::uint32_t lo = bounds_[c], hi = bounds_[c + 1];
    const std::uint32_t leaves = hi - lo;
    const TaskCountIter in_range(thrust::counting_iterator<std::size_t>(0), TasksInChunk{et, es, lo, hi});
    exclusive_sum(temp_.data(), temp_.capacity(), in_range, position_.data(), entries, stream, max_cub_items_);
    expand_chunk<<<blocks_for(entries), kThreads, 0, stream>>>(et, es, entries, lo, hi, position_.data(),
                                                               keys_[0].data(), values_[0].data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    cub::DoubleBuffer<std::uint32_t> keys(keys_[0].data(), keys_[1].data()), values(values_[0].data(), values_[1].data());
    radix_sort_pairs(temp_.data(), temp_.capacity(), keys, values, n, 0, key_bits(n_leaves), stream, max_cub_items_);
    // Counts past the last run stay zero, so the scan over all `leaves` entries is valid.
    ORBIS_CUDA_CHECK(cudaMemsetAsync(counts_.data(), 0, leaves * sizeof(std::uint32_t), stream));
    run_length_encode(temp_.data(), temp_.capacity(), static_cast<const std::uint32_t*>(keys.Current()),
                      unique_.data(), counts_.data(), n_groups_.data(), n, stream, max_cub_items_);
    exclusive_sum(temp_.data(), temp_.capacity(), counts_.data(), starts_.data(), leaves, stream, max_cub_items_);
    pack_groups<<<blocks_for(leaves), kThreads, 0, stream>>>(unique_.data(), starts_.data(), counts_.data(),
                                                             n_groups_.data(), groups_.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    launch.groups = schedule_.run(groups_.data(), n_groups_.data(), leaves, stream);
    ORBIS_CUDA_CHECK(cudaEventRecord(event(events_used_ + 1), stream));
    launch.n_groups = n_groups_.data();
    launch.sources = values.Current();
    launch.n_tasks = n;
    launch.n_leaves = leaves;   // groups in this chunk, at most: the kernel's grid
    runner.launch(launch, stream);
    ORBIS_CUDA_CHECK(cudaEventRecord(event(events_used_ + 2), stream));
    events_used_ += 3;
  }
}

}  // namespace orbis::gpu
