// The short-range step from device positions to device forces, with nothing on the host
// but the queueing: the ORB tree (DeviceOrbTree, the CPU's tree bit for bit), the dual-tree
// walk (DeviceWalk, the CPU's task sets, one host wait at its end), the P2P tasks sorted by
// target (in chunks when memory is short) and the kernel, and the far field (DeviceFmm: multipoles, M2L, L2L, L2P). The same sums as
// ShortRangeSolver (fmm/short_range.hpp) with the CUDA P2P, in another summation order
// for the far field.
//
// Active subsets (hierarchical time steps): with time bins and min_active_bin > 0, only the
// particles with bin >= min_active_bin get forces. The walk drops the pairs of nodes that
// hold no active particle, the P2P kernel evaluates only the active particles of each
// target leaf (packed: a leaf with few active particles costs little), and only active
// particles are written. The walk keeps the full walk's order for every active target, so
// their far field is bitwise the full computation's; their P2P sums are the full
// computation's in another order (bitwise where the whole leaf is active).
//
// Vacuum boundaries (ShortRangeSettings::boundary, fmm/short_range.hpp): the same steps give
// the whole force of an isolated system: positions anywhere, the walk by the opening angle
// alone, Newtonian P2P (its length scale from the root's box at each step) and M2L, and the
// walk's leaf-cell pairs (P2L/M2P, ShortRangeSettings::leaf_cell) in the far field. One
// process: no forest. Individual masses (Particles::masses) as weights w_i = m_i / m, G m
// being settings().g_mass: gathered into tree order with the positions, they weigh the
// sources of the P2P kernel (its Weighted form, gpu/p2p_cuda_kernel.cuh), the multipoles
// (P2M) and the leaf-cell pairs' P2L; the targets' accelerations need no weight.
//
// Over ranks (compute_forest): a rank's tree is a forest of the global tree's depth-d
// subtrees (own groups and ghost groups), assembled on the device from grouped positions
// (DeviceOrbTree::assemble_forest, the host OrbTree::assemble_forest bit for bit), and the
// same walk, P2P and far field run with the own particles as the active ones.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "fmm/short_range.hpp"
#include "gpu/device_buffer.cuh"
#include "gpu/fmm_cuda.cuh"
#include "gpu/orb_tree_cuda.cuh"
#include "gpu/p2p_cuda_chunks.cuh"
#include "gpu/p2p_cuda_launch.cuh"
#include "gpu/walk_cuda.cuh"

namespace orbis::gpu {

// Where the last step's time went (device times from events, seconds) and what it did.
struct DeviceShortRangeStats {
  double tree = 0, walk = 0, grouping = 0, p2p = 0, far_field = 0, scatter = 0, total = 0;
  // grouping: the pair count, the leaf-relative positions and the tasks' selection and
  // sort by target; p2p: the kernel alone.
  bool rebuilt = false;           // the tree was built (else refitted)
  double p2p_interactions = 0;    // particle pairs evaluated (active targets)
  std::uint64_t p2p_pairs = 0;    // the same, the exact device count (the tree policy's)
  std::size_t m2l_tasks = 0, p2p_tasks = 0, nodes = 0, leaves = 0;
  std::size_t leaf_cell_pairs = 0;   // vacuum: P2L/M2P pairs (one P2L and one M2P task each)
  std::size_t particles = 0, active_particles = 0, active_leaves = 0;
  int walk_launches = 0, walk_reruns = 0;
  std::size_t walk_frontier = 0;   // the widest frontier any walk needed so far (node pairs)
  int p2p_chunks = 1;             // chunks of target leaves the P2P tasks were sorted in
  // Inside tree and walk (ORBIS_STEP_DETAILS): the tree's three parts (a build: sort, splits,
  // finish; a refit: leaves, internal nodes, radii), the active flags, the walk's node records.
  double tree_parts[3] = {0, 0, 0}, active_flags = 0, walk_nodes = 0;
};

class DeviceShortRange {
 public:
  // Checks the settings (as ShortRangeSolver) before any work.
  DeviceShortRange(const ShortRangeSettings& settings, int device);
  ~DeviceShortRange();
  DeviceShortRange(const DeviceShortRange&) = delete;
  DeviceShortRange& operator=(const DeviceShortRange&) = delete;

