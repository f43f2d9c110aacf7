#include "gpu/global_top_tree_cuda.cuh"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/vec3.hpp"
#include "domain/top_tree_keys.hpp"
#include "domain/top_tree_passes.hpp"
#include "gpu/cuda_check.cuh"
#include "gpu/device_buffer.cuh"

// Built with --fmad=false (src/CMakeLists.txt): periodic_wrap_position rounds each operation
// as the host's wrap and the engine's other wraps do (gpu/particle_kernels.cu), so a position
// outside the box gets the key of the position the host update is given.

namespace orbis::gpu {
namespace {

using top_tree::RoundNode;
using u64 = unsigned long long;   // the type CUDA's 64-bit atomics take
static_assert(sizeof(u64) == sizeof(std::uint64_t), "64-bit keys");

constexpr unsigned kThreads = 256;
constexpr unsigned kWarps = kThreads / 32;
constexpr unsigned kFullMask = 0xffffffffu;
// Children whose boxes a block gathers in shared memory before adding them to the global
// ones (48 bytes each: 24 KiB): the top levels, where every member goes to one of few
// children; below, the children are many and the global atomics spread over them.
constexpr std::size_t kSharedChildren = 512;
// A warp whose members go to at most this many children reduces each child's box over the
// warp first (one atomic per child and coordinate); more children: each member adds its own.
constexpr int kWarpGroups = 4;
constexpr u64 kNoMin = ~0ull;   // no member (ordered_bits never gives it)

// What a level's late pass reads of a splitting node: its threshold (rotated to its axis),
// its axis, and whether the rank fell on a bin's edge (equal keys go right).
struct LateNode {
  u64 cut[3];
  std::int32_t axis, settled;
};

// The members a pass reads: the first `*count` entries of `list`, or without a list the
// particles 0..n-1 (those with a slot >= 0 being the level's members).
struct PassList {
  const std::uint32_t* list = nullptr;
  const u64* count = nullptr;
  std::size_t n = 0;
};
__device__ std::size_t pass_size(const PassList& p) { return p.list ? static_cast<std::size_t>(*p.count) : p.n; }
__device__ std::uint32_t pass_member(const PassList& p, std::size_t k) {
  return p.list ? p.list[k] : static_cast<std::uint32_t>(k);
}

// A child's box as key minima and maxima: min[3c + d], max[3c + d] (coordinate d).
struct BoxTable {
  u64* min;
  u64* max;
};

// Every lane of the warp calls this (child -1: none). Members of one child pool their keys
// over the warp first when the warp holds few children.
__device__ void add_to_boxes(long long child, const u64* k, const BoxTable& t) {
  const unsigned lane = threadIdx.x & 31u;
  const unsigned peers = __match_any_sync(kFullMask, child);
  unsigned leaders = __ballot_sync(kFullMask, child >= 0 && lane == static_cast<unsigned>(__ffs(peers) - 1));
  if (__popc(leaders) > kWarpGroups) {
    if (child >= 0)
      for (int d = 0; d < 3; ++d) {
        atomicMin(&t.min[3 * child + d], k[d]);
        atomicMax(&t.max[3 * child + d], k[d]);
      }
    return;
  }
  while (leaders != 0) {   // the same on every lane
    const int leader = __ffs(leaders) - 1;
    leaders &= leaders - 1;
    const long long c = __shfl_sync(kFullMask, child, leader);
    const bool in = child == c;
    u64 lo[3], hi[3];
    for (int d = 0; d < 3; ++d) lo[d] = in ? k[d] : kNoMin, hi[d] = in ? k[d] : 0;
    for (int off = 16; off > 0; off >>= 1)
      for (int d = 0; d < 3; ++d) {
        lo[d] = min(lo[d], __shfl_xor_sync(kFullMask, lo[d], off));
        hi[d] = max(hi[d], __shfl_xor_sync(kFullMask, hi[d], off));
      }
    if (lane == static_cast<unsigned>(leader))
      for (int d = 0; d < 3; ++d) {
        atomicMin(&t.min[3 * c + d], lo[d]);
        atomicMax(&t.max[3 * c + d], hi[d]);
      }
  }
}

// The block's table of children's boxes: in shared memory (dynamic, 6 u64 a child) when
// `shared`, else the global one itself.
__device__ BoxTable open_boxes(bool shared, u64* smem, std::size_t n_children, const BoxTable& global) {
  if (!shared) return global;
  for (std::size_t j = threadIdx.x; j < 6 * n_children; j += blockDim.x) smem[j] = j < 3 * n_children ? kNoMin : 0;
  __syncthreads();
  return BoxTable{smem, smem + 3 * n_children};
}
__device__ void close_boxes(bool shared, const BoxTable& local, std::size_t n_children, const BoxTable& global) {
  if (!shared) return;
  __syncthreads();
  for (std::size_t j = threadIdx.x; j < 3 * n_children; j += blockDim.x) {
    if (local.min[j] != kNoMin) atomicMin(&global.min[j], local.min[j]);
    if (local.max[j] != 0) atomicMax(&global.max[j], local.max[j]);
  }
}

// Appends the lanes' values with keep set to out (one atomic a warp; the order among warps
// is not fixed, and nothing downstream depends on it). Every lane calls this.
__device__ void warp_append(bool keep, std::uint32_t value, std::uint32_t* out, u64* count) {
  const unsigned ballot = __ballot_sync(kFullMask, keep);
  if (ballot == 0) return;
  const unsigned lane = threadIdx.x & 31u;
  const int leader = __ffs(ballot) - 1;
  u64 base = 0;
  if (lane == static_cast<unsigned>(leader)) base = atomicAdd(count, static_cast<u64>(__popc(ballot)));
  base = __shfl_sync(kFullMask, base, leader);
  if (keep) out[base + static_cast<u64>(__popc(ballot & ((1u << lane) - 1u)))] = value;
}

// A member's side decided: its slot at the next level, or (its child stops) its node.
__device__ void place(std::uint32_t i, long long child, const std::int32_t* child_row, const std::int32_t* child_index,
                      std::int32_t* slot, std::int32_t* node) {
  const std::int32_t row = child_row[child];
  slot[i] = row;
  if (row < 0) node[i] = child_index[child];
}

__device__ void load_key(const u64* keys, std::size_t n, std::uint32_t i, u64* k) {
  for (int d = 0; d < 3; ++d) k[d] = keys[static_cast<std::size_t>(d) * n + i];
}

// Keys of the wrapped positions (keys[d n + i]), every particle a member of the root (slot
// 0) or placed in node 0, and the block's key box added to box_min, box_max (3 each).
__global__ void keys_kernel(const double* x, const double* y, const double* z, std::size_t n, double box,
                            bool root_splits, u64* keys, std::int32_t* slot, std::int32_t* node, u64* box_min,
                            u64* box_max) {
  u64 lo[3] = {kNoMin, kNoMin, kNoMin}, hi[3] = {0, 0, 0};
  const double* src[3] = {x, y, z};
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    for (int d = 0; d < 3; ++d) {
      double v = src[d][i];
      if (box > 0) v = periodic_wrap_position(v, box);
      const u64 k = top_tree::ordered_bits(v);
      keys[static_cast<std::size_t>(d) * n + i] = k;
      lo[d] = min(lo[d], k);
      hi[d] = max(hi[d], k);
    }
    slot[i] = root_splits ? 0 : -1;
    node[i] = root_splits ? -1 : 0;
  }
  for (int off = 16; off > 0; off >>= 1)
    for (int d = 0; d < 3; ++d) {
      lo[d] = min(lo[d], __shfl_xor_sync(kFullMask, lo[d], off));
      hi[d] = max(hi[d], __shfl_xor_sync(kFullMask, hi[d], off));
    }
  __shared__ u64 s_lo[kWarps][3], s_hi[kWarps][3];
  const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
  if (lane == 0)
    for (int d = 0; d < 3; ++d) s_lo[warp][d] = lo[d], s_hi[warp][d] = hi[d];
  __syncthreads();
  if (threadIdx.x == 0)
    for (int d = 0; d < 3; ++d) {
      u64 a = kNoMin, b = 0;
      for (unsigned w = 0; w < kWarps; ++w) a = min(a, s_lo[w][d]), b = max(b, s_hi[w][d]);
      if (a != kNoMin) atomicMin(&box_min[d], a), atomicMax(&box_max[d], b);
    }
}

// A round's histograms: each candidate of a counted node adds one to its digit's bin (one
// atomic per bin a warp touches).
__global__ void histogram_kernel(PassList p, const u64* keys, std::size_t n, const std::int32_t* slot,
                                 const RoundNode* rn, std::uint32_t* hist) {
  const std::size_t size = pass_size(p);
  const unsigned lane = threadIdx.x & 31u;
  for (std::size_t base = blockIdx.x * static_cast<std::size_t>(blockDim.x) + (threadIdx.x & ~31u); base < size;
       base += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t k = base + lane;
    long long bin = -1;
    if (k < size) {
      const std::uint32_t i = pass_member(p, k);
      const std::int32_t q = slot[i];
      if (q >= 0) {
        const RoundNode r = rn[q];
        if (r.first_bin >= 0)
          bin = static_cast<long long>(r.first_bin) +
                top_tree::round_digit(keys[static_cast<std::size_t>(r.hw) * n + i],
                                      keys[static_cast<std::size_t>(r.lw) * n + i], r);
      }
    }
    const unsigned peers = __match_any_sync(kFullMask, bin);
    if (bin >= 0 && lane == static_cast<unsigned>(__ffs(peers) - 1)) atomicAdd(&hist[bin], static_cast<unsigned>(__popc(peers)));
  }
}

// A round's filter: the candidates left (of nodes not counted, or with the cut's digit in an
// undecided node) appended to out; kFirst: every other member to its child, with its box.
template <bool kFirst>
__global__ void filter_kernel(PassList p, const u64* keys, std::size_t n, std::int32_t* slot, std::int32_t* node,
                              const RoundNode* rn, const std::int32_t* child_row, const std::int32_t* child_index,
                              BoxTable boxes, std::size_t n_children, bool shared_boxes, std::uint32_t* out,
                              u64* out_count) {
  extern __shared__ u64 smem[];
  BoxTable table = boxes;
  if (kFirst) table = open_boxes(shared_boxes, smem, n_children, boxes);
  const std::size_t size = pass_size(p);
  const unsigned lane = threadIdx.x & 31u;
  for (std::size_t base = blockIdx.x * static_cast<std::size_t>(blockDim.x) + (threadIdx.x & ~31u); base < size;
       base += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t k = base + lane;
    bool keep = false;
    long long child = -1;
    std::uint32_t i = 0;
    u64 key[3] = {0, 0, 0};
    if (k < size) {
      i = pass_member(p, k);
      const std::int32_t q = slot[i];
      if (q >= 0) {
        const RoundNode r = rn[q];
        if (r.first_bin < 0) {
          keep = true;
        } else {
          load_key(keys, n, i, key);
          const int dg = top_tree::round_digit(key[r.hw], key[r.lw], r);
          if (dg == r.cut && !r.done) keep = true;
          else if (kFirst) child = 2 * static_cast<long long>(q) + (dg < r.cut ? 0 : 1);
        }
      }
    }
    warp_append(keep, i, out, out_count);
    if (kFirst) {
      if (child >= 0) place(i, child, child_row, child_index, slot, node);
      add_to_boxes(child, key, table);
    }
  }
  if (kFirst) close_boxes(shared_boxes, table, n_children, boxes);
}

// The members of the level (slot >= 0) listed (no round ran: every node at one position).
__global__ void list_members_kernel(const std::int32_t* slot, std::size_t n, std::uint32_t* out, u64* out_count) {
  const unsigned lane = threadIdx.x & 31u;
  for (std::size_t base = blockIdx.x * static_cast<std::size_t>(blockDim.x) + (threadIdx.x & ~31u); base < n;
       base += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t i = base + lane;
    warp_append(i < n && slot[i] >= 0, static_cast<std::uint32_t>(i), out, out_count);
  }
}

__global__ void gather_slots_kernel(const std::uint32_t* list, std::size_t count, const std::int32_t* slot,
                                    std::int32_t* out) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (k < count) out[k] = slot[list[k]];
}

