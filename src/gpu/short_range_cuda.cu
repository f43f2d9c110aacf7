#include "gpu/short_range_cuda.cuh"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "gpu/cub_counts.cuh"
#include "gpu/device_memory_plan.hpp"
#include "gpu/particle_kernels.cuh"
#include "gpu/p2p_cuda.hpp"
#include "gpu/pool_phases.cuh"

namespace orbis::gpu {
namespace {

constexpr unsigned kThreads = 256;
unsigned blocks_for(std::size_t n) { return static_cast<unsigned>(std::max<std::size_t>(1, (n + kThreads - 1) / kThreads)); }

// flag[t] = the particle at tree position t is active (flag[n] = 0, so the exclusive scan's
// entry n is the count).
__global__ void active_flags(const std::uint32_t* order, const std::uint8_t* bin, int min_bin, std::size_t n,
                             std::uint32_t* flag) {
  const std::size_t t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (t < n) flag[t] = bin[order[t]] >= min_bin ? 1u : 0u;
  else if (t == n) flag[n] = 0;
}

// A node (leaf) is active when its range of tree positions holds an active particle.
__global__ void active_nodes(const ShapeNode* nodes, std::size_t n_nodes, const std::uint32_t* prefix,
                             std::size_t n, std::uint8_t* node_active, unsigned long long* counters) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (k == 0) counters[1] = prefix[n];
  bool active_leaf = false;
  if (k < n_nodes) {
    const ShapeNode nd = nodes[k];
    const bool active = prefix[nd.first + nd.count] > prefix[nd.first];
    node_active[k] = active;
    active_leaf = nd.leaf >= 0 && active;
  }
  // One atomic a warp, not one a leaf (~10^5 on one counter serialise in the L2): an integer
  // count, exact in any order. Every lane reaches the ballot (the grid is whole warps).
  const unsigned leaves = __popc(__ballot_sync(0xffffffffu, active_leaf));
  if (threadIdx.x % 32 == 0 && leaves > 0) atomicAdd(counters + 2, static_cast<unsigned long long>(leaves));
}

// The weights in tree order: tree position t holds particle order[t].
__global__ void gather_weights(const std::uint32_t* order, const double* weights, std::size_t n, double* out) {
  const std::size_t t = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (t < n) out[t] = weights[order[t]];
}

}  // namespace

DeviceShortRange::DeviceShortRange(const ShortRangeSettings& settings, int device)
    : settings_(settings),
      runner_(device),
      fmm_(settings.multipole_order, settings.r_s,
           vacuum(settings) ? KernelKind::newtonian : KernelKind::truncated, cut_shift_of(settings),
           expansion_softening_of(settings)) {
  ShortRangeSolver checked(settings);   // the host solver's checks, before any work
  if (settings.max_leaf < 1 || static_cast<unsigned>(settings.max_leaf) > CudaP2PEvaluator::kMaxLeafCount)
    fail("short range on the GPU: [gravity] max_leaf = {} must be in [1, {}] (a source leaf fills one tile)",
         settings.max_leaf, CudaP2PEvaluator::kMaxLeafCount);
  // Vacuum: the P2P's length scale (its cut beyond every pair) follows the particles' extent,
  // set at each step (vacuum_extent); a unit extent until then.
  p2p_settings_ = vacuum(settings) ? p2p_settings_of(settings, 1.0) : p2p_settings_of(settings);
  walk_settings_ = walk_settings_of(settings, p2p_settings_);
  runner_.prepare(p2p_settings_);
  for (cudaEvent_t& e : events_) ORBIS_CUDA_CHECK(cudaEventCreate(&e));
  ORBIS_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  ORBIS_CUDA_CHECK(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking));
  counters_.ensure(3);
  host_counters_.ensure(3);
}

DeviceShortRange::~DeviceShortRange() {
  for (cudaEvent_t e : events_)
    if (e) cudaEventDestroy(e);
  if (fork_) cudaEventDestroy(fork_);
  if (side_stream_) cudaStreamDestroy(side_stream_);
}

