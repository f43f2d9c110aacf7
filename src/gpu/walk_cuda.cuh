// The dual-tree walk (fmm/walk.hpp) on the device: the same pair test (fmm/walk_pair.hpp,
// bit for bit), hence the same M2L and P2P task sets as DualTreeWalk::run in kHalfSpans
// mode, in another order.
//
// Level-synchronous over node pairs, with no host wait between levels: per launch one kernel
// takes the frontier a tile at a time, runs the pair test and counts each pair's outputs (M2L
// tasks, P2P entries, leaf-cell pairs, child pairs), scans them in the tile, gets the tile's
// offset from the tiles before it (a decoupled look-back), runs the test again and writes
// the outputs there; the child pairs are the next launch's frontier, and the last tile
// advances the totals. (Three kernels a launch before, a count pass, a one-block scan and
// the write pass: 2.5 ms of a 10^6-particle walk's 3.) Frontier sizes and totals stay on the
// device; the launches follow a fixed
// schedule (several levels per kernel thread for the first launches, where the frontier is
// small, then one), long enough for the deepest pair of the tree, so the host queues the
// whole walk at once and waits once, at its end, for the totals. The output buffers are
// sized in advance (the last walk's needs); a walk that would overflow them stops, and is
// run again with larger ones. Positions come from the counts' prefix sums alone (tiles are
// taken with an atomic counter, but each tile's place is its index), so the output arrays
// are identical run after run. M2L tasks are then grouped by target with a stable radix sort.
//
// Active subsets (hierarchical time steps): with per-node flags (a node is active when a
// leaf below it holds an active particle), pairs of two inactive nodes are dropped with
// everything below them. The schedule does not depend on the flags, so every active
// target's P2P entries and M2L tasks are those of the full walk, in the same order.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "fmm/tasks.hpp"
#include "fmm/walk.hpp"
#include "gpu/cub_counts.cuh"
#include "gpu/device_buffer.cuh"
#include "gpu/device_tree.cuh"
#include "tree/orb_tree.hpp"

namespace orbis::gpu {

// Per-pair output counts (and, scanned, offsets): M2L tasks, P2P entries, the mutual ones
// among them, child pairs, leaf-cell pairs (vacuum: one P2L and one M2P task each).
struct WalkCounts {
  std::uint32_t m2l, p2p, mutual, children, leaf_cell;
};

class DeviceWalk {
 public:
  DeviceWalk();
  ~DeviceWalk();
  DeviceWalk(const DeviceWalk&) = delete;
  DeviceWalk& operator=(const DeviceWalk&) = delete;

  // The walk over n_nodes device nodes (node 0 the root), queued on stream; waits for the
  // stream once, at the end (buffers reused across runs, grow-only). node_active (device,
  // one flag per node, or null for all): pairs of two inactive nodes are dropped.
  // tree_depth: a bound on the longest root-to-leaf path where the shape is not a built
  // tree's (a forest, whose top over uneven groups can be deeper than its leaf count says);
  // -1: from n_leaves, as OrbTree::shape keeps it. It sets how many levels are launched.
  void run(const WalkNode* nodes, std::size_t n_nodes, std::size_t n_leaves, const WalkSettings& settings,
           cudaStream_t stream, const std::uint8_t* node_active = nullptr, int tree_depth = -1);

  // P2P in half form, DeviceGrouping's upload format (tasks.hpp): entry e is the target
  // leaf, | kMutualBit when mutual (it stands for (t, s, img) and (s, t, -img)), and the
  // source packed with pack_source.
  std::size_t p2p_entries() const { return p2p_entries_; }
  std::size_t p2p_tasks() const { return p2p_entries_ + p2p_mutual_; }   // a mutual entry counted twice
  const std::uint32_t* p2p_targets() const { return p2p_t_.data(); }
  const std::uint32_t* p2p_sources() const { return p2p_s_.data(); }

  // M2L, each direction its own task (as the CPU's lists.m2l), grouped by target node.
  std::size_t m2l_count() const { return m2l_count_; }
  const InteractionTask* m2l_tasks() const { return m2l_sorted_; }
  const std::uint64_t* m2l_offsets() const { return m2l_offsets_.data(); }   // [n_nodes + 1]

  // Vacuum boundaries (WalkSettings::leaf_cell): the leaf-cell pairs' P2L tasks (target node,
  // source leaf) grouped by target node, p2l_offsets()[n_nodes + 1], and M2P tasks (target
  // leaf, source node) grouped by target leaf, m2p_offsets()[n_leaves + 1]; the CPU's
  // lists.p2l and lists.m2p as sets, each target's tasks in walk order. Image 0. The
  // arrays are not made when there are none (leaf_cell_count() == 0).
  std::size_t leaf_cell_count() const { return leaf_cell_count_; }
  const InteractionTask* p2l_tasks() const { return p2l_values_.data(); }
  const std::uint64_t* p2l_offsets() const { return p2l_offsets_.data(); }
  const InteractionTask* m2p_tasks() const { return m2p_values_.data(); }
  const std::uint64_t* m2p_offsets() const { return m2p_offsets_.data(); }

  // Host copies (wait for the stream): for the CPU far field and for tests.
  void download_m2l(std::vector<InteractionTask>& tasks, std::vector<std::size_t>& offsets,
                    cudaStream_t stream) const;
  void download_p2p(std::vector<std::uint32_t>& targets, std::vector<std::uint32_t>& sources,
                    cudaStream_t stream) const;
  void download_leaf_cell(std::vector<InteractionTask>& p2l, std::vector<std::size_t>& p2l_offsets,
                          std::vector<InteractionTask>& m2p, std::vector<std::size_t>& m2p_offsets,
                          cudaStream_t stream) const;

