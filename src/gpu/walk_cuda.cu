#include "gpu/walk_cuda.cuh"

#include <algorithm>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "fmm/walk_pair.hpp"

namespace orbis::gpu {
namespace {

constexpr unsigned kBlock = 256;

unsigned blocks_for(std::size_t n) { return static_cast<unsigned>((n + kBlock - 1) / kBlock); }

// A frontier pair in one word: target in the low half, source in the high half.
__host__ __device__ std::uint64_t pack_pair(std::int32_t t, std::int32_t s) {
  return static_cast<std::uint32_t>(t) | (static_cast<std::uint64_t>(static_cast<std::uint32_t>(s)) << 32);
}

struct AddCounts {
  __host__ __device__ WalkCounts operator()(const WalkCounts& a, const WalkCounts& b) const {
    return WalkCounts{a.m2l + b.m2l, a.p2p + b.p2p, a.mutual + b.mutual, a.children + b.children};
  }
};

// The pair's outputs counted (the pair test's sink, fmm/walk_pair.hpp).
struct CountSink {
  std::int32_t t, s;
  WalkCounts c;
  __device__ void m2l(const std::int8_t*) { c.m2l += t != s ? 2 : 1; }
  __device__ void p2p(const std::int8_t*) {
    ++c.p2p;
    c.mutual += t != s ? 1 : 0;
  }
  __device__ void child(std::int32_t, std::int32_t) { ++c.children; }
};

// The pair's outputs written from its scanned offsets: M2L as the CPU emits it, P2P in
// DeviceGrouping's upload format, child pairs into the next frontier.
struct WriteSink {
  std::int32_t t, s;
  const WalkNode* nodes;
  std::uint32_t* p2p_t;
  std::uint32_t* p2p_s;
  InteractionTask* m2l_out;
  std::uint64_t* next;
  WalkCounts at;
  __device__ void m2l(const std::int8_t* image) {
    InteractionTask task;
    task.target = static_cast<std::uint32_t>(t);
    task.source = static_cast<std::uint32_t>(s);
    for (int d = 0; d < 3; ++d) task.image[d] = image[d];
    m2l_out[at.m2l] = task;
    if (t != s) {
      task.target = static_cast<std::uint32_t>(s);
      task.source = static_cast<std::uint32_t>(t);
      for (int d = 0; d < 3; ++d) task.image[d] = static_cast<std::int8_t>(-image[d]);
      m2l_out[at.m2l + 1] = task;
    }
    at.m2l += t != s ? 2 : 1;   // a thread may walk several pairs (walk_from)
  }
  __device__ void p2p(const std::int8_t* image) {
    p2p_t[at.p2p] = static_cast<std::uint32_t>(nodes[t].leaf) | (t != s ? kMutualBit : 0u);
    p2p_s[at.p2p] = pack_source(static_cast<std::uint32_t>(nodes[s].leaf), image);
    ++at.p2p;
  }
  __device__ void child(std::int32_t a, std::int32_t b) { next[at.children++] = pack_pair(a, b); }
};

// A kernel's pair walks `depth` levels of its subtree of pairs itself (depth first, in a
// fixed order), its pairs at that depth going to the next frontier: a small frontier then
// takes one launch, scan and host wait for several levels. Both kernels walk the same way,
// so the counts match the writes.
constexpr int kMaxDepth = 4;

template <typename Sink>
struct DeeperSink {
  Sink& sink;
  int level, depth;
  std::int32_t* stack_t;
  std::int32_t* stack_s;
  int* stack_level;
  int& top;
  __device__ void m2l(const std::int8_t* image) { sink.m2l(image); }
  __device__ void p2p(const std::int8_t* image) { sink.p2p(image); }
  __device__ void child(std::int32_t a, std::int32_t b) {
    if (level + 1 < depth) {
      stack_t[top] = a, stack_s[top] = b, stack_level[top] = level + 1;
      ++top;
    } else {
      sink.child(a, b);
    }
  }
};

template <typename Sink>
__device__ void walk_from(const WalkNode* nodes, std::uint64_t pair, const WalkPairParams& p, int depth,
                          Sink& sink) {
  // Each pair popped pushes at most 4, so the stack holds at most 3 per level plus one.
  std::int32_t stack_t[3 * kMaxDepth + 1], stack_s[3 * kMaxDepth + 1];
  int stack_level[3 * kMaxDepth + 1];
  int top = 1;
  stack_t[0] = static_cast<std::int32_t>(pair & 0xffffffffu);
  stack_s[0] = static_cast<std::int32_t>(pair >> 32);
  stack_level[0] = 0;
  while (top > 0) {
    --top;
    const std::int32_t t = stack_t[top], s = stack_s[top];
    sink.t = t;
    sink.s = s;
    DeeperSink<Sink> deeper{sink, stack_level[top], depth, stack_t, stack_s, stack_level, top};
    walk_pair(t, s, nodes[t], nodes[s], p, deeper);
  }
}

// counts[i] for pair i < n; counts[n] = 0, so that the exclusive scan's entry n is the total.
__global__ void count_outputs(const WalkNode* nodes, const std::uint64_t* pairs, std::uint32_t n,
                              WalkPairParams p, int depth, WalkCounts* counts) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > n) return;
  CountSink sink{0, 0, WalkCounts{0, 0, 0, 0}};
  if (i < n) walk_from(nodes, pairs[i], p, depth, sink);
  counts[i] = sink.c;
}

