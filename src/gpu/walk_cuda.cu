#include "gpu/walk_cuda.cuh"

#include <algorithm>

#include <cstring>

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

// The pair's outputs counted (the pair test's sink, fmm/walk_pair.hpp), and, in a launch of
// one level (the pair alone), kept, so that the write needs no second pair test (it was half
// of the walk's time): up to kKept child pairs, or one M2L pair, P2P task or leaf-cell pair.
// A pair with more (a P2P task per image, for a leaf near half the box) is walked again.
constexpr int kKept = 4;
enum class Output : std::uint8_t { none, m2l, p2p, leaf_cell, child };
struct KeepSink {
  std::int32_t t, s;
  WalkCounts c;
  // A pair's outputs are of one kind (walk_pair): an M2L pair, P2P tasks, a leaf-cell pair
  // or child pairs. Kept in registers: the child arrays are indexed by unrolled loops only.
  Output kind = Output::none;
  int kept = 0;
  bool all_kept = true;
  std::int8_t image[3] = {0, 0, 0};
  bool leaf_is_target = false;
  std::int32_t a[kKept], b[kKept];
  __device__ bool keep(Output k) {
    if (kept == kKept || (kept > 0 && kind != k) || (kept > 0 && k != Output::child)) {
      all_kept = false;
      return false;
    }
    kind = k;
    ++kept;
    return true;
  }
  __device__ void m2l(const std::int8_t* img) {
    c.m2l += t != s ? 2 : 1;
    if (keep(Output::m2l))
      for (int d = 0; d < 3; ++d) image[d] = img[d];
  }
  __device__ void p2p(const std::int8_t* img) {
    ++c.p2p;
    c.mutual += t != s ? 1 : 0;
    if (keep(Output::p2p))
      for (int d = 0; d < 3; ++d) image[d] = img[d];
  }
  __device__ void p2l_m2p(bool target_leaf) {
    ++c.leaf_cell;
    if (keep(Output::leaf_cell)) leaf_is_target = target_leaf;
  }
  __device__ void child(std::int32_t x, std::int32_t y) {
    ++c.children;
    const int k = kept;
    if (!keep(Output::child)) return;
#pragma unroll
    for (int j = 0; j < kKept; ++j)
      if (j == k) a[j] = x, b[j] = y;
  }
  // The kept outputs, in the order the test made them, to `sink` (pair t, s).
  template <typename Sink>
  __device__ void replay(Sink& sink) const {
    sink.t = t;
    sink.s = s;
    switch (kind) {
      case Output::none: break;
      case Output::m2l: sink.m2l(image); break;
      case Output::p2p: sink.p2p(image); break;
      case Output::leaf_cell: sink.p2l_m2p(leaf_is_target); break;
      case Output::child:
#pragma unroll
        for (int j = 0; j < kKept; ++j)
          if (j < kept) sink.child(a[j], b[j]);
        break;
    }
  }
};

// A kernel's pair walks `depth` levels of its subtree of pairs itself (depth first, in a
// fixed order), its pairs at that depth going to the next frontier: a small frontier then
// takes one launch for several levels. The count and the write walk the same way, so the
// counts match the writes.
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
// Frontier sizes and where a launch's outputs start alternate between [0] and [1] with the
// launch's parity: a launch reads its own and its last tile sets the next launch's, while
// other tiles may still read theirs. overflow: 1 when an output buffer was too small (the
// walk is run again with larger ones), kCountLimit when one launch's outputs exceed what its
// 32-bit offsets hold (the walk stops: a clear error).
constexpr std::uint32_t kCountLimit = 2;
struct WalkState {
  std::uint32_t n[2];
  std::uint32_t overflow, launches;
  unsigned long long launch_p2p, launch_m2l, launch_children;   // the launch that hit kCountLimit
  unsigned long long p2p, mutual, m2l, pairs;   // totals of the levels done
  unsigned long long p2p_base[2], m2l_base[2], leaf_cell_base[2];   // where a launch's outputs start
  unsigned long long need_p2p, need_m2l, need_frontier;   // the most each buffer was asked for
  unsigned long long leaf_cell, need_leaf_cell, launch_leaf_cell;   // leaf-cell pairs, likewise
};

// Buffer capacities, and the most one launch may emit (DeviceWalk::kMaxLaunchEntries/Pairs).
struct WalkLimits {
  unsigned long long p2p, m2l, frontier, leaf_cell;
  unsigned long long launch_entries, launch_pairs;
};

// One launch's counts in 64 bits: the tiles' running sums, which may pass 2^32 before the
// last tile finds the launch too large.
struct WideCounts {
  unsigned long long m2l, p2p, mutual, children, leaf_cell;
};

