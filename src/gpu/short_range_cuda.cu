#include "gpu/short_range_cuda.cuh"

#include <algorithm>
#include <cmath>

#include <cub/device/device_scan.cuh>

#include "core/error.hpp"
#include "fmm/truncation.hpp"
#include "gpu/particle_kernels.cuh"
#include "gpu/p2p_cuda.hpp"

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
__global__ void active_nodes(const DeviceShapeNode* nodes, std::size_t n_nodes, const std::uint32_t* prefix,
                             std::size_t n, std::uint8_t* node_active, std::uint8_t* leaf_active,
                             unsigned long long* counters) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (k == 0) counters[1] = prefix[n];
  if (k >= n_nodes) return;
  const DeviceShapeNode nd = nodes[k];
  const bool active = prefix[nd.first + nd.count] > prefix[nd.first];
  node_active[k] = active;
  if (nd.leaf >= 0) {
    leaf_active[nd.leaf] = active;
    if (active) atomicAdd(counters + 2, 1ull);   // an integer count: exact in any order
  }
}

}  // namespace

DeviceShortRange::DeviceShortRange(const ShortRangeSettings& settings, int device)
    : settings_(settings), runner_(device), fmm_(settings.multipole_order, settings.r_s) {
  ShortRangeSolver checked(settings);   // the host solver's checks, before any work
  if (settings.max_leaf < 1 || static_cast<unsigned>(settings.max_leaf) > CudaP2PEvaluator::kMaxLeafCount)
    fail("short range on the GPU: [gravity] max_leaf = {} must be in [1, {}] (a source leaf fills one tile)",
         settings.max_leaf, CudaP2PEvaluator::kMaxLeafCount);
  // The tabulated P2P cuts at min(r_cut, 6 r_s), where the table ends; the walk uses the same
  // cut (as ShortRangeSolver::begin).
  const double r_cut = settings.taylor_order >= 0 ? std::min(settings.r_cut, 2.0 * settings.r_s * kTruncationTableXMax)
                                                  : settings.r_cut;
  P2PSettings& ps = p2p_settings_;
  ps.box_mpc_h = settings.box_mpc_h;
  ps.r_s = settings.r_s;
  ps.r_cut = r_cut;
  ps.softening = settings.softening;
  ps.g_mass = settings.g_mass;
  ps.taylor_order = settings.taylor_order;
  ps.table_size = settings.taylor_table_size;
  ps.double_precision = settings.p2p_double;
  walk_settings_ = WalkSettings{settings.box_mpc_h, r_cut, settings.theta};
  runner_.prepare(ps);
  // The walk writes its P2P entries straight into the grouping's upload arrays (room for
  // the expanded tasks, twice the entries), which expand and sort them in place.
  walk_.set_p2p_buffers([this](std::size_t capacity, std::uint32_t** targets, std::uint32_t** sources) {
    *targets = grouping_.upload_targets(2 * capacity);
    *sources = grouping_.upload_sources(2 * capacity);
  });
  for (cudaEvent_t& e : events_) ORBIS_CUDA_CHECK(cudaEventCreate(&e));
  counters_.ensure(3);
  host_counters_.ensure(3);
}

DeviceShortRange::~DeviceShortRange() {
  for (cudaEvent_t e : events_)
    if (e) cudaEventDestroy(e);
}