// The same walk again, its outputs written at the scanned offsets (the P2P entries and the
// M2L tasks after those of the earlier levels: the arrays passed start there).
__global__ void write_outputs(const WalkNode* nodes, const std::uint64_t* pairs, std::uint32_t n,
                              WalkPairParams p, int depth, const WalkCounts* at, std::uint32_t* p2p_t,
                              std::uint32_t* p2p_s, InteractionTask* m2l, std::uint64_t* next) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  WriteSink sink{0, 0, nodes, p2p_t, p2p_s, m2l, next, at[i]};
  walk_from(nodes, pairs[i], p, depth, sink);
}

// Levels a kernel walks for a frontier of n pairs: several while the frontier is too small
// to fill the GPU (where the per-level launches and host wait dominate), one once it is
// large (where a thread's deeper subtree would leave its warp's other lanes idle).
int levels_per_launch(std::size_t n) { return n < 16384 ? kMaxDepth : (n < 262144 ? 2 : 1); }

__global__ void m2l_keys(const InteractionTask* tasks, std::uint32_t n, std::uint32_t* keys) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) keys[i] = tasks[i].target;
}

// offsets[k] = the first sorted task of target >= k (k = 0 .. n_nodes), by binary search.
__global__ void m2l_group_offsets(const std::uint32_t* keys, std::uint32_t n, std::uint32_t n_nodes,
                                  std::uint64_t* offsets) {
  const std::uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k > n_nodes) return;
  std::uint32_t lo = 0, hi = n;
  while (lo < hi) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (keys[mid] < k) lo = mid + 1;
    else hi = mid;
  }
  offsets[k] = lo;
}

int key_bits(std::size_t n) {
  int bits = 1;
  while (bits < 32 && (std::uint64_t{1} << bits) < n) ++bits;
  return bits;
}

}  // namespace

DeviceWalk::DeviceWalk() {
  ORBIS_CUDA_CHECK(cudaEventCreate(&start_));
  ORBIS_CUDA_CHECK(cudaEventCreate(&stop_));
  totals_.ensure(1);
}

DeviceWalk::~DeviceWalk() {
  if (start_) cudaEventDestroy(start_);
  if (stop_) cudaEventDestroy(stop_);
}