constexpr int kTile = 256;   // pairs per tile = threads per block of the pair kernel
using TileScan = cub::BlockScan<WalkCounts, kTile>;
constexpr WalkCounts kZero{0, 0, 0, 0, 0};

__device__ __forceinline__ WalkCounts add(const WalkCounts& a, const WalkCounts& b) { return AddCounts{}(a, b); }
// Counts (32- or 64-bit: WalkCounts or WideCounts) added to 64-bit ones.
template <typename Counts>
__device__ __forceinline__ WideCounts add(const WideCounts& a, const Counts& b) {
  return WideCounts{a.m2l + b.m2l, a.p2p + b.p2p, a.mutual + b.mutual, a.children + b.children,
                    a.leaf_cell + b.leaf_cell};
}

__global__ void init_walk(WalkState* st, std::uint64_t* frontier, bool has_root) {
  *st = WalkState{};
  st->n[0] = has_root ? 1 : 0;
  frontier[0] = pack_pair(0, 0);
}

// The tiles' published sums (a decoupled look-back: Merrill & Garland 2016): tile k stores
// its own sum, then, once it knows the sum of all tiles before it, its inclusive sum, each
// followed by its flag (launch epoch << 1 | inclusive). A flag of another epoch is a flag
// not yet set in this launch. Tiles are taken in order (an atomic counter), so every tile
// a tile waits for is held by a running block.
constexpr std::size_t kWideWords = sizeof(WideCounts) / 8;   // DeviceWalk::tile_sums_ holds them as words
constexpr std::uint32_t kMaxEpoch = 0x7fffffffu;                 // flags hold epoch << 1
struct TileStatus {
  std::uint32_t* flag;
  WideCounts* own;
  WideCounts* inclusive;
};

__device__ __forceinline__ void publish(const TileStatus& ts, std::uint32_t tile, const WideCounts& v, std::uint32_t epoch,
                                        bool inclusive) {
  (inclusive ? ts.inclusive : ts.own)[tile] = v;
  __threadfence();   // the sums before the flag that announces them
  atomicExch(ts.flag + tile, epoch << 1 | (inclusive ? 1u : 0u));
}

__device__ __forceinline__ WideCounts load_cg(const WideCounts* p) {
  return WideCounts{__ldcg(&p->m2l), __ldcg(&p->p2p), __ldcg(&p->mutual), __ldcg(&p->children), __ldcg(&p->leaf_cell)};
}

__device__ __forceinline__ WideCounts warp_sum(WideCounts v) {
  for (int o = 16; o > 0; o /= 2) {
    v.m2l += __shfl_down_sync(0xffffffffu, v.m2l, o);
    v.p2p += __shfl_down_sync(0xffffffffu, v.p2p, o);
    v.mutual += __shfl_down_sync(0xffffffffu, v.mutual, o);
    v.children += __shfl_down_sync(0xffffffffu, v.children, o);
    v.leaf_cell += __shfl_down_sync(0xffffffffu, v.leaf_cell, o);
  }
  return v;
}

// The first warp of tile `tile`'s block: the sum of all tiles before it (lane 0's result),
// after publishing the tile's own sum. Lane j reads tile (window end - j); a window of 32
// tiles' own sums is added until one holds an inclusive sum.
__device__ WideCounts look_back(const TileStatus& ts, std::uint32_t tile, const WideCounts& own, std::uint32_t epoch) {
  const int lane = threadIdx.x & 31;
  if (lane == 0) publish(ts, tile, own, epoch, tile == 0);
  WideCounts prefix{0, 0, 0, 0, 0};
  for (std::int64_t end = static_cast<std::int64_t>(tile) - 1; end >= 0; end -= 32) {
    const std::int64_t k = end - lane;
    std::uint32_t f = epoch << 1 | 1u;   // before tile 0: an inclusive sum of nothing
    if (k >= 0) {
      do {
        f = *reinterpret_cast<volatile std::uint32_t*>(ts.flag + k);
      } while ((f >> 1) != epoch);
    }
    __threadfence();   // the flag before the sums it announces
    const unsigned inclusive = __ballot_sync(0xffffffffu, (f & 1u) != 0);
    const int stop = inclusive ? __ffs(inclusive) - 1 : 32;   // the nearest inclusive sum
    WideCounts v{0, 0, 0, 0, 0};
    if (k >= 0 && lane <= stop) v = load_cg((f & 1u) ? ts.inclusive + k : ts.own + k);
    prefix = add(prefix, warp_sum(v));
    if (inclusive) break;
  }
  return prefix;   // lane 0's is the sum
}