void DeviceShortRange::flag_active(const std::uint8_t* bin, int min_active_bin, cudaStream_t stream) {
  const std::size_t n = n_, nn = tree_.n_nodes();
  prefix_.ensure(n + 1);
  node_active_.ensure(nn);
  active_flags<<<blocks_for(n + 1), kThreads, 0, stream>>>(tree_.order(), bin, min_active_bin, n, prefix_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  scan_temp_.ensure(exclusive_sum_bytes(prefix_.data(), prefix_.data(), n + 1, max_cub_items_));
  exclusive_sum(scan_temp_.data(), scan_temp_.capacity(), prefix_.data(), prefix_.data(), n + 1, stream,
                max_cub_items_);
  active_nodes<<<blocks_for(nn), kThreads, 0, stream>>>(tree_.shape_nodes(), nn, prefix_.data(), n,
                                                        node_active_.data(), counters_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

template <typename Ga>
void DeviceShortRange::compute(const double* x, std::size_t n, const std::uint8_t* bin, int min_active_bin, Ga* out,
                               cudaStream_t stream, const double* weights) {
  if (n == 0) fail("short range on the GPU: no particles");
  if (weights && !vacuum(settings_))
    fail("short range on the GPU: individual particle masses need vacuum boundaries ([gravity] boundary = "
         "\"vacuum\"); the periodic kernels (TreePM) assume one mass");
  const bool rebuild = rebuild_next_ || !has_tree(n);
  rebuild_next_ = false;
  step(n, bin, min_active_bin, out, n, stream, [&] {
    if (rebuild) {
      tree_.build(x, x + n, x + 2 * n, n, settings_.max_leaf, 1.0, stream, settings_.top_levels);
    } else {
      tree_.refit(x, x + n, x + 2 * n, stream);
    }
    return rebuild;
  }, weights);
}

template <typename Ga>
void DeviceShortRange::compute_forest(const double* x, std::size_t n, const std::vector<std::uint32_t>& group_offsets,
                                      bool refit, const std::uint8_t* target, Ga* out, std::size_t out_stride,
                                      cudaStream_t stream) {
  if (n == 0) fail("short range on the GPU: a forest of no particles");
  if (vacuum(settings_))
    fail("tree gravity (vacuum): a forest of subtrees (over ranks) is not supported with vacuum boundaries");
  if (target == nullptr) fail("short range on the GPU: a forest needs its targets (one flag per particle)");
  if (refit && !(tree_.is_forest() && tree_.size() == n && tree_.forest_offsets() == group_offsets))
    fail("short range on the GPU: refit of a forest of {} particles in {} groups, but the last tree is {}", n,
         group_offsets.empty() ? 0 : group_offsets.size() - 1,
         tree_.is_forest() ? "a forest of other groups" : "no forest");
  // The targets as the active particles of compute(): bin = target, min_active_bin = 1.
  step(n, target, 1, out, out_stride, stream, [&] {
    if (refit) {
      tree_.refit(x, x + n, x + 2 * n, stream);
    } else {
      tree_.assemble_forest(x, x + n, x + 2 * n, n, group_offsets, settings_.top_levels, settings_.max_leaf, 1.0,
                            stream);
    }
    return !refit;
  });
}

template <typename Ga, typename MakeTree>
void DeviceShortRange::step(std::size_t n, const std::uint8_t* bin, int min_active_bin, Ga* out,
                            std::size_t out_stride, cudaStream_t stream, MakeTree make_tree, const double* weights) {
  n_ = n;
  // Every array of the step from the device pool, queued on the stream; each phase gives
  // its own back when it is queued, so the next phase reuses the memory (device_buffer.cuh).
  AllocationStream on_stream(stream);
  active_subset_ = bin != nullptr && min_active_bin > 0;
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[0], stream));
  pool_phase("tree");
  rebuilt_ = make_tree();
  pool_phase("walk, P2P and far field");
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[1], stream));
  const std::size_t nn = tree_.n_nodes(), nl = tree_.n_leaves();
  ORBIS_CUDA_CHECK(cudaMemsetAsync(counters_.data(), 0, 3 * sizeof(unsigned long long), stream));
  if (active_subset_) flag_active(bin, min_active_bin, stream);
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[7], stream));
  const std::uint8_t* node_active = active_subset_ ? node_active_.data() : nullptr;
  const std::uint32_t* active_prefix = active_subset_ ? prefix_.data() : nullptr;

  // Individual masses: the weights in tree order (a refit keeps the order, but the caller's
  // array may be another), for the P2P and the far field.
  const double* w_tree = nullptr;
  if (weights) {
    weights_tree_.ensure_exact(n);
    gather_weights<<<blocks_for(n), kThreads, 0, stream>>>(tree_.order(), weights, n, weights_tree_.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    w_tree = weights_tree_.data();
  }
  FmmTreeView view = fmm_tree_view(tree_);
  view.w = w_tree;
  // In vacuum the far field runs on a second stream beside the step's (below): first every
  // node's multipoles, which need the tree alone, while the walk runs (its launches leave
  // most of the GPU idle); then, after the walk, the rest of the expansions while the P2P
  // runs.
  const bool overlap = vacuum(settings_);
  if (overlap) {
    ORBIS_CUDA_CHECK(cudaEventRecord(fork_, stream));
    ORBIS_CUDA_CHECK(cudaStreamWaitEvent(side_stream_, fork_, 0));
    ORBIS_CUDA_CHECK(cudaEventRecord(events_[9], side_stream_));
    AllocationStream on_side(side_stream_);
    fmm_.multipoles(view, side_stream_);
    ORBIS_CUDA_CHECK(cudaEventRecord(events_[12], side_stream_));
  }

  // A forest's top over its groups can be deeper than its leaf count says: the walk is told
  // its depth (a bound on its paths) to launch enough levels.
  walk_nodes_.ensure(nn);
  tree_.walk_nodes(walk_nodes_.data(), walk_settings_.top_levels, stream);
  // The walk's first sizes: what the memory plan reserved for its lists.
  const PlannedWalk planned = planned_walk(settings_, nl, tree_.is_forest());
  const auto per = [](double count, std::size_t items) {
    return static_cast<std::size_t>(count * static_cast<double>(items));
  };
  walk_.reserve(per(planned.entries_per_leaf, nl), per(planned.m2l_per_node, nn), per(planned.frontier_per_leaf, nl),
                per(planned.leaf_cell_per_leaf, nl));
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[8], stream));
  walk_.run(walk_nodes_.data(), nn, nl, walk_settings_, stream, node_active,
            tree_.is_forest() ? tree_.max_depth() : -1);   // waits once, at its end
  walk_.release_work();
  if (vacuum(settings_)) prepare_vacuum_p2p(stream);
  walk_nodes_.release();
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[2], stream));

  const std::size_t entries = walk_.p2p_entries(), tasks = walk_.p2p_tasks();
  P2PKernelRunner::count_pairs(walk_.p2p_targets(), walk_.p2p_sources(), entries, tree_.leaves(), active_prefix,
                               counters_.data(), stream);
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[3], stream));

  // The far field: the leaf-cell pairs' P2L and M2P with the M2L in vacuum.
  LeafCellLists leaf_cell;
  leaf_cell.count = walk_.leaf_cell_count();
  if (leaf_cell.count > 0) {
    leaf_cell.p2l = walk_.p2l_tasks();
    leaf_cell.p2l_offsets = walk_.p2l_offsets();
    leaf_cell.m2p = walk_.m2p_tasks();
    leaf_cell.m2p_offsets = walk_.m2p_offsets();
  }
  const bool far_field = walk_.m2l_count() > 0 || leaf_cell.count > 0;
  // A box's far field: which nodes need expansions, numbered now, before the P2P is queued, so
  // that the far field after it finds the counts it sizes its arrays by without waiting.
  if (far_field && !overlap)
    fmm_.prepare(view, walk_.m2l_tasks(), walk_.m2l_offsets(), walk_.m2l_count(), stream, leaf_cell);
  // In vacuum the rest of the expansions and the M2P field (M2L, P2L, L2L, M2P: as much work
  // as the P2P at 10^6 particles) are made on the second stream while the P2P runs; they read
  // only the tree and the walk's lists, and the P2P, which stores the accelerations, still
  // comes before L2P and M2P add to them, so the sums are unchanged. Their arrays then live
  // beside the walk's and the P2P's (the memory plan counts them). In a box the far field is
  // a few percent of a step and its expansions (~90 bytes a node at p = 4) would add to the
  // P2P phase's peak: one stream.
  if (overlap) {
    ORBIS_CUDA_CHECK(cudaEventRecord(fork_, stream));
    ORBIS_CUDA_CHECK(cudaStreamWaitEvent(side_stream_, fork_, 0));
    ORBIS_CUDA_CHECK(cudaEventRecord(events_[13], side_stream_));
    AllocationStream on_side(side_stream_);
    if (far_field)
      fmm_.expand(view, walk_.m2l_tasks(), walk_.m2l_offsets(), walk_.m2l_count(), settings_.box_mpc_h,
                  side_stream_, leaf_cell);
    ORBIS_CUDA_CHECK(cudaEventRecord(events_[10], side_stream_));
  }

  // P2P: leaf-relative positions, then the kernel over the target groups, the tasks expanded
  // and sorted by target a chunk of target leaves at a time (writes every particle of every
  // evaluated target leaf).
  rel_.ensure_exact(3 * n * runner_.position_bytes());
  acc_tree_.ensure_exact(3 * n);
  runner_.relative_positions(tree_.tree_x(), tree_.tree_y(), tree_.tree_z(), tree_.leaves(), nl, n, rel_.data(),
                             stream);
  ORBIS_CUDA_CHECK(cudaMemsetAsync(acc_tree_.data(), 0, 3 * n * sizeof(double), stream));
  P2PLaunch launch;
  launch.leaves = tree_.leaves();
  launch.rel = rel_.data();
  launch.n = n;
  launch.acc = acc_tree_.data();
  launch.active_prefix = active_prefix;
  launch.weights = w_tree;
  chunks_.run(walk_.p2p_targets(), walk_.p2p_sources(), entries, tasks, nl, chunk_limit(entries, tasks, nl), runner_,
              launch, stream);
  chunks_.release();
  rel_.release();
  walk_.release_p2p_entries();   // the far field's arrays take their place
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[4], stream));

  // Far field: added to the P2P sums of the leaves that have a local expansion, and (vacuum)
  // M2P onto the leaf-cell pairs' target leaves.
  if (overlap) {
    ORBIS_CUDA_CHECK(cudaStreamWaitEvent(stream, events_[10], 0));
  } else {
    for (const int e : {9, 12, 13}) ORBIS_CUDA_CHECK(cudaEventRecord(events_[e], stream));
    if (far_field) {
      fmm_.source_multipoles(view, stream);
      fmm_.expand(view, walk_.m2l_tasks(), walk_.m2l_offsets(), walk_.m2l_count(), settings_.box_mpc_h, stream,
                  leaf_cell);
    }
    ORBIS_CUDA_CHECK(cudaEventRecord(events_[10], stream));
  }
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[11], stream));
  if (far_field) fmm_.evaluate(view, settings_.g_mass, acc_tree_.data(), stream, leaf_cell);
  fmm_.release();
  weights_tree_.release();
  walk_.release_outputs();
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[5], stream));
  scatter_short_range<Ga>(acc_tree_.data(), tree_.order(), active_subset_ ? bin : nullptr, min_active_bin, n, out,
                          out_stride, stream);
  acc_tree_.release();
  node_active_.release();
  prefix_.release();
  scan_temp_.release();
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(host_counters_.data(), counters_.data(), 3 * sizeof(unsigned long long),
                                   cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[6], stream));
}