// tie[index[k]] = side[k] for the tied candidates (up: index | side, count each).
__global__ void scatter_ties_kernel(const std::uint32_t* up, std::size_t count, std::uint8_t* tie) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (k < count) tie[up[k]] = static_cast<std::uint8_t>(up[count + k]);
}

// The level's late pass: the members the first round left, to their children by their
// node's threshold (equal: right if settled, else the tie rule's side), with their boxes.
__global__ void late_kernel(PassList p, const u64* keys, std::size_t n, std::int32_t* slot, std::int32_t* node,
                            const LateNode* late, const std::uint8_t* tie, const std::int32_t* child_row,
                            const std::int32_t* child_index, BoxTable boxes, std::size_t n_children,
                            bool shared_boxes) {
  extern __shared__ u64 smem[];
  const BoxTable table = open_boxes(shared_boxes, smem, n_children, boxes);
  const std::size_t size = pass_size(p);
  const unsigned lane = threadIdx.x & 31u;
  for (std::size_t base = blockIdx.x * static_cast<std::size_t>(blockDim.x) + (threadIdx.x & ~31u); base < size;
       base += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t k = base + lane;
    long long child = -1;
    u64 key[3] = {0, 0, 0};
    if (k < size) {
      const std::uint32_t i = pass_member(p, k);
      const std::int32_t q = slot[i];
      if (q >= 0) {
        const LateNode& l = late[q];
        load_key(keys, n, i, key);
        const int c = top_tree::compare_key(key, l.axis, l.cut);
        const int side = c < 0 ? 0 : (c > 0 || l.settled ? 1 : tie[i]);
        child = 2 * static_cast<long long>(q) + side;
        place(i, child, child_row, child_index, slot, node);
      }
    }
    add_to_boxes(child, key, table);
  }
  close_boxes(shared_boxes, table, n_children, boxes);
}