// The last tile of a launch: its totals advance the counters and size the next frontier,
// or, when a buffer would overflow, stop the walk.
__device__ void finish_launch(WalkState* st, int parity, const WideCounts& tot, std::uint32_t n,
                              const WalkLimits& limits) {
  if (tot.p2p > limits.launch_entries || tot.m2l > limits.launch_entries || tot.children > limits.launch_pairs ||
      tot.leaf_cell > limits.launch_entries) {
    st->overflow = kCountLimit;
    st->launch_p2p = tot.p2p;
    st->launch_m2l = tot.m2l;
    st->launch_children = tot.children;
    st->launch_leaf_cell = tot.leaf_cell;
    return;
  }
  st->need_p2p = st->p2p + tot.p2p;
  st->need_m2l = st->m2l + tot.m2l;
  st->need_leaf_cell = st->leaf_cell + tot.leaf_cell;
  st->need_frontier = max(st->need_frontier, tot.children);
  if (st->need_p2p > limits.p2p || st->need_m2l > limits.m2l || tot.children > limits.frontier ||
      st->need_leaf_cell > limits.leaf_cell) {
    st->overflow = 1;
    return;
  }
  st->p2p += tot.p2p;
  st->mutual += tot.mutual;
  st->m2l += tot.m2l;
  st->leaf_cell += tot.leaf_cell;
  st->pairs += n;
  st->launches += n > 0 ? 1 : 0;
  st->p2p_base[parity ^ 1] = st->p2p;
  st->m2l_base[parity ^ 1] = st->m2l;
  st->leaf_cell_base[parity ^ 1] = st->leaf_cell;
  st->n[parity ^ 1] = static_cast<std::uint32_t>(tot.children);
}

