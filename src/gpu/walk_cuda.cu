#include "gpu/walk_cuda.cuh"

#include <algorithm>

#include <cstring>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "core/error.hpp"
#include "fmm/p2p_prepare.hpp"
#include "fmm/short_range.hpp"
#include "fmm/walk_pair.hpp"
#include "gpu/cub_counts.cuh"

namespace orbis::gpu {
static_assert(DeviceWalk::kMaxLaunchEntries == kMaxWalkLaunchEntries, "the planning check assumes the walk's limit");
namespace {

constexpr unsigned kBlock = 256;

unsigned blocks_for(std::size_t n) { return static_cast<unsigned>((n + kBlock - 1) / kBlock); }

// A frontier pair in one word: target in the low half, source in the high half.
__host__ __device__ std::uint64_t pack_pair(std::int32_t t, std::int32_t s) {
  return static_cast<std::uint32_t>(t) | (static_cast<std::uint64_t>(static_cast<std::uint32_t>(s)) << 32);
}

struct AddCounts {
  __host__ __device__ WalkCounts operator()(const WalkCounts& a, const WalkCounts& b) const {
    return WalkCounts{a.m2l + b.m2l, a.p2p + b.p2p, a.mutual + b.mutual, a.children + b.children,
                      a.leaf_cell + b.leaf_cell};
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
  __device__ void p2l_m2p(bool) { ++c.leaf_cell; }
  __device__ void child(std::int32_t, std::int32_t) { ++c.children; }
};

// The pair's outputs written from its scanned offsets: M2L as the CPU emits it, P2P in
// DeviceGrouping's upload format, a leaf-cell pair's P2L and M2P tasks at the same place of
// their two arrays (as the CPU's lists.p2l and lists.m2p), child pairs into the next frontier.
struct WriteSink {
  std::int32_t t, s;
  const WalkNode* nodes;
  std::uint32_t* p2p_t;
  std::uint32_t* p2p_s;
  InteractionTask* m2l_out;
  InteractionTask* p2l_out;
  InteractionTask* m2p_out;
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
  __device__ void p2l_m2p(bool leaf_is_target) {
    const std::int32_t leaf_node = leaf_is_target ? t : s, cell = leaf_is_target ? s : t;
    const auto leaf = static_cast<std::uint32_t>(nodes[leaf_node].leaf);
    InteractionTask task;   // image 0 (vacuum)
    task.target = static_cast<std::uint32_t>(cell);
    task.source = leaf;
    p2l_out[at.leaf_cell] = task;
    task.target = leaf;
    task.source = static_cast<std::uint32_t>(cell);
    m2p_out[at.leaf_cell] = task;
    ++at.leaf_cell;
  }
  __device__ void child(std::int32_t a, std::int32_t b) { next[at.children++] = pack_pair(a, b); }
};

// A kernel's pair walks `depth` levels of its subtree of pairs itself (depth first, in a
// fixed order), its pairs at that depth going to the next frontier: a small frontier then
// takes one launch for several levels. Both kernels walk the same way, so the counts match
// the writes.
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
  __device__ void p2l_m2p(bool leaf_is_target) { sink.p2l_m2p(leaf_is_target); }
  __device__ void child(std::int32_t a, std::int32_t b) {
    if (level + 1 < depth) {
      stack_t[top] = a, stack_s[top] = b, stack_level[top] = level + 1;
      ++top;
    } else {
      sink.child(a, b);
    }
  }
};

// A pair of two inactive nodes (and so everything below it) contributes to no active target.
__device__ __forceinline__ bool dropped(const std::uint8_t* active, std::int32_t t, std::int32_t s) {
  return active && !active[t] && !active[s];
}

template <typename Sink>
__device__ void walk_from(const WalkNode* nodes, std::uint64_t pair, const WalkPairParams& p, int depth,
                          const std::uint8_t* active, Sink& sink) {
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
    if (dropped(active, t, s)) continue;
    sink.t = t;
    sink.s = s;
    DeeperSink<Sink> deeper{sink, stack_level[top], depth, stack_t, stack_s, stack_level, top};
    walk_pair(t, s, nodes[t], nodes[s], p, deeper);
  }
}

// The walk's counters, on the device (the host reads them once, after the last launch).
// Frontier sizes alternate between n[0] and n[1] with the launch's parity. overflow: 1 when
// an output buffer was too small (the walk is run again with larger ones), kCountLimit when
// one launch's outputs exceed what its 32-bit offsets hold (the walk stops: a clear error).
constexpr std::uint32_t kCountLimit = 2;
struct WalkState {
  std::uint32_t n[2];
  std::uint32_t overflow, launches;
  unsigned long long launch_p2p, launch_m2l, launch_children;   // the launch that hit kCountLimit
  unsigned long long p2p, mutual, m2l, pairs;   // totals of the levels done
  unsigned long long p2p_base, m2l_base;        // where this launch's outputs start
  unsigned long long need_p2p, need_m2l, need_frontier;   // the most each buffer was asked for
  unsigned long long leaf_cell, leaf_cell_base, need_leaf_cell, launch_leaf_cell;   // leaf-cell pairs, likewise
};

// Buffer capacities, and the most one launch may emit (DeviceWalk::kMaxLaunchEntries/Pairs).
struct WalkLimits {
  unsigned long long p2p, m2l, frontier, leaf_cell;
  unsigned long long launch_entries, launch_pairs;
};

constexpr int kTile = 256;           // pairs per tile = threads per block of the pair kernels
constexpr int kScanThreads = 1024;   // the one block that scans the tile sums
using TileReduce = cub::BlockReduce<WalkCounts, kTile>;
using TileScan = cub::BlockScan<WalkCounts, kTile>;
using SumScan = cub::BlockScan<WalkCounts, kScanThreads>;
constexpr WalkCounts kZero{0, 0, 0, 0, 0};

__device__ __forceinline__ WalkCounts add(const WalkCounts& a, const WalkCounts& b) { return AddCounts{}(a, b); }

__global__ void init_walk(WalkState* st, std::uint64_t* frontier, bool has_root) {
  *st = WalkState{};
  st->n[0] = has_root ? 1 : 0;
  frontier[0] = pack_pair(0, 0);
}

// Per tile of the frontier: the sum of its pairs' outputs.
__global__ void __launch_bounds__(kTile) count_tiles(const WalkNode* nodes, const std::uint64_t* pairs,
                                                     const WalkState* st, int parity, WalkPairParams p, int depth,
                                                     const std::uint8_t* active, WalkCounts* tiles) {
  __shared__ typename TileReduce::TempStorage temp;
  if (st->overflow) return;
  const std::uint32_t n = st->n[parity];
  const std::uint32_t n_tiles = (n + kTile - 1) / kTile;
  for (std::uint32_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
    const std::uint32_t i = tile * kTile + threadIdx.x;
    CountSink sink{0, 0, kZero};
    if (i < n) walk_from(nodes, pairs[i], p, depth, active, sink);
    const WalkCounts sum = TileReduce(temp).Reduce(sink.c, AddCounts{});
    if (threadIdx.x == 0) tiles[tile] = sum;
    __syncthreads();   // temp is reused by the next tile
  }
}

// One block: the tile sums become their exclusive scan; the level's totals advance the
// counters and size the next frontier, or, when a buffer would overflow, stop the walk.
__global__ void __launch_bounds__(kScanThreads) scan_tiles(WalkState* st, int parity, WalkCounts* tiles,
                                                           WalkLimits limits) {
  __shared__ typename SumScan::TempStorage temp;
  __shared__ WalkCounts carry;
  __shared__ unsigned long long wide[4];   // the launch's totals in 64 bits: carry may wrap
  if (st->overflow) return;
  const std::uint32_t n = st->n[parity];
  const std::uint32_t n_tiles = (n + kTile - 1) / kTile;
  if (threadIdx.x == 0) {
    carry = kZero;
    wide[0] = wide[1] = wide[2] = wide[3] = 0;
  }
  __syncthreads();
  for (std::uint32_t base = 0; base < n_tiles; base += kScanThreads) {
    const std::uint32_t k = base + threadIdx.x;
    const WalkCounts v = k < n_tiles ? tiles[k] : kZero;
    WalkCounts before, total;
    SumScan(temp).ExclusiveScan(v, before, kZero, AddCounts{}, total);
    const WalkCounts c = carry;
    if (k < n_tiles) tiles[k] = add(c, before);
    __syncthreads();   // everyone has read carry
    if (threadIdx.x == 0) {
      carry = add(c, total);
      wide[0] += total.p2p;
      wide[1] += total.m2l;
      wide[2] += total.children;
      wide[3] += total.leaf_cell;
    }
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  const WalkCounts tot = carry;
  if (wide[0] > limits.launch_entries || wide[1] > limits.launch_entries || wide[2] > limits.launch_pairs ||
      wide[3] > limits.launch_entries) {
    st->overflow = kCountLimit;
    st->launch_p2p = wide[0];
    st->launch_m2l = wide[1];
    st->launch_children = wide[2];
    st->launch_leaf_cell = wide[3];
    return;
  }
  st->need_p2p = st->p2p + tot.p2p;
  st->need_m2l = st->m2l + tot.m2l;
  st->need_leaf_cell = st->leaf_cell + tot.leaf_cell;
  st->need_frontier = max(st->need_frontier, static_cast<unsigned long long>(tot.children));
  if (st->need_p2p > limits.p2p || st->need_m2l > limits.m2l || tot.children > limits.frontier ||
      st->need_leaf_cell > limits.leaf_cell) {
    st->overflow = 1;
    return;
  }
  st->p2p_base = st->p2p;
  st->m2l_base = st->m2l;
  st->leaf_cell_base = st->leaf_cell;
  st->p2p += tot.p2p;
  st->mutual += tot.mutual;
  st->m2l += tot.m2l;
  st->leaf_cell += tot.leaf_cell;
  st->pairs += n;
  st->launches += n > 0 ? 1 : 0;
  st->n[parity ^ 1] = tot.children;
}

// The tile's pairs walked again, their outputs written at the scanned offsets.
__global__ void __launch_bounds__(kTile) write_tiles(const WalkNode* nodes, const std::uint64_t* pairs,
                                                     const WalkState* st, int parity, WalkPairParams p, int depth,
                                                     const std::uint8_t* active, const WalkCounts* tiles,
                                                     std::uint32_t* p2p_t, std::uint32_t* p2p_s,
                                                     InteractionTask* m2l, InteractionTask* p2l, InteractionTask* m2p,
                                                     std::uint64_t* next) {
  __shared__ typename TileScan::TempStorage temp;
  if (st->overflow) return;
  const std::uint32_t n = st->n[parity];
  const std::uint32_t n_tiles = (n + kTile - 1) / kTile;
  p2p_t += st->p2p_base;
  p2p_s += st->p2p_base;
  m2l += st->m2l_base;
  p2l += st->leaf_cell_base;
  m2p += st->leaf_cell_base;
  for (std::uint32_t tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
    const std::uint32_t i = tile * kTile + threadIdx.x;
    CountSink count{0, 0, kZero};
    if (i < n) walk_from(nodes, pairs[i], p, depth, active, count);
    WalkCounts at;
    TileScan(temp).ExclusiveScan(count.c, at, kZero, AddCounts{});
    if (i < n) {
      WriteSink sink{0, 0, nodes, p2p_t, p2p_s, m2l, p2l, m2p, next, add(tiles[tile], at)};
      walk_from(nodes, pairs[i], p, depth, active, sink);
    }
    __syncthreads();
  }
}

// Levels per launch: several while the frontier is small (the first levels), then one (a
// thread's deeper subtree would leave its warp's other lanes idle). A fixed schedule, the
// same for every walk of a tree, so a walk with active flags keeps the full walk's order.
constexpr int kSchedule[] = {kMaxDepth, kMaxDepth, 2, 2};
int depth_of_launch(int k) { return k < 4 ? kSchedule[k] : 1; }

// Pair levels a tree of depth D (its longest root-to-leaf path) can have: a pair at level L
// has split L nodes between its two sides, so L <= 2 D (D + 1 for safety).
int pair_levels_of_depth(int depth) { return 2 * (depth + 1) + 1; }

// The same for a built tree of n_leaves: the shape (n/2, n - n/2 splits) keeps every leaf
// within one level of D <= ceil(log2(n_leaves)).
int pair_levels(std::size_t n_leaves) {
  int d = 0;
  while ((std::size_t{1} << d) < n_leaves) ++d;
  return pair_levels_of_depth(d);
}

__global__ void m2l_keys(const InteractionTask* tasks, std::size_t n, std::uint32_t* keys) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) keys[i] = tasks[i].target;
}