// A build's device arrays and pinned staging, kept from build to build.
struct Arrays {
  int sm_count = 0;
  std::size_t n = 0;
  DeviceArray<u64> keys;                      // x | y | z keys, n each
  DeviceArray<std::int32_t> slot, node;       // per particle
  DeviceArray<std::uint8_t> tie;              // per particle, written for the tied candidates
  // list[0]: the members the first round left (or every member); list[1], list[2]: the
  // later rounds' candidates, in turn. count[k]: their lengths.
  DeviceArray<std::uint32_t> list[3];
  DeviceArray<u64> count;
  DeviceArray<u64> boxes;                     // root: 6; a level's children: 6 a child (min | max)
  DeviceArray<std::int32_t> children;         // child_row | child_index
  DeviceArray<std::uint32_t> hist, tie_up;
  DeviceArray<std::int32_t> cand_slot;
  DeviceArray<RoundNode> rn;
  DeviceArray<LateNode> late;
  // Pinned staging, one array per use (an upload may still be running when the next
  // round's host work begins; each array is rewritten only after a wait that covers it).
  PinnedArray<std::uint32_t> hist_down, cand_down, tie_stage;
  PinnedArray<std::int32_t> slot_down, children_up;
  PinnedArray<u64> box_down, count_down;
  PinnedArray<RoundNode> rn_hist_up, rn_filter_up;
  PinnedArray<LateNode> late_up;