void DeviceShortRange::flag_active(const std::uint8_t* bin, int min_active_bin, cudaStream_t stream) {
  const std::size_t n = n_, nn = tree_.n_nodes(), nl = tree_.n_leaves();
  prefix_.ensure(n + 1);
  node_active_.ensure(nn);
  leaf_active_.ensure(nl);
  active_flags<<<blocks_for(n + 1), kThreads, 0, stream>>>(tree_.order(), bin, min_active_bin, n, prefix_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  std::size_t bytes = 0;
  ORBIS_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, prefix_.data(), prefix_.data(), static_cast<int>(n + 1)));
  scan_temp_.ensure(bytes);
  bytes = scan_temp_.capacity();
  ORBIS_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(scan_temp_.data(), bytes, prefix_.data(), prefix_.data(),
                                                 static_cast<int>(n + 1), stream));
  active_nodes<<<blocks_for(nn), kThreads, 0, stream>>>(tree_.shape_nodes(), nn, prefix_.data(), n,
                                                        node_active_.data(), leaf_active_.data(), counters_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

template <typename Ga>
void DeviceShortRange::compute(const double* x, std::size_t n, const std::uint8_t* bin, int min_active_bin, Ga* out,
                               cudaStream_t stream) {
  if (n == 0) fail("short range on the GPU: no particles");
  // The last step's pair count (full steps) for the tree policy.
  double last_pairs = 0;
  if (pending_) {
    ORBIS_CUDA_CHECK(cudaEventSynchronize(events_[6]));
    if (!active_subset_) last_pairs = static_cast<double>(host_counters_.data()[0]);
    if (rebuilt_ && !active_subset_) pairs_at_build_ = last_pairs;
  }
  const bool rebuild = tree_.size() != n || refits_ >= max_refits_ ||
                       (pairs_at_build_ > 0 && last_pairs > growth_ * pairs_at_build_);
  n_ = n;
  active_subset_ = bin != nullptr && min_active_bin > 0;
  const double* y = x + n;
  const double* z = x + 2 * n;
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[0], stream));
  if (rebuild) {
    tree_.build(x, y, z, n, settings_.max_leaf, 1.0, stream);
    refits_ = 0;
    pairs_at_build_ = 0;
  } else {
    tree_.refit(x, y, z, stream);
    ++refits_;
  }
  rebuilt_ = rebuild;
  pending_ = true;
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[1], stream));
  const std::size_t nn = tree_.n_nodes(), nl = tree_.n_leaves();
  ORBIS_CUDA_CHECK(cudaMemsetAsync(counters_.data(), 0, 3 * sizeof(unsigned long long), stream));
  if (active_subset_) flag_active(bin, min_active_bin, stream);
  const std::uint8_t* node_active = active_subset_ ? node_active_.data() : nullptr;
  const std::uint8_t* leaf_active = active_subset_ ? leaf_active_.data() : nullptr;

  walk_nodes_.ensure(nn);
  tree_.walk_nodes(walk_nodes_.data(), stream);
  walk_.run(walk_nodes_.data(), nn, nl, walk_settings_, stream, node_active);   // waits once, at its end
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[2], stream));

  // The walk's entries, already in the grouping's arrays: expanded, sorted by target.
  const std::size_t entries = walk_.p2p_entries(), tasks = walk_.p2p_tasks();
  task_t_.ensure(std::max<std::size_t>(tasks, 1));
  task_s_.ensure(std::max<std::size_t>(tasks, 1));
  P2PKernelRunner::count_pairs(walk_.p2p_targets(), walk_.p2p_sources(), entries, tree_.leaves(), leaf_active,
                               counters_.data(), stream);
  grouping_.run(stream, entries, tasks, task_t_.data(), task_s_.data(), nl);
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[3], stream));

  // P2P: leaf-relative positions, then the kernel over the groups (writes every particle of
  // every evaluated target leaf).
  rel_.ensure(3 * n * runner_.position_bytes());
  acc_tree_.ensure(3 * n);
  runner_.relative_positions(tree_.tree_x(), tree_.tree_y(), tree_.tree_z(), tree_.leaves(), nl, n, rel_.data(),
                             stream);
  ORBIS_CUDA_CHECK(cudaMemsetAsync(acc_tree_.data(), 0, 3 * n * sizeof(double), stream));
  P2PLaunch launch;
  launch.groups = grouping_.groups();
  launch.n_groups = grouping_.n_groups();
  launch.sources = grouping_.sorted_sources();
  launch.leaves = tree_.leaves();
  launch.n_leaves = nl;
  launch.n_tasks = tasks;
  launch.rel = rel_.data();
  launch.n = n;
  launch.acc = acc_tree_.data();
  launch.leaf_active = leaf_active;
  runner_.launch(launch, stream);
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[4], stream));

  // Far field: added to the P2P sums of the leaves that have a local expansion.
  if (walk_.m2l_count() > 0) {
    FmmTreeView view;
    view.n_nodes = nn;
    view.n_leaves = nl;
    view.nodes = tree_.shape_nodes();
    view.geometry = tree_.geometry();
    view.leaf_node = tree_.leaf_nodes();
    view.level_nodes = tree_.level_nodes();
    view.level_offset = &tree_.level_offsets();
    view.x = tree_.tree_x();
    view.y = tree_.tree_y();
    view.z = tree_.tree_z();
    fmm_.compute(view, walk_.m2l_tasks(), walk_.m2l_offsets(), walk_.m2l_count(), settings_.box_mpc_h, settings_.g_mass,
                 acc_tree_.data(), stream);
  }
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[5], stream));
  scatter_short_range<Ga>(acc_tree_.data(), tree_.order(), active_subset_ ? bin : nullptr, min_active_bin, n, out,
                          stream);
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(host_counters_.data(), counters_.data(), 3 * sizeof(unsigned long long),
                                   cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaEventRecord(events_[6], stream));
}

void DeviceShortRange::set_tree_policy(int max_refits, double growth) {
  max_refits_ = std::max(max_refits, 0);
  growth_ = growth;
}

template void DeviceShortRange::compute<float>(const double*, std::size_t, const std::uint8_t*, int, float*,
                                               cudaStream_t);
template void DeviceShortRange::compute<double>(const double*, std::size_t, const std::uint8_t*, int, double*,
                                                cudaStream_t);

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
  s.grouping = seconds(2, 3);
  s.p2p = seconds(3, 4);
  s.far_field = seconds(4, 5);
  s.scatter = seconds(5, 6);
  s.total = seconds(0, 6);
  s.rebuilt = rebuilt_;
  const unsigned long long* c = host_counters_.data();
  s.p2p_interactions = static_cast<double>(c[0]);
  s.active_particles = active_subset_ ? static_cast<std::size_t>(c[1]) : n_;
  s.active_leaves = active_subset_ ? static_cast<std::size_t>(c[2]) : tree_.n_leaves();
  s.m2l_tasks = walk_.m2l_count();
  s.p2p_tasks = walk_.p2p_tasks();
  s.nodes = tree_.n_nodes();
  s.leaves = tree_.n_leaves();
  s.walk_launches = walk_.levels();
  s.walk_reruns = walk_.reruns();
  return s;
}

std::size_t DeviceShortRange::held_bytes() const {
  return walk_.held_bytes() + grouping_.held_bytes() + walk_nodes_.capacity() * sizeof(WalkNode) +
         (task_t_.capacity() + task_s_.capacity() + prefix_.capacity()) * 4 + rel_.capacity() +
         acc_tree_.capacity() * 8 + leaf_active_.capacity() + node_active_.capacity() + scan_temp_.capacity();
}

}  // namespace orbis::gpu