  // Queues on `stream` the short-range accelerations of the n particles at (x, y, z)
  // (device, x | y | z blocks of the state, Mpc/h in [0, box)) and writes them into out
  // (x | y | z blocks of Ga, (km/s)^2/(Mpc/h)) for the particles with bin[i] >=
  // min_active_bin; bin null or min_active_bin <= 0: every particle. Waits for the stream
  // twice (the tree's tie check, the walk's totals).
  // weights: null (every particle weighs 1: one mass), or vacuum boundaries only, each
  // particle's weight m_i / m (device, n, the state's order, as x; fails for the periodic
  // kernels, which assume one mass). Weights of exactly 1 give the bits of null.
  template <typename Ga>
  void compute(const double* x, std::size_t n, const std::uint8_t* bin, int min_active_bin, Ga* out,
               cudaStream_t stream, const double* weights = nullptr);

  // A forest (the rank's tree over ranks; ShortRangeTargets::forest_groups on the host): the n
  // positions are groups [group_offsets[g], group_offsets[g+1]), each already in its subtree
  // order; the tree is OrbTree::assemble_forest's (shape and geometry), made on the device
  // without sorting. refit: the same groups as the last compute_forest(), moved (geometry only).
  // target[i] != 0: particle i gets its force in out (x | y | z blocks of out_stride: the
  // targets are among the first out_stride particles, a rank's own, which come first; the
  // state's arrays, no forest-sized copy); the others (ghosts, inactive particles) are sources
  // only and their out entries are left as they are.
  //
  // x: device, x | y | z blocks as compute(); target: device array of n. The top depth is
  // settings().top_levels (the walk's: the forest's artificial top is split, never
  // approximated, as on the host). compute()'s walk, P2P and far field with the targets as
  // its active particles (bin = target, min_active_bin = 1), so a target's force depends on
  // the targets of its own leaf only (bitwise that of every particle being a target where
  // the whole leaf is): the same on any number of ranks, whose forests share the leaves;
  // against compute() on all particles it differs only in summation order (the same task
  // sets, other node numbers). Ignores rebuild_next();
  // a compute() after it builds a tree of its own.
  template <typename Ga>
  void compute_forest(const double* x, std::size_t n, const std::vector<std::uint32_t>& group_offsets,
                      bool refit, const std::uint8_t* target, Ga* out, std::size_t out_stride, cudaStream_t stream);

  // The last compute()'s times and counts (waits for it).
  DeviceShortRangeStats stats() const;

  // The tree: a step builds it when rebuild_next() asked for it or when the particle count
  // changed (or there is none); otherwise it refits the last tree to the new positions
  // (DeviceOrbTree::refit). When to ask is the caller's policy (tree/tree_reuse.hpp: the
  // step engine's).
  void rebuild_next() { rebuild_next_ = true; }
  // Whether the next compute() of n particles can refit (a built tree of n particles exists;
  // not a forest).
  bool has_tree(std::size_t n) const { return tree_.size() == n && n > 0 && !tree_.is_forest(); }
  // At most this many P2P tasks expanded and sorted at once (0: as many as free device
  // memory holds): beyond it the tasks go in chunks of target leaves, bitwise the same.
  void set_max_chunk_tasks(std::size_t tasks) { max_chunk_tasks_ = tasks; }
  // Test hook: at most this many items per CUB call (gpu/cub_counts.cuh) and so per P2P
  // chunk, so that a small step takes the 64-bit-count and chunked paths of a large one.
  void set_max_cub_items(std::size_t items) {
    max_cub_items_ = items;
    tree_.set_max_cub_items(items);
    walk_.set_max_cub_items(items);
    chunks_.set_max_cub_items(items);
  }
  // Test hook: at most this many P2P entries and M2L tasks per walk launch (the walk's
  // 32-bit launch offsets, DeviceWalk::kMaxLaunchEntries), so that a small walk goes in the
  // launches of a large one.
  void set_max_launch_outputs(std::uint64_t n) { walk_.set_max_launch_outputs(n); }
  // The step may allocate at most this many more bytes than it holds (the engine's
  // [gpu] memory_limit_gib less what it uses); 0: free device memory is the only limit.
  void set_allocation_cap(std::size_t bytes) { allocation_cap_ = bytes; }
  const ShortRangeSettings& settings() const { return settings_; }
  P2PSettings p2p_settings() const { return p2p_settings_; }
  // Tests: the device tree and walk of the last compute().
  const DeviceOrbTree& tree() const { return tree_; }
  const DeviceWalk& walk() const { return walk_; }
  const DeviceFmm& fmm() const { return fmm_; }
  // Device bytes held now.
  std::size_t held_bytes() const;
  // The step's tree-order acceleration array (3 n doubles), free between steps, lent to the
  // caller for its transfers (the engine's outputs); valid until the next compute().
  double* borrow_scratch(std::size_t doubles);