  unsigned grid(std::size_t count) const {
    const std::size_t blocks = (count + kThreads - 1) / kThreads;
    return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(blocks, 8 * static_cast<std::size_t>(sm_count))));
  }
};

// The passes of GlobalTopTree::build on the device (domain/top_tree_passes.hpp).
class DevicePasses final : public TopTreePasses {
 public:
  DevicePasses(Arrays& a, const double* x, const double* y, const double* z, double box,
               cudaStream_t stream, bool with_particle_node)
      : a_(a), x_(x), y_(y), z_(z), box_(box), stream_(stream), with_particle_node_(with_particle_node) {}

  void start(bool root_splits, double* box) override {
    const std::size_t n = a_.n;
    a_.keys.ensure(3 * n);
    a_.slot.ensure(n);
    a_.node.ensure(n);
    a_.tie.ensure(n);
    a_.list[0].ensure(n);
    a_.count.ensure(3);
    a_.boxes.ensure(6);
    a_.count_down.ensure(3);
    a_.box_down.ensure(6);
    ORBIS_CUDA_CHECK(cudaMemsetAsync(a_.boxes.data(), 0xff, 3 * sizeof(u64), stream_));
    ORBIS_CUDA_CHECK(cudaMemsetAsync(a_.boxes.data() + 3, 0, 3 * sizeof(u64), stream_));
    if (n > 0)
      keys_kernel<<<a_.grid(n), kThreads, 0, stream_>>>(x_, y_, z_, n, box_, root_splits, a_.keys.data(),
                                                         a_.slot.data(), a_.node.data(), a_.boxes.data(),
                                                         a_.boxes.data() + 3);
    ORBIS_CUDA_CHECK(cudaGetLastError());
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(a_.box_down.data(), a_.boxes.data(), 6 * sizeof(u64), cudaMemcpyDeviceToHost,
                                     stream_));
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    boxes_from_keys(a_.box_down.data(), 1, box);
  }

  void begin_level(const std::vector<std::int32_t>& child_row, const std::vector<std::int32_t>& child_index) override {
    n_children_ = child_row.size();
    a_.children.ensure(2 * n_children_);
    a_.children_up.ensure(2 * n_children_);
    std::copy(child_row.begin(), child_row.end(), a_.children_up.data());
    std::copy(child_index.begin(), child_index.end(), a_.children_up.data() + n_children_);
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(a_.children.data(), a_.children_up.data(), 2 * n_children_ * sizeof(std::int32_t),
                                     cudaMemcpyHostToDevice, stream_));
    a_.boxes.ensure(6 * n_children_);
    ORBIS_CUDA_CHECK(cudaMemsetAsync(a_.boxes.data(), 0xff, 3 * n_children_ * sizeof(u64), stream_));
    ORBIS_CUDA_CHECK(cudaMemsetAsync(a_.boxes.data() + 3 * n_children_, 0, 3 * n_children_ * sizeof(u64), stream_));
    current_ = -1;
    bound_ = a_.n;
  }

  std::uint32_t* histogram(bool first, const std::vector<RoundNode>& rn, std::size_t bins) override {
    a_.hist.ensure(bins);
    a_.hist_down.ensure(bins);
    upload_rounds(rn, a_.rn_hist_up);
    ORBIS_CUDA_CHECK(cudaMemsetAsync(a_.hist.data(), 0, bins * sizeof(std::uint32_t), stream_));
    const PassList p = members(first);
    histogram_kernel<<<a_.grid(first ? a_.n : bound_), kThreads, 0, stream_>>>(p, a_.keys.data(), a_.n, a_.slot.data(),
                                                                               a_.rn.data(), a_.hist.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(a_.hist_down.data(), a_.hist.data(), bins * sizeof(std::uint32_t),
                                     cudaMemcpyDeviceToHost, stream_));
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(a_.count_down.data(), a_.count.data(), 3 * sizeof(u64), cudaMemcpyDeviceToHost,
                                     stream_));
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (!first) bound_ = static_cast<std::size_t>(a_.count_down.data()[current_]);   // written by the last filter
    return a_.hist_down.data();   // page-locked: the build sums it over the ranks in place
  }

  void filter(bool first, const std::vector<RoundNode>& rn) override {
    upload_rounds(rn, a_.rn_filter_up);
    const PassList p = members(first);
    const int target = first ? 0 : (current_ == 1 ? 2 : 1);
    if (!first) a_.list[target].ensure(std::max<std::size_t>(bound_, 1));
    ORBIS_CUDA_CHECK(cudaMemsetAsync(a_.count.data() + target, 0, sizeof(u64), stream_));
    const unsigned blocks = a_.grid(first ? a_.n : bound_);
    if (first) {
      const bool shared = n_children_ <= kSharedChildren;
      filter_kernel<true><<<blocks, kThreads, shared ? 6 * n_children_ * sizeof(u64) : 0, stream_>>>(
          p, a_.keys.data(), a_.n, a_.slot.data(), a_.node.data(), a_.rn.data(), a_.children.data(),
          a_.children.data() + n_children_, child_boxes(), n_children_, shared, a_.list[target].data(),
          a_.count.data() + target);
    } else {
      filter_kernel<false><<<blocks, kThreads, 0, stream_>>>(
          p, a_.keys.data(), a_.n, a_.slot.data(), a_.node.data(), a_.rn.data(), a_.children.data(),
          a_.children.data() + n_children_, child_boxes(), n_children_, false, a_.list[target].data(),
          a_.count.data() + target);
    }
    ORBIS_CUDA_CHECK(cudaGetLastError());
    current_ = target;
    if (first) bound_ = a_.n;   // known at the next round's wait
  }

  void candidates(bool any_round, std::vector<std::uint32_t>& index, std::vector<std::int32_t>& slot) override {
    if (!any_round) {   // every member: the late pass reads them all, and all are tied
      ORBIS_CUDA_CHECK(cudaMemsetAsync(a_.count.data(), 0, sizeof(u64), stream_));
      list_members_kernel<<<a_.grid(a_.n), kThreads, 0, stream_>>>(a_.slot.data(), a_.n, a_.list[0].data(),
                                                                    a_.count.data());
      ORBIS_CUDA_CHECK(cudaGetLastError());
      current_ = 0;
    }
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(a_.count_down.data(), a_.count.data(), 3 * sizeof(u64), cudaMemcpyDeviceToHost,
                                     stream_));
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    late_count_ = static_cast<std::size_t>(a_.count_down.data()[0]);
    const std::size_t m = static_cast<std::size_t>(a_.count_down.data()[current_]);
    index.clear();
    slot.clear();
    if (m == 0) return;
    a_.cand_slot.ensure(m);
    a_.cand_down.ensure(m);
    a_.slot_down.ensure(m);
    gather_slots_kernel<<<static_cast<unsigned>((m + kThreads - 1) / kThreads), kThreads, 0, stream_>>>(
        a_.list[current_].data(), m, a_.slot.data(), a_.cand_slot.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(a_.cand_down.data(), a_.list[current_].data(), m * sizeof(std::uint32_t),
                                     cudaMemcpyDeviceToHost, stream_));
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(a_.slot_down.data(), a_.cand_slot.data(), m * sizeof(std::int32_t),
                                     cudaMemcpyDeviceToHost, stream_));
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    // Ascending, as the host's lists (the device appends in no fixed order).
    std::vector<std::size_t> order(m);
    std::iota(order.begin(), order.end(), std::size_t{0});
    const std::uint32_t* id = a_.cand_down.data();
    std::sort(order.begin(), order.end(), [id](std::size_t a, std::size_t b) { return id[a] < id[b]; });
    index.resize(m);
    slot.resize(m);
    for (std::size_t k = 0; k < m; ++k) {
      index[k] = id[order[k]];
      slot[k] = a_.slot_down.data()[order[k]];
    }
  }

  void finish_level(bool any_round, const std::vector<int>& axis, const std::vector<std::uint64_t>& cut_key,
                    const std::vector<int>& settled, const std::vector<std::uint32_t>& tied,
                    const std::vector<std::uint8_t>& tie_side, std::vector<double>& box) override {
    (void)any_round;   // candidates() listed every member in list 0 when no round ran
    const std::size_t s = axis.size();
    a_.late.ensure(s);
    a_.late_up.ensure(s);
    for (std::size_t q = 0; q < s; ++q) {
      LateNode l;
      for (int w = 0; w < 3; ++w) l.cut[w] = cut_key[3 * q + static_cast<std::size_t>(w)];
      l.axis = axis[q];
      l.settled = settled[q];
      std::memcpy(a_.late_up.data() + q, &l, sizeof l);
    }
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(a_.late.data(), a_.late_up.data(), s * sizeof(LateNode), cudaMemcpyHostToDevice,
                                     stream_));
    const std::size_t m = tied.size();
    if (m > 0) {
      a_.tie_up.ensure(2 * m);
      a_.tie_stage.ensure(2 * m);
      std::uint32_t* up = a_.tie_stage.data();
      for (std::size_t k = 0; k < m; ++k) up[k] = tied[k], up[m + k] = tie_side[k];
      ORBIS_CUDA_CHECK(cudaMemcpyAsync(a_.tie_up.data(), up, 2 * m * sizeof(std::uint32_t), cudaMemcpyHostToDevice,
                                       stream_));
      scatter_ties_kernel<<<static_cast<unsigned>((m + kThreads - 1) / kThreads), kThreads, 0, stream_>>>(
          a_.tie_up.data(), m, a_.tie.data());
      ORBIS_CUDA_CHECK(cudaGetLastError());
    }
    const bool shared = n_children_ <= kSharedChildren;
    const PassList p{a_.list[0].data(), a_.count.data(), a_.n};
    late_kernel<<<a_.grid(late_count_), kThreads, shared ? 6 * n_children_ * sizeof(u64) : 0, stream_>>>(
        p, a_.keys.data(), a_.n, a_.slot.data(), a_.node.data(), a_.late.data(), a_.tie.data(), a_.children.data(),
        a_.children.data() + n_children_, child_boxes(), n_children_, shared);
    ORBIS_CUDA_CHECK(cudaGetLastError());
    a_.box_down.ensure(6 * n_children_);
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(a_.box_down.data(), a_.boxes.data(), 6 * n_children_ * sizeof(u64),
                                     cudaMemcpyDeviceToHost, stream_));
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    box.resize(6 * n_children_);
    boxes_from_keys(a_.box_down.data(), n_children_, box.data());
  }

  std::vector<std::int32_t> take_particle_node() override {
    std::vector<std::int32_t> node;
    if (!with_particle_node_ || a_.n == 0) return node;
    node.resize(a_.n);
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(node.data(), a_.node.data(), a_.n * sizeof(std::int32_t), cudaMemcpyDeviceToHost,
                                     stream_));
    ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return node;
  }

 private:
  // The members a round reads: every particle (the first round: those with a slot), or the
  // current candidates.
  PassList members(bool first) const {
    if (first) return PassList{nullptr, nullptr, a_.n};
    return PassList{a_.list[current_].data(), a_.count.data() + current_, a_.n};
  }
  BoxTable child_boxes() const { return BoxTable{a_.boxes.data(), a_.boxes.data() + 3 * n_children_}; }
  void upload_rounds(const std::vector<RoundNode>& rn, PinnedArray<RoundNode>& stage) {
    a_.rn.ensure(rn.size());
    stage.ensure(rn.size());
    std::memcpy(static_cast<void*>(stage.data()), rn.data(), rn.size() * sizeof(RoundNode));
    ORBIS_CUDA_CHECK(cudaMemcpyAsync(a_.rn.data(), stage.data(), rn.size() * sizeof(RoundNode), cudaMemcpyHostToDevice,
                                     stream_));
  }
  // count boxes as key minima | maxima (3 count each) to the build's layout: per box lo,
  // then -hi, +inf for a box without members (as the host's min reduction leaves it).
  static void boxes_from_keys(const u64* keys, std::size_t count, double* box) {
    for (std::size_t c = 0; c < count; ++c)
      for (std::size_t d = 0; d < 3; ++d) {
        const u64 lo = keys[3 * c + d], hi = keys[3 * count + 3 * c + d];
        box[6 * c + d] = lo == kNoMin ? HUGE_VAL : top_tree::from_ordered(lo);
        box[6 * c + 3 + d] = lo == kNoMin ? HUGE_VAL : -top_tree::from_ordered(hi);
      }
  }

  Arrays& a_;
  const double *x_, *y_, *z_;
  double box_;
  cudaStream_t stream_;
  bool with_particle_node_;
  std::size_t n_children_ = 0;
  int current_ = -1;          // the list holding the candidates (-1: every member)
  std::size_t bound_ = 0;     // at least the current candidates' count
  std::size_t late_count_ = 0;
};

}  // namespace