// offsets[k] = the first sorted task of target >= k (k = 0 .. n_nodes), by binary search.
__global__ void m2l_group_offsets(const std::uint32_t* keys, std::size_t n, std::uint32_t n_nodes,
                                  std::uint64_t* offsets) {
  const std::uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k > n_nodes) return;
  std::size_t lo = 0, hi = n;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
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
  host_state_.ensure(sizeof(WalkState));
  state_.ensure(sizeof(WalkState));
  int device = 0;
  ORBIS_CUDA_CHECK(cudaGetDevice(&device));
  ORBIS_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device));
}

DeviceWalk::~DeviceWalk() {
  if (start_) cudaEventDestroy(start_);
  if (stop_) cudaEventDestroy(stop_);
}

std::size_t DeviceWalk::bytes_for(std::size_t p2p_entries, std::size_t m2l_tasks, std::size_t frontier,
                                  std::size_t n_nodes) {
  const std::size_t tiles = frontier / kTile + 1;
  // P2P entries (two words), M2L tasks (raw and sorted, two key arrays), two frontiers,
  // tile sums, offsets per node, and the sort's temporary storage (~ the keys again).
  return p2p_entries * 8 + m2l_tasks * (2 * sizeof(InteractionTask) + 12) + frontier * 16 +
         tiles * sizeof(WalkCounts) + (n_nodes + 1) * 8 + (std::size_t{1} << 20);
}