 private:
  // compute() and compute_forest() from the tree on: make_tree() queues the build, refit or
  // forest (returns whether the tree is new), then the walk, P2P, far field and scatter of
  // the particles with bin[i] >= min_active_bin (bin null or min_active_bin <= 0: all).
  // weights: compute()'s (state order; null: all 1), gathered into tree order for the step.
  template <typename Ga, typename MakeTree>
  void step(std::size_t n, const std::uint8_t* bin, int min_active_bin, Ga* out, std::size_t out_stride,
            cudaStream_t stream, MakeTree make_tree, const double* weights = nullptr);
  void flag_active(const std::uint8_t* bin, int min_active_bin, cudaStream_t stream);
  // Vacuum boundaries: the P2P settings for the extent of the tree just made (after the walk).
  void prepare_vacuum_p2p(cudaStream_t stream);
  static bool vacuum(const ShortRangeSettings& s) { return s.boundary == Boundary::vacuum; }
  // The chunk size for this step's tasks (0: one chunk), from free memory and the setting.
  std::size_t chunk_limit(std::size_t entries, std::size_t tasks, std::size_t n_leaves) const;

  ShortRangeSettings settings_;
  P2PSettings p2p_settings_;
  WalkSettings walk_settings_;
  DeviceOrbTree tree_;
  DeviceWalk walk_;
  DeviceP2PChunks chunks_;
  P2PKernelRunner runner_;
  DeviceFmm fmm_;
  DeviceArray<WalkNode> walk_nodes_;
  DeviceArray<unsigned char> rel_;               // leaf-relative positions (float or double)
  DeviceArray<double> acc_tree_;                 // 3 per particle, tree order
  DeviceArray<double> weights_tree_;             // individual masses: m_i / m, tree order (P2P, P2M, P2L)
  DeviceArray<std::uint32_t> prefix_;            // active particles before each tree position
  DeviceArray<std::uint8_t> node_active_;
  DeviceArray<unsigned char> scan_temp_;
  DeviceArray<unsigned long long> counters_;     // pairs, active particles, active leaves
  PinnedArray<unsigned long long> host_counters_;
  bool active_subset_ = false;
  bool rebuilt_ = false, rebuild_next_ = false;
  std::size_t max_chunk_tasks_ = 0, allocation_cap_ = 0, max_cub_items_ = kCubMaxItems;
  // 0-6: the phases' bounds; 7, 8: after flag_active, walk_nodes; 9-12: the far field's
  // multipoles, 13-10 its other expansions (on side_stream_ in vacuum); 11: their
  // evaluation's start.
  cudaEvent_t events_[14] = {};
  cudaEvent_t fork_ = nullptr;              // the step's stream, before the expansions
  cudaStream_t side_stream_ = nullptr;      // vacuum: the far field, beside the walk and the P2P
  std::size_t n_ = 0;
};

}  // namespace orbis::gpu