struct DeviceGlobalTopTree::Impl {
  Arrays a;
};

DeviceGlobalTopTree::DeviceGlobalTopTree() : impl_(std::make_unique<Impl>()) {}
DeviceGlobalTopTree::~DeviceGlobalTopTree() = default;

GlobalTopTree DeviceGlobalTopTree::build(const double* x, const double* y, const double* z, std::size_t n,
                                         double box_mpc_h, int max_leaf, int depth, const Comm& comm,
                                         cudaStream_t stream, bool with_particle_node) {
  Arrays& a = impl_->a;
  if (a.sm_count == 0) {
    int device = 0;
    ORBIS_CUDA_CHECK(cudaGetDevice(&device));
    ORBIS_CUDA_CHECK(cudaDeviceGetAttribute(&a.sm_count, cudaDevAttrMultiProcessorCount, device));
  }
  a.n = n;
  const AllocationStream on(stream);
  DevicePasses passes(a, x, y, z, box_mpc_h, stream, with_particle_node);
  return GlobalTopTree::build(passes, n, max_leaf, depth, comm);
}

const std::int32_t* DeviceGlobalTopTree::device_particle_node() const { return impl_->a.node.data(); }

std::size_t DeviceGlobalTopTree::device_bytes(std::size_t n) {
  return n * (3 * sizeof(u64) + 2 * sizeof(std::int32_t) + sizeof(std::uint8_t) + sizeof(std::uint32_t));
}

GlobalTopTree global_top_tree_cuda(const double* x, const double* y, const double* z, std::size_t n,
                                   double box_mpc_h, int max_leaf, int depth, const Comm& comm, cudaStream_t stream) {
  DeviceGlobalTopTree tree;
  return tree.build(x, y, z, n, box_mpc_h, max_leaf, depth, comm, stream);
}

}  // namespace orbis::gpu