void DeviceWalk::run(const WalkNode* nodes, std::size_t n_nodes, std::size_t n_leaves,
                     const WalkSettings& settings, cudaStream_t stream) {
  check_walk_settings(settings);
  if (n_leaves >= kPackedLeafLimit) fail("device walk: {} leaves exceed the packed P2P format", n_leaves);
  const WalkPairParams params = walk_pair_params(settings);
  n_nodes_ = n_nodes;
  p2p_entries_ = p2p_mutual_ = m2l_count_ = pairs_tested_ = 0;
  levels_ = 0;
  ORBIS_CUDA_CHECK(cudaEventRecord(start_, stream));

  std::size_t n_pairs = n_nodes > 0 ? 1 : 0;
  int cur = 0;
  frontier_[0].ensure(1);
  ORBIS_CUDA_CHECK(cudaMemsetAsync(frontier_[0].data(), 0, sizeof(std::uint64_t), stream));   // (root, root)
  while (n_pairs > 0) {
    const auto n = static_cast<std::uint32_t>(n_pairs);
    counts_.ensure(n_pairs + 1);
    offsets_.ensure(n_pairs + 1);
    const int depth = levels_per_launch(n_pairs);
    count_outputs<<<blocks_for(n_pairs + 1), kBlock, 0, stream>>>(nodes, frontier_[cur].data(), n, params, depth,
                                                                 counts_.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    std::size_t temp = 0;
    ORBIS_CUDA_CHECK(cub::DeviceScan::ExclusiveScan(nullptr, temp, counts_.data(), offsets_.data(), AddCounts{},
                                                    WalkCounts{0, 0, 0, 0}, static_cast<int>(n + 1), stream));
    temp_.ensure(temp);
    temp = temp_.capacity();
    ORBIS_CUDA_CHECK(cub::DeviceScan::ExclusiveScan(temp_.data(), temp, counts_.data(), offsets_.data(),
                                                    AddCounts{}, WalkCounts{0, 0, 0, 0}, static_cast<int>(n + 1),
                                                    stream));
    // The level's totals size the outputs and the next frontier: the one host wait a level.
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(totals_.data(), offsets_.data() + n_pairs, sizeof(WalkCounts),
                                     cudaMemcpyDeviceToHost, stream));
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    const WalkCounts tot = *totals_.data();
    p2p_t_.ensure_keeping(p2p_entries_ + tot.p2p, p2p_entries_, stream);
    p2p_s_.ensure_keeping(p2p_entries_ + tot.p2p, p2p_entries_, stream);
    m2l_raw_.ensure_keeping(m2l_count_ + tot.m2l, m2l_count_, stream);
    frontier_[cur ^ 1].ensure(std::max<std::size_t>(tot.children, 1));
    write_outputs<<<blocks_for(n_pairs), kBlock, 0, stream>>>(
        nodes, frontier_[cur].data(), n, params, depth, offsets_.data(), p2p_t_.data() + p2p_entries_,
        p2p_s_.data() + p2p_entries_, m2l_raw_.data() + m2l_count_, frontier_[cur ^ 1].data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    p2p_entries_ += tot.p2p;
    p2p_mutual_ += tot.mutual;
    m2l_count_ += tot.m2l;
    pairs_tested_ += n_pairs;
    ++levels_;   // launches, each `depth` levels of pairs
    n_pairs = tot.children;
    cur ^= 1;
  }
  group_m2l(n_nodes, stream);
  ORBIS_CUDA_CHECK(cudaEventRecord(stop_, stream));
}

// M2L grouped by target: a stable radix sort of the tasks by target (so the order within a
// target is the walk's), the group offsets by binary search in the sorted keys.
void DeviceWalk::group_m2l(std::size_t n_nodes, cudaStream_t stream) {
  const std::size_t n = m2l_count_;
  m2l_offsets_.ensure(n_nodes + 1);
  m2l_keys_[0].ensure(std::max<std::size_t>(n, 1));
  m2l_keys_[1].ensure(std::max<std::size_t>(n, 1));
  m2l_values_.ensure(std::max<std::size_t>(n, 1));
  m2l_sorted_ = m2l_values_.data();
  if (n > 0) {
    const auto ni = static_cast<std::uint32_t>(n);
    m2l_keys<<<blocks_for(n), kBlock, 0, stream>>>(m2l_raw_.data(), ni, m2l_keys_[0].data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    const int bits = key_bits(n_nodes);
    std::size_t temp = 0;
    ORBIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp, m2l_keys_[0].data(), m2l_keys_[1].data(),
                                                     m2l_raw_.data(), m2l_values_.data(), static_cast<int>(n), 0,
                                                     bits, stream));
    temp_.ensure(temp);
    temp = temp_.capacity();
    ORBIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp_.data(), temp, m2l_keys_[0].data(), m2l_keys_[1].data(),
                                                     m2l_raw_.data(), m2l_values_.data(), static_cast<int>(n), 0,
                                                     bits, stream));
  }
  m2l_group_offsets<<<blocks_for(n_nodes + 1), kBlock, 0, stream>>>(
      m2l_keys_[1].data(), static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(n_nodes),
      m2l_offsets_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

void DeviceWalk::download_m2l(std::vector<InteractionTask>& tasks, std::vector<std::size_t>& offsets,
                              cudaStream_t stream) const {
  static_assert(sizeof(std::size_t) == sizeof(std::uint64_t), "offsets are copied as they are");
  // Through a pinned buffer (a pageable copy of ~100 MB runs at a fraction of the bus speed),
  // then into the caller's vector by all threads.
  host_m2l_.ensure(std::max<std::size_t>(m2l_count_, 1));
  if (m2l_count_ > 0)
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(host_m2l_.data(), m2l_sorted_, m2l_count_ * sizeof(InteractionTask),
                                     cudaMemcpyDeviceToHost, stream));
  // Headroom, so a list a little longer than last step's is no reallocation and copy.
  if (tasks.capacity() < m2l_count_) tasks.reserve(m2l_count_ + m2l_count_ / 8);
  tasks.resize(m2l_count_);
  offsets.resize(n_nodes_ + 1);
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(offsets.data(), m2l_offsets_.data(), offsets.size() * sizeof(std::uint64_t),
                                   cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  const InteractionTask* from = host_m2l_.data();
  const auto count = static_cast<std::int64_t>(m2l_count_);
#pragma omp parallel for schedule(static)
  for (std::int64_t q = 0; q < count; ++q) tasks[static_cast<std::size_t>(q)] = from[q];
}

void DeviceWalk::download_p2p(std::vector<std::uint32_t>& targets, std::vector<std::uint32_t>& sources,
                              cudaStream_t stream) const {
  targets.resize(p2p_entries_);
  sources.resize(p2p_entries_);
  if (p2p_entries_ > 0) {
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(targets.data(), p2p_t_.data(), p2p_entries_ * sizeof(std::uint32_t),
                                     cudaMemcpyDeviceToHost, stream));
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(sources.data(), p2p_s_.data(), p2p_entries_ * sizeof(std::uint32_t),
                                     cudaMemcpyDeviceToHost, stream));
  }
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
}

double DeviceWalk::last_ms() const {
  ORBIS_CUDA_CHECK(cudaEventSynchronize(stop_));
  float ms = 0;
  ORBIS_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
  return ms;
}

}  // namespace orbis::gpu