  // Device time of the last run, ms (events; waits for the run to finish).
  double last_ms() const;
  // The last run's launches that had pairs to test (each walks one or more levels), the
  // pairs of all its frontiers, and how often it had to be run again with larger buffers.
  int levels() const { return levels_; }
  std::size_t pairs_tested() const { return pairs_tested_; }
  int reruns() const { return reruns_; }
  // The widest frontier (node pairs of one level) any run needed so far (the memory plan's
  // reference).
  std::size_t widest_frontier() const { return need_.frontier; }
  // Device bytes the output buffers need for a walk with these outputs (the memory plan).
  static std::size_t bytes_for(std::size_t p2p_entries, std::size_t m2l_tasks, std::size_t frontier,
                               std::size_t n_nodes);
  std::size_t held_bytes() const;
  // Give arrays back to the device pool (gpu/device_buffer.cuh), queued on the allocation
  // stream; the next run() allocates them again at the sizes walks needed so far. The work
  // arrays (frontiers, their tiles, the unsorted M2L tasks, the sort's keys and temporaries)
  // are free once run() is queued; the P2P entries once the P2P is; the outputs once the P2P
  // and far field are.
  void release_work();
  void release_p2p_entries();
  void release_outputs();

  // One launch's outputs are counted and placed with 32-bit offsets: fewer than 2^32 P2P
  // entries and M2L tasks, and fewer than 2^31 child pairs (the next frontier, whose tile
  // indices are 32-bit too). A walk that exceeds them stops with an error naming the
  // parameters that lower them; the memory plan's check (check_short_range_counts) keeps
  // planned runs well inside. The test hook lowers all three, so a small walk hits them.
  static constexpr std::uint64_t kMaxLaunchEntries = 4294967295u, kMaxLaunchPairs = 2147483647u;
  void set_max_launch_outputs(std::uint64_t n) { max_launch_outputs_ = n; }
  // First sizes for the next run(): room for at least this many P2P entries, M2L tasks,
  // frontier pairs and leaf-cell pairs (the step's memory plan, planned_walk). Without them a
  // run's first walk starts from a guess for a box's lists and doubles what overflows: an
  // isolated system's first walk ran 11 to 12 times (17-24 ms instead of 3-4.5 at 10^6).
  void reserve(std::size_t p2p, std::size_t m2l, std::size_t frontier, std::size_t leaf_cell) {
    capacity_.p2p = std::max(capacity_.p2p, p2p);
    capacity_.m2l = std::max(capacity_.m2l, m2l);
    capacity_.frontier = std::max(capacity_.frontier, frontier);
    capacity_.leaf_cell = std::max(capacity_.leaf_cell, leaf_cell);
  }
  // Test hook: at most this many items per CUB call in the M2L sort (gpu/cub_counts.cuh).
  void set_max_cub_items(std::size_t items) { max_cub_items_ = items; }

 private:
  struct Capacity {
    std::size_t p2p = 0, m2l = 0, frontier = 0, leaf_cell = 0;
  };
  // Queues the whole walk; false when an output buffer was too small (then `need` says how large).
  bool attempt(const WalkNode* nodes, std::size_t n_nodes, std::size_t n_leaves, const WalkPairParams& params,
               const std::uint8_t* node_active, cudaStream_t stream);
  void group_m2l(std::size_t n_nodes, cudaStream_t stream);
  void group_leaf_cell(std::size_t n_nodes, std::size_t n_leaves, cudaStream_t stream);

  DeviceArray<std::uint64_t> frontier_[2];   // (target, source) pairs, ping-pong
  DeviceArray<std::uint32_t> tile_flags_;     // per tile of a frontier: the look-back's flag
  DeviceArray<std::uint64_t> tile_sums_;      // and its own and inclusive sums (walk_cuda.cu)
  DeviceArray<std::uint32_t> next_tile_;      // per launch: the next tile to take
  std::uint32_t epoch_ = 0;                   // the last launch's epoch (its tiles' flags)
  DeviceArray<unsigned char> state_;          // the walk's device-side counters (walk_cuda.cu)
  DeviceArray<std::uint32_t> p2p_t_, p2p_s_;
  DeviceArray<InteractionTask> m2l_raw_;
  DeviceArray<std::uint32_t> m2l_keys_[2];
  DeviceArray<InteractionTask> m2l_values_;
  DeviceArray<std::uint64_t> m2l_offsets_;
  DeviceArray<InteractionTask> p2l_raw_, m2p_raw_, p2l_values_, m2p_values_;   // leaf-cell pairs
  DeviceArray<std::uint64_t> p2l_offsets_, m2p_offsets_;
  DeviceArray<unsigned char> temp_;
  PinnedArray<unsigned char> host_state_;
  Capacity capacity_, need_;
  int sm_count_ = 0;
  mutable PinnedArray<InteractionTask> host_m2l_;   // download_m2l's landing buffer
  const InteractionTask* m2l_sorted_ = nullptr;
  std::uint64_t max_launch_outputs_ = kMaxLaunchEntries;
  std::size_t max_cub_items_ = kCubMaxItems;
  std::size_t n_nodes_ = 0, n_leaves_ = 0, p2p_entries_ = 0, p2p_mutual_ = 0, m2l_count_ = 0, pairs_tested_ = 0;
  std::size_t leaf_cell_count_ = 0;
  int levels_ = 0, reruns_ = 0;
  int pair_levels_ = 0;   // the pair levels run() launches for (its tree's depth)
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace orbis::gpu