// One launch of the walk, in one pass over its frontier: per tile (taken in order), each
// pair's outputs counted, scanned in the block, the tile's offset from the look-back, and
// the pairs walked again to write their outputs there. A tile whose outputs would not fit
// (a buffer, or a launch's 32-bit offsets) writes nothing; its launch's last tile then
// stops the walk.
__global__ void __launch_bounds__(kTile) walk_tiles(const WalkNode* nodes, const std::uint64_t* pairs, WalkState* st,
                                                    int parity, WalkPairParams p, int depth,
                                                    const std::uint8_t* active, WalkLimits limits, TileStatus ts,
                                                    std::uint32_t epoch, std::uint32_t* next_tile,
                                                    std::uint32_t* p2p_t, std::uint32_t* p2p_s, InteractionTask* m2l,
                                                    InteractionTask* p2l, InteractionTask* m2p, std::uint64_t* next) {
  __shared__ typename TileScan::TempStorage temp;
  __shared__ std::uint32_t tile_shared;
  __shared__ WideCounts prefix_shared;
  if (st->overflow) return;
  const std::uint32_t n = st->n[parity];
  const std::uint32_t n_tiles = (n + kTile - 1) / kTile;
  if (n_tiles == 0) {
    if (blockIdx.x == 0 && threadIdx.x == 0) finish_launch(st, parity, WideCounts{0, 0, 0, 0, 0}, 0, limits);
    return;
  }
  const unsigned long long p2p_base = st->p2p_base[parity], m2l_base = st->m2l_base[parity],
                           leaf_cell_base = st->leaf_cell_base[parity];
  for (;;) {
    if (threadIdx.x == 0) tile_shared = atomicAdd(next_tile, 1u);
    __syncthreads();
    const std::uint32_t tile = tile_shared;
    if (tile >= n_tiles) return;   // block-uniform
    const std::uint32_t i = tile * kTile + threadIdx.x;
    KeepSink count{0, 0, kZero};   // counts, and a one-level launch's outputs
    if (i < n) walk_from(nodes, pairs[i], p, depth, active, count);
    WalkCounts at, own;
    TileScan(temp).ExclusiveScan(count.c, at, kZero, AddCounts{}, own);
    if (threadIdx.x < 32) {
      const WideCounts prefix = look_back(ts, tile, add(WideCounts{0, 0, 0, 0, 0}, own), epoch);
      if (threadIdx.x == 0) {
        prefix_shared = prefix;
        if (tile > 0) publish(ts, tile, add(prefix, own), epoch, true);
        if (tile == n_tiles - 1) finish_launch(st, parity, add(prefix, own), n, limits);
      }
    }
    __syncthreads();
    const WideCounts prefix = prefix_shared, upto = add(prefix, own);
    const bool fits = p2p_base + upto.p2p <= limits.p2p && m2l_base + upto.m2l <= limits.m2l &&
                      leaf_cell_base + upto.leaf_cell <= limits.leaf_cell && upto.children <= limits.frontier &&
                      upto.p2p <= limits.launch_entries && upto.m2l <= limits.launch_entries &&
                      upto.leaf_cell <= limits.launch_entries && upto.children <= limits.launch_pairs;
    if (fits && i < n) {
      // Within the launch's limits every offset fits 32 bits.
      const WalkCounts from{static_cast<std::uint32_t>(prefix.m2l), static_cast<std::uint32_t>(prefix.p2p),
                            static_cast<std::uint32_t>(prefix.mutual), static_cast<std::uint32_t>(prefix.children),
                            static_cast<std::uint32_t>(prefix.leaf_cell)};
      WriteSink sink{0, 0, nodes, p2p_t + p2p_base, p2p_s + p2p_base, m2l + m2l_base, p2l + leaf_cell_base,
                     m2p + leaf_cell_base, next, add(from, at)};
      // One level: the pair's own outputs were kept (unless there were too many); deeper
      // launches walk their subtrees of pairs again.
      if (depth == 1 && count.all_kept) count.replay(sink);
      else walk_from(nodes, pairs[i], p, depth, active, sink);
    }
    __syncthreads();   // temp and the shared tile are reused
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
  // the tiles' flags and sums, offsets per node, and the sort's temporary storage (~ the
  // keys again).
  return p2p_entries * 8 + m2l_tasks * (2 * sizeof(InteractionTask) + 12) + frontier * 16 +
         tiles * (4 + 2 * sizeof(WideCounts)) + (n_nodes + 1) * 8 + (std::size_t{1} << 20);
}

std::size_t DeviceWalk::held_bytes() const {
  return (p2p_t_.capacity() + p2p_s_.capacity() + m2l_keys_[0].capacity() + m2l_keys_[1].capacity()) * 4 +
         (m2l_raw_.capacity() + m2l_values_.capacity()) * sizeof(InteractionTask) +
         (frontier_[0].capacity() + frontier_[1].capacity() + m2l_offsets_.capacity()) * 8 +
         tile_flags_.capacity() * 4 + tile_sums_.capacity() * 8 + next_tile_.capacity() * 4 + temp_.capacity() +
         state_.capacity() +
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
  // The look-back's tile flags start cleared, and are cleared again when their epochs wrap
  // (an epoch a launch: a flag of another epoch is one not yet set).
  const std::size_t max_tiles = limits.frontier / kTile + 1;
  const bool new_flags = tile_flags_.capacity() < max_tiles;   // a grown array holds no data
  tile_flags_.ensure(max_tiles);
  tile_sums_.ensure(2 * kWideWords * max_tiles);
  const int levels = pair_levels_;
  int launches = 0;
  for (int covered = 0; covered < levels; ++launches) covered += depth_of_launch(launches);
  if (new_flags || epoch_ + static_cast<std::uint32_t>(launches) >= kMaxEpoch) {
    ORBIS_CUDA_CHECK(cudaMemsetAsync(tile_flags_.data(), 0, tile_flags_.capacity() * 4, stream));
    epoch_ = 0;
  }
  next_tile_.ensure(static_cast<std::size_t>(launches));
  ORBIS_CUDA_CHECK(cudaMemsetAsync(next_tile_.data(), 0, static_cast<std::size_t>(launches) * 4, stream));
  auto* sums = reinterpret_cast<WideCounts*>(tile_sums_.data());
  const TileStatus status{tile_flags_.data(), sums, sums + max_tiles};
  auto* st = reinterpret_cast<WalkState*>(state_.data());
  init_walk<<<1, 1, 0, stream>>>(st, frontier_[0].data(), n_nodes > 0);
  ORBIS_CUDA_CHECK(cudaGetLastError());
  // Blocks enough to fill the GPU, no more than there can be tiles; they take tiles in turn.
  const auto grid = static_cast<unsigned>(
      std::max<std::size_t>(1, std::min<std::size_t>(max_tiles, 8 * static_cast<std::size_t>(sm_count_))));
  int k = 0;
  for (; k < launches; ++k) {
    const int depth = depth_of_launch(k), parity = k & 1;
    walk_tiles<<<grid, kTile, 0, stream>>>(nodes, frontier_[parity].data(), st, parity, params, depth, node_active,
                                           limits, status, ++epoch_, next_tile_.data() + k, p2p_t_.data(),
                                           p2p_s_.data(), m2l_raw_.data(), p2l_raw_.data(), m2p_raw_.data(),
                                           frontier_[parity ^ 1].data());
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
  tile_flags_.release();
  tile_sums_.release();
  next_tile_.release();
  m2l_raw_.release();
  p2l_raw_.release();
  m2p_raw_.release();
  for (auto& k : m2l_keys_) k.release();
  temp_.release();
}

void DeviceWalk::release_p2p_entries() {
  p2p_t_.release();
  p2p_s_.release();
}

void DeviceWalk::release_outputs() {
  release_p2p_entries();
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