std::size_t DeviceWalk::held_bytes() const {
  return (p2p_t_.capacity() + p2p_s_.capacity() + m2l_keys_[0].capacity() + m2l_keys_[1].capacity()) * 4 +
         (m2l_raw_.capacity() + m2l_values_.capacity()) * sizeof(InteractionTask) +
         (frontier_[0].capacity() + frontier_[1].capacity() + m2l_offsets_.capacity()) * 8 +
         tiles_.capacity() * sizeof(WalkCounts) + temp_.capacity() + state_.capacity() +
         (p2l_raw_.capacity() + m2p_raw_.capacity() + p2l_values_.capacity() + m2p_values_.capacity()) *
             sizeof(InteractionTask) +
         (p2l_offsets_.capacity() + m2p_offsets_.capacity()) * 8;
}

bool DeviceWalk::attempt(const WalkNode* nodes, std::size_t n_nodes, std::size_t n_leaves,
                         const WalkPairParams& params, const std::uint8_t* node_active, cudaStream_t stream) {
  // capacity_ has its own headroom (run()).
  frontier_[0].ensure_exact(std::max<std::size_t>(capacity_.frontier, 1));
  frontier_[1].ensure_exact(std::max<std::size_t>(capacity_.frontier, 1));
  p2p_t_.ensure_exact(std::max<std::size_t>(capacity_.p2p, 1));
  p2p_s_.ensure_exact(std::max<std::size_t>(capacity_.p2p, 1));
  m2l_raw_.ensure_exact(std::max<std::size_t>(capacity_.m2l, 1));
  p2l_raw_.ensure_exact(std::max<std::size_t>(capacity_.leaf_cell, 1));
  m2p_raw_.ensure_exact(std::max<std::size_t>(capacity_.leaf_cell, 1));
  // What the arrays hold now (ensure rounds up): the limits the scan checks.
  const WalkLimits limits{std::min(p2p_t_.capacity(), p2p_s_.capacity()), m2l_raw_.capacity(),
                          std::min(frontier_[0].capacity(), frontier_[1].capacity()),
                          std::min(p2l_raw_.capacity(), m2p_raw_.capacity()),
                          std::min<std::uint64_t>(max_launch_outputs_, kMaxLaunchEntries),
                          std::min<std::uint64_t>(max_launch_outputs_, kMaxLaunchPairs)};
  tiles_.ensure(limits.frontier / kTile + 1);
  auto* st = reinterpret_cast<WalkState*>(state_.data());
  init_walk<<<1, 1, 0, stream>>>(st, frontier_[0].data(), n_nodes > 0);
  ORBIS_CUDA_CHECK(cudaGetLastError());
  // Persistent blocks over the tiles: enough to fill the GPU, no more than there can be tiles.
  const auto grid = static_cast<unsigned>(
      std::max<std::size_t>(1, std::min<std::size_t>(limits.frontier / kTile + 1, 8 * static_cast<std::size_t>(sm_count_))));
  const int levels = pair_levels_;
  int covered = 0, k = 0;
  for (; covered < levels; ++k) {
    const int depth = depth_of_launch(k), parity = k & 1;
    covered += depth;
    count_tiles<<<grid, kTile, 0, stream>>>(nodes, frontier_[parity].data(), st, parity, params, depth, node_active,
                                            tiles_.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    scan_tiles<<<1, kScanThreads, 0, stream>>>(st, parity, tiles_.data(), limits);
    ORBIS_CUDA_CHECK(cudaGetLastError());
    write_tiles<<<grid, kTile, 0, stream>>>(nodes, frontier_[parity].data(), st, parity, params, depth, node_active,
                                            tiles_.data(), p2p_t_.data(), p2p_s_.data(), m2l_raw_.data(),
                                            p2l_raw_.data(), m2p_raw_.data(), frontier_[parity ^ 1].data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  // The one host wait of the walk: its totals.
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(host_state_.data(), st, sizeof(WalkState), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  WalkState out;
  std::memcpy(&out, host_state_.data(), sizeof(WalkState));
  need_.p2p = std::max<std::size_t>(need_.p2p, out.need_p2p);
  need_.m2l = std::max<std::size_t>(need_.m2l, out.need_m2l);
  need_.frontier = std::max<std::size_t>(need_.frontier, out.need_frontier);
  need_.leaf_cell = std::max<std::size_t>(need_.leaf_cell, out.need_leaf_cell);
  if (out.overflow == kCountLimit)
    fail("device walk: one launch of the walk emits {} P2P entries, {} M2L tasks, {} leaf-cell pairs and {} node "
         "pairs, but its 32-bit offsets hold at most {} entries or tasks and {} pairs: a larger [gravity] max_leaf "
         "(fewer leaves), a smaller [gravity] r_cut_over_rs, fewer particles per GPU, or [gpu] backend = \"cpu\"",
         out.launch_p2p, out.launch_m2l, out.launch_leaf_cell, out.launch_children, limits.launch_entries,
         limits.launch_pairs);
  if (out.overflow) return false;
  if (out.n[k & 1] != 0)   // the frontier the last launch left
    fail("device walk: pairs left after {} pair levels (the tree is deeper than its {} leaves or its depth "
         "allow)", levels, n_leaves);
  p2p_entries_ = out.p2p;
  p2p_mutual_ = out.mutual;
  m2l_count_ = out.m2l;
  leaf_cell_count_ = out.leaf_cell;
  pairs_tested_ = out.pairs;
  levels_ = static_cast<int>(out.launches);
  return true;
}

void DeviceWalk::run(const WalkNode* nodes, std::size_t n_nodes, std::size_t n_leaves,
                     const WalkSettings& settings, cudaStream_t stream, const std::uint8_t* node_active,
                     int tree_depth) {
  check_walk_settings(settings);
  pair_levels_ = tree_depth >= 0 ? pair_levels_of_depth(tree_depth) : pair_levels(n_leaves);
  check_packed_leaves(n_leaves, "device walk");
  if (n_nodes >= (std::size_t{1} << 31)) fail("device walk: {} nodes exceed the pair format", n_nodes);
  const WalkPairParams params = walk_pair_params(settings);
  n_nodes_ = n_nodes;
  n_leaves_ = n_leaves;
  p2p_entries_ = p2p_mutual_ = m2l_count_ = leaf_cell_count_ = pairs_tested_ = 0;
  levels_ = reruns_ = 0;
  ORBIS_CUDA_CHECK(cudaEventRecord(start_, stream));
  // First sizes: a guess from the tree for a run's first walk, then what walks needed so far.
  capacity_.p2p = std::max({capacity_.p2p, 32 * n_leaves, need_.p2p + need_.p2p / 4});
  capacity_.m2l = std::max({capacity_.m2l, 2 * n_nodes, need_.m2l + need_.m2l / 4});
  capacity_.frontier = std::max({capacity_.frontier, 2 * n_nodes, need_.frontier + need_.frontier / 4});
  // Leaf-cell pairs (vacuum only): none in a periodic walk.
  const bool leaf_cell = !settings.periodic && settings.leaf_cell;
  capacity_.leaf_cell = std::max({capacity_.leaf_cell, leaf_cell ? 4 * n_leaves : 0, need_.leaf_cell + need_.leaf_cell / 4});
  while (!attempt(nodes, n_nodes, n_leaves, params, node_active, stream)) {
    // Too small: grow what overflowed (at least doubled) and walk again.
    ++reruns_;
    auto grow = [](std::size_t cap, std::size_t need) { return need > cap ? std::max(2 * cap, need + need / 4) : cap; };
    capacity_.p2p = grow(capacity_.p2p, need_.p2p);
    capacity_.m2l = grow(capacity_.m2l, need_.m2l);
    capacity_.frontier = grow(capacity_.frontier, need_.frontier);
    capacity_.leaf_cell = grow(capacity_.leaf_cell, need_.leaf_cell);
  }
  group_m2l(n_nodes, stream);
  group_leaf_cell(n_nodes, n_leaves, stream);
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
    m2l_keys<<<blocks_for(n), kBlock, 0, stream>>>(m2l_raw_.data(), n, m2l_keys_[0].data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    const int bits = key_bits(n_nodes);
    temp_.ensure(radix_sort_pairs_copy_bytes<std::uint32_t, InteractionTask>(n, 0, bits, max_cub_items_));
    radix_sort_pairs_copy(temp_.data(), temp_.capacity(), m2l_keys_[0].data(), m2l_keys_[1].data(),
                          static_cast<const InteractionTask*>(m2l_raw_.data()), m2l_values_.data(), n, 0, bits,
                          stream, max_cub_items_);
  }
  m2l_group_offsets<<<blocks_for(n_nodes + 1), kBlock, 0, stream>>>(
      m2l_keys_[1].data(), n, static_cast<std::uint32_t>(n_nodes), m2l_offsets_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

// The leaf-cell pairs' P2L tasks grouped by target node and M2P tasks by target leaf, as
// M2L's (a stable sort by target: each target's tasks in walk order).
void DeviceWalk::group_leaf_cell(std::size_t n_nodes, std::size_t n_leaves, cudaStream_t stream) {
  const std::size_t n = leaf_cell_count_;
  if (n == 0) return;   // none (a periodic walk): no arrays, nothing to read
  p2l_offsets_.ensure(n_nodes + 1);
  m2p_offsets_.ensure(n_leaves + 1);
  for (auto& k : m2l_keys_) k.ensure(std::max<std::size_t>(n, 1));
  p2l_values_.ensure(std::max<std::size_t>(n, 1));
  m2p_values_.ensure(std::max<std::size_t>(n, 1));
  const struct {
    const InteractionTask* raw;
    InteractionTask* sorted;
    std::uint64_t* offsets;
    std::size_t n_targets;
  } lists[2] = {{p2l_raw_.data(), p2l_values_.data(), p2l_offsets_.data(), n_nodes},
                {m2p_raw_.data(), m2p_values_.data(), m2p_offsets_.data(), n_leaves}};
  for (const auto& list : lists) {
    if (n > 0) {
      m2l_keys<<<blocks_for(n), kBlock, 0, stream>>>(list.raw, n, m2l_keys_[0].data());
      ORBIS_CUDA_CHECK(cudaGetLastError());
      const int bits = key_bits(list.n_targets);
      temp_.ensure(radix_sort_pairs_copy_bytes<std::uint32_t, InteractionTask>(n, 0, bits, max_cub_items_));
      radix_sort_pairs_copy(temp_.data(), temp_.capacity(), m2l_keys_[0].data(), m2l_keys_[1].data(), list.raw,
                            list.sorted, n, 0, bits, stream, max_cub_items_);
    }
    m2l_group_offsets<<<blocks_for(list.n_targets + 1), kBlock, 0, stream>>>(
        m2l_keys_[1].data(), n, static_cast<std::uint32_t>(list.n_targets), list.offsets);
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
}

void DeviceWalk::release_work() {
  for (auto& f : frontier_) f.release();
  tiles_.release();
  m2l_raw_.release();
  p2l_raw_.release();
  m2p_raw_.release();
  for (auto& k : m2l_keys_) k.release();
  temp_.release();
}

void DeviceWalk::release_outputs() {
  p2p_t_.release();
  p2p_s_.release();
  m2l_values_.release();
  m2l_offsets_.release();
  m2l_sorted_ = nullptr;
  p2l_values_.release();
  m2p_values_.release();
  p2l_offsets_.release();
  m2p_offsets_.release();
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

void DeviceWalk::download_leaf_cell(std::vector<InteractionTask>& p2l, std::vector<std::size_t>& p2l_offsets,
                                    std::vector<InteractionTask>& m2p, std::vector<std::size_t>& m2p_offsets,
                                    cudaStream_t stream) const {
  static_assert(sizeof(std::size_t) == sizeof(std::uint64_t), "offsets are copied as they are");
  p2l.resize(leaf_cell_count_);
  m2p.resize(leaf_cell_count_);
  p2l_offsets.assign(n_nodes_ + 1, 0);
  m2p_offsets.assign(n_leaves_ + 1, 0);
  if (leaf_cell_count_ == 0) return;
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(p2l.data(), p2l_values_.data(), leaf_cell_count_ * sizeof(InteractionTask),
                                   cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(m2p.data(), m2p_values_.data(), leaf_cell_count_ * sizeof(InteractionTask),
                                   cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(p2l_offsets.data(), p2l_offsets_.data(), p2l_offsets.size() * 8,
                                   cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(m2p_offsets.data(), m2p_offsets_.data(), m2p_offsets.size() * 8,
                                   cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
}

double DeviceWalk::last_ms() const {
  ORBIS_CUDA_CHECK(cudaEventSynchronize(stop_));
  float ms = 0;
  ORBIS_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
  return ms;
}

}  // namespace orbis::gpu