// The host solver's extent (short_range.cpp: the diagonal of the positions' bounding box),
// here from the root's tight box, which a build and a refit both make: 2 |half width| with
// the host's operations, so the P2P's length scale is the host's to the bit.
void DeviceShortRange::prepare_vacuum_p2p(cudaStream_t stream) {
  WalkNode root;
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(&root, walk_nodes_.data(), sizeof(root), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  const Vec3d side{2 * root.half_width[0], 2 * root.half_width[1], 2 * root.half_width[2]};
  const double extent = norm(side);
  if (!std::isfinite(extent)) fail("tree gravity (vacuum): a position is not finite (the particles' extent is {})", extent);
  const P2PSettings ps = p2p_settings_of(settings_, extent);
  if (ps.r_cut != p2p_settings_.r_cut) {
    p2p_settings_ = ps;
    runner_.prepare(p2p_settings_);
  }
}

std::size_t DeviceShortRange::chunk_limit(std::size_t entries, std::size_t tasks, std::size_t n_leaves) const {
  // What free device memory holds beside the step's other arrays (and a margin for CUDA and
  // the sorts), counting the chunk arrays held now as free.
  // The pool's unused memory (the PM's meshes, the tree's build arrays, given back) counts as
  // free.
  const std::size_t free_bytes = device_available_bytes();
  const std::size_t margin = std::size_t{512} << 20;
  const std::size_t others = rel_.growth_bytes(3 * n_ * runner_.position_bytes()) + acc_tree_.growth_bytes(3 * n_);
  const std::size_t usable = (allocation_cap_ > 0 ? std::min(free_bytes, allocation_cap_) : free_bytes) +
                             chunks_.held_bytes();
  const std::size_t fixed = DeviceP2PChunks::bytes_for(entries, 0, n_leaves) + others + margin;
  // 16 bytes a task, at most kMaxP2PChunkTasks however much memory is free, and at most the
  // memory plan's chunk (a quarter of the planned tasks), so that the short-range step's
  // arrays stay within the plan's largest phase whatever memory is free.
  const std::size_t most =
      max_chunk_tasks_ > 0 ? max_chunk_tasks_ : planned_p2p_chunk_tasks(tree_.n_leaves(), tree_.is_forest());
  const std::size_t limit = p2p_chunk_tasks(usable, fixed, 16, most);
  if (limit == 0) fail("P2P on the GPU: no device memory left for the tasks ({:.2f} GiB free)", free_bytes / 1073741824.0);
  return limit >= tasks ? 0 : limit;
}

template void DeviceShortRange::compute<float>(const double*, std::size_t, const std::uint8_t*, int, float*,
                                               cudaStream_t, const double*);
template void DeviceShortRange::compute<double>(const double*, std::size_t, const std::uint8_t*, int, double*,
                                                cudaStream_t, const double*);
template void DeviceShortRange::compute_forest<float>(const double*, std::size_t, const std::vector<std::uint32_t>&,
                                                      bool, const std::uint8_t*, float*, std::size_t, cudaStream_t);
template void DeviceShortRange::compute_forest<double>(const double*, std::size_t, const std::vector<std::uint32_t>&,
                                                       bool, const std::uint8_t*, double*, std::size_t, cudaStream_t);

DeviceShortRangeStats DeviceShortRange::stats() const {
  DeviceShortRangeStats s;
  ORBIS_CUDA_CHECK(cudaEventSynchronize(events_[6]));
  auto seconds = [&](int a, int b) {
    float ms = 0;
    ORBIS_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[a], events_[b]));
    return 1e-3 * ms;
  };
  s.tree = seconds(0, 1);
  s.walk = seconds(1, 2);
  // Events 2-4 enclose the pair count, positions, selection and sorts, and the kernels.
  s.p2p = chunks_.kernel_seconds();
  s.grouping = seconds(2, 4) - s.p2p;
  // The far field: its multipoles (events 9-12) and other expansions (13-10), on the side
  // stream in vacuum (beside the walk, then the P2P), and their evaluation at the particles
  // (11-5).
  s.far_field = seconds(9, 12) + seconds(13, 10) + seconds(11, 5);
  s.scatter = seconds(5, 6);
  s.total = seconds(0, 6);
  s.active_flags = seconds(1, 7);
  s.walk_nodes = seconds(7, 8);
  const DeviceOrbTree::Times t = tree_.times();
  s.tree_parts[0] = 1e-3 * t.sort_ms;
  s.tree_parts[1] = 1e-3 * t.split_ms;
  s.tree_parts[2] = 1e-3 * t.finish_ms;
  s.rebuilt = rebuilt_;
  const unsigned long long* c = host_counters_.data();
  s.p2p_pairs = static_cast<std::uint64_t>(c[0]);
  s.p2p_interactions = static_cast<double>(c[0]);
  s.particles = n_;
  s.active_particles = active_subset_ ? static_cast<std::size_t>(c[1]) : n_;
  s.active_leaves = active_subset_ ? static_cast<std::size_t>(c[2]) : tree_.n_leaves();
  s.m2l_tasks = walk_.m2l_count();
  s.leaf_cell_pairs = walk_.leaf_cell_count();
  s.p2p_tasks = walk_.p2p_tasks();
  s.nodes = tree_.n_nodes();
  s.leaves = tree_.n_leaves();
  s.walk_launches = walk_.levels();
  s.walk_reruns = walk_.reruns();
  s.walk_frontier = walk_.widest_frontier();
  s.p2p_chunks = chunks_.chunks();
  return s;
}

double* DeviceShortRange::borrow_scratch(std::size_t doubles) {
  acc_tree_.ensure_exact(doubles);
  return acc_tree_.data();
}

std::size_t DeviceShortRange::held_bytes() const {
  return walk_.held_bytes() + chunks_.held_bytes() + walk_nodes_.capacity() * sizeof(WalkNode) +
         prefix_.capacity() * 4 + rel_.capacity() + acc_tree_.capacity() * 8 + weights_tree_.capacity() * 8 +
         node_active_.capacity() + scan_temp_.capacity();
}

}  // namespace orbis::gpu
