#include "gpu/subtree_order_cuda.cuh"

#include <algorithm>

#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "core/error.hpp"
#include "core/vec3.hpp"
#include "domain/top_tree_keys.hpp"
#include "gpu/device_buffer.cuh"
#include "tree/orb_tree.hpp"
#include "tree/split_axis.hpp"

namespace orbis::gpu {
namespace {

constexpr int kThreads = 256;
unsigned blocks_for(std::size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// Each group's size into count[g]; a particle outside [0, n_groups) marks *bad with its
// index + 1 (the largest, as the host names it).
__global__ void count_groups(const std::int32_t* group_of, std::uint32_t n, std::int32_t n_groups,
                             std::uint32_t* count, unsigned long long* bad) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  const std::int32_t g = i < n ? group_of[i] : -1;
  if (i < n && (g < 0 || g >= n_groups)) atomicMax(bad, static_cast<unsigned long long>(i) + 1);
  // Particles in tree order come in runs of one group: a warp adds its equal groups at once
  // (one atomic per distinct group, not per particle, on the runs' counters).
  const bool counted = i < n && g >= 0 && g < n_groups;
  const unsigned peers = __match_any_sync(0xffffffffu, counted ? g : -1);
  if (counted && threadIdx.x % 32 == static_cast<unsigned>(__ffs(peers) - 1)) atomicAdd(count + g, static_cast<std::uint32_t>(__popc(peers)));
}

// Sort keys and values of the particles in the order idx (null: 0..n-1): a coordinate's
// order-preserving bits (-0.0 as +0.0, as the host's comparisons see it) or the group.
__global__ void coordinate_keys(const double* c, const std::uint32_t* idx, std::uint32_t n, std::uint64_t* keys,
                                std::uint32_t* vals) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const std::uint32_t j = idx ? idx[i] : i;
  keys[i] = top_tree::ordered_bits(c[j]);
  vals[i] = j;
}
__global__ void group_keys(const std::int32_t* group_of, const std::uint32_t* idx, std::uint32_t n,
                           std::uint64_t* keys, std::uint32_t* vals) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const std::uint32_t j = idx[i];
  keys[i] = static_cast<std::uint64_t>(group_of[j]);
  vals[i] = j;
}

__global__ void find_ties(const std::uint64_t* keys, std::uint32_t n, int* tie) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x + 1;
  if (i < n && keys[i] == keys[i - 1]) *tie = 1;   // every writer writes 1: no race to lose
}

// A node of a group's subtree: the list positions [first, first + count). The shape's
// (OrbTree::shape): more than max_leaf members split, the left child holding count / 2.
struct Node {
  std::uint32_t first, count;
};

// The child of an internal node holding list position p.
__device__ __forceinline__ Node child_holding(Node nd, std::uint32_t p) {
  const std::uint32_t left = nd.count / 2;
  return p - nd.first < left ? Node{nd.first, left} : Node{nd.first + left, nd.count - left};
}

// The node's split (or leaf-sort) axis: the longest side of its tight box, read off the ends
// of its segment in each sorted list (split_axis below the top depth, as order_node takes it).
__device__ __forceinline__ int node_axis(Node nd, const std::uint32_t* lists, std::uint32_t n, const double* x,
                                         const double* y, const double* z) {
  const double* c[3] = {x, y, z};
  Vec3d lo, hi;
  for (int d = 0; d < 3; ++d) {
    const std::uint32_t* list = lists + static_cast<std::size_t>(d) * n;
    lo[d] = c[d][list[nd.first]];
    hi[d] = c[d][list[nd.first + nd.count - 1]];
  }
  return longest_axis(lo, hi);
}

// Every list position starts at its group's root (the lists are group-major: the group at
// position p is the same in all three).
__global__ void group_roots(std::uint32_t n, const std::uint32_t* list, const std::int32_t* group_of,
                            const std::uint32_t* offsets, Node* node) {
  const std::uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= n) return;
  const std::int32_t g = group_of[list[p]];
  node[p] = Node{offsets[g], offsets[g + 1] - offsets[g]};
}

// One level: node[p] moves down to the child holding p (after the previous level's
// partition; leaves stay), then the members of internal nodes are flagged left (1) or
// right (0) by their rank in the split axis' segment.
__global__ void flag_level(std::uint32_t n, int max_leaf, bool descend, const std::uint32_t* lists, const double* x,
                           const double* y, const double* z, Node* node, std::uint8_t* flag) {
  const std::uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= n) return;
  Node nd = node[p];
  const auto leaf_max = static_cast<std::uint32_t>(max_leaf);
  if (nd.count <= leaf_max) return;
  if (descend) {
    nd = child_holding(nd, p);
    node[p] = nd;
    if (nd.count <= leaf_max) return;
  }
  const int axis = node_axis(nd, lists, n, x, y, z);
  flag[lists[static_cast<std::size_t>(axis) * n + p]] = p - nd.first < nd.count / 2;
}

// The left flag at position i of the three lists (i < 3n: a 64-bit index).
struct FlagOf {
  const std::uint32_t* lists;
  const std::uint8_t* flag;
  __host__ __device__ std::uint32_t operator()(std::size_t i) const { return flag[lists[i]]; }
};
using FlagIter = thrust::transform_iterator<FlagOf, thrust::counting_iterator<std::size_t>>;

// Stable partition of each list inside every internal node (blockIdx.y: the list): the left
// members keep their order at the front, the right ones theirs behind. before[i]: left
// members in the lists before position i (32-bit: differences inside one node are exact
// even if the running sum wrapped).
__global__ void partition_level(std::uint32_t n, int max_leaf, const Node* node, const std::uint32_t* in,
                                const std::uint32_t* before, const std::uint8_t* flag, std::uint32_t* out) {
  const std::uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= n) return;
  const std::size_t base = static_cast<std::size_t>(blockIdx.y) * n;
  const std::uint32_t v = in[base + p];
  const Node nd = node[p];
  if (nd.count <= static_cast<std::uint32_t>(max_leaf)) {
    out[base + p] = v;
    return;
  }
  const std::uint32_t s = nd.first;
  const std::uint32_t left_before = before[base + p] - before[base + s];
  out[base + (flag[v] ? s + left_before : s + nd.count / 2 + (p - s - left_before))] = v;
}

// The leaves' order: each leaf's segment of its longest axis' list (the host sorts a leaf in
// that axis' total order).
__global__ void leaf_order(std::uint32_t n, int max_leaf, bool descend, const std::uint32_t* lists, const double* x,
                           const double* y, const double* z, const Node* node, std::uint32_t* order) {
  const std::uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= n) return;
  Node nd = node[p];
  if (descend && nd.count > static_cast<std::uint32_t>(max_leaf)) nd = child_holding(nd, p);
  order[p] = lists[static_cast<std::size_t>(node_axis(nd, lists, n, x, y, z)) * n + p];
}

// The working arrays of one call, from the pool on the call's stream, and back to it.
struct Work {
  DeviceArray<std::uint32_t> count, lists[2], scan, vals[2];
  DeviceArray<std::uint64_t> keys[2];
  DeviceArray<Node> node;
  DeviceArray<std::uint8_t> flag;
  DeviceArray<unsigned char> temp;
  DeviceArray<int> ties;
  DeviceArray<unsigned long long> bad;
  void release() {
    count.release();
    for (auto& l : lists) l.release();
    scan.release();
    for (auto& v : vals) v.release();
    for (auto& k : keys) k.release();
    node.release();
    flag.release();
    temp.release();
    ties.release();
    bad.release();
  }
};

// Stable sort of idx (null: 0..n-1) into out (out may be idx) by a coordinate (bits 0..64)
// or by the group (its bits alone); flags *tie if two keys are equal (tie not null).
void sort_indices(Work& w, std::size_t n, const double* c, const std::int32_t* group_of, int group_bits,
                  const std::uint32_t* idx, std::uint32_t* out, int* tie, cudaStream_t stream,
                  std::size_t max_cub_items) {
  const auto nn = static_cast<std::uint32_t>(n);
  if (c) coordinate_keys<<<blocks_for(n), kThreads, 0, stream>>>(c, idx, nn, w.keys[0].data(), w.vals[0].data());
  else group_keys<<<blocks_for(n), kThreads, 0, stream>>>(group_of, idx, nn, w.keys[0].data(), w.vals[0].data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  cub::DoubleBuffer<std::uint64_t> keys(w.keys[0].data(), w.keys[1].data());
  cub::DoubleBuffer<std::uint32_t> vals(w.vals[0].data(), w.vals[1].data());
  radix_sort_pairs(w.temp.data(), w.temp.capacity(), keys, vals, n, 0, c ? 64 : group_bits, stream, max_cub_items);
  if (tie) {
    find_ties<<<blocks_for(n), kThreads, 0, stream>>>(keys.Current(), nn, tie);
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(out, vals.Current(), n * sizeof(std::uint32_t), cudaMemcpyDeviceToDevice, stream));
}

}  // namespace

void subtree_order_by_group_cuda(const double* x, const double* y, const double* z, const std::int32_t* group_of,
                                 std::size_t n, std::int32_t n_groups, int max_leaf, std::uint32_t* order,
                                 std::vector<std::uint32_t>& group_offsets, cudaStream_t stream,
                                 std::size_t max_cub_items) {
  if (max_leaf < 1) fail("ORB subtree order: max_leaf = {} must be >= 1", max_leaf);
  if (n_groups < 0) fail("ORB subtree order: {} groups", n_groups);
  if (n > static_cast<std::size_t>(OrbTree::kMaxParticles))
    fail("ORB subtree order: {} particles, more than its 32-bit indices hold ({})", n, OrbTree::kMaxParticles);
  const std::size_t groups = static_cast<std::size_t>(n_groups);
  group_offsets.assign(groups + 1, 0);
  if (n == 0) return;
  const auto nn = static_cast<std::uint32_t>(n);
  const double* c[3] = {x, y, z};

  AllocationStream on_stream(stream);
  Work w;
  w.count.ensure_exact(groups + 1);
  for (auto& l : w.lists) l.ensure_exact(3 * n);
  w.scan.ensure_exact(3 * n);
  for (auto& v : w.vals) v.ensure_exact(n);
  for (auto& k : w.keys) k.ensure_exact(n);
  w.node.ensure_exact(n);
  w.flag.ensure_exact(n);
  w.ties.ensure_exact(3);
  w.bad.ensure_exact(1);
  const FlagIter flags(thrust::counting_iterator<std::size_t>(0), FlagOf{nullptr, nullptr});
  w.temp.ensure_exact(std::max({radix_sort_pairs_bytes<std::uint64_t, std::uint32_t>(n, 0, 64, max_cub_items),
                          exclusive_sum_bytes(flags, w.scan.data(), 3 * n, max_cub_items),
                          exclusive_sum_bytes(w.count.data(), w.count.data(), groups + 1, max_cub_items)}));

  // The groups' sizes and offsets, and each axis' list by its coordinate alone with a check
  // for equal coordinates: then one wait, for the offsets (and any bad group index).
  ORBIS_CUDA_CHECK(cudaMemsetAsync(w.count.data(), 0, (groups + 1) * sizeof(std::uint32_t), stream));
  ORBIS_CUDA_CHECK(cudaMemsetAsync(w.bad.data(), 0, sizeof(unsigned long long), stream));
  ORBIS_CUDA_CHECK(cudaMemsetAsync(w.ties.data(), 0, 3 * sizeof(int), stream));
  // Flags are written for the members of internal nodes only, but scanned over all.
  ORBIS_CUDA_CHECK(cudaMemsetAsync(w.flag.data(), 0, n, stream));
  count_groups<<<blocks_for(n), kThreads, 0, stream>>>(group_of, nn, n_groups, w.count.data(), w.bad.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  exclusive_sum(w.temp.data(), w.temp.capacity(), w.count.data(), w.count.data(), groups + 1, stream, max_cub_items);
  std::uint32_t* lists = w.lists[0].data();
  for (int a = 0; a < 3; ++a)
    sort_indices(w, n, c[a], nullptr, 0, nullptr, lists + a * n, w.ties.data() + a, stream, max_cub_items);
  int ties[3] = {0, 0, 0};
  unsigned long long bad = 0;
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(group_offsets.data(), w.count.data(), (groups + 1) * sizeof(std::uint32_t),
                                   cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(ties, w.ties.data(), sizeof(ties), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(&bad, w.bad.data(), sizeof(bad), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (bad > 0) {
    std::int32_t g = 0;
    ORBIS_CUDA_CHECK(cudaMemcpy(&g, group_of + (bad - 1), sizeof(g), cudaMemcpyDeviceToHost));
    w.release();
    fail("ORB subtree order: particle {} in group {}, outside [0, {})", bad - 1, g, n_groups);
  }

  // An axis with equal coordinates somewhere is sorted again lexicographically (x_a+2, then
  // x_a+1, then x_a, each stable), the host's total order; then every list stably by group.
  int group_bits = 1;
  while (group_bits < 31 && (std::uint64_t{1} << group_bits) < groups) ++group_bits;
  for (int a = 0; a < 3; ++a) {
    std::uint32_t* out = lists + a * n;
    if (ties[a]) {
      sort_indices(w, n, c[(a + 2) % 3], nullptr, 0, nullptr, out, nullptr, stream, max_cub_items);
      sort_indices(w, n, c[(a + 1) % 3], nullptr, 0, out, out, nullptr, stream, max_cub_items);
      sort_indices(w, n, c[a], nullptr, 0, out, out, nullptr, stream, max_cub_items);
    }
    sort_indices(w, n, nullptr, group_of, group_bits, out, out, nullptr, stream, max_cub_items);
  }

  // The levels of the largest group's subtree (its larger child holds the rounded-up half).
  std::uint32_t largest = 0;
  for (std::size_t g = 0; g < groups; ++g) largest = std::max(largest, group_offsets[g + 1] - group_offsets[g]);
  int levels = 0;
  for (std::uint32_t m = largest; m > static_cast<std::uint32_t>(max_leaf); m -= m / 2) ++levels;

  group_roots<<<blocks_for(n), kThreads, 0, stream>>>(nn, lists, group_of, w.count.data(), w.node.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  int cur = 0;
  for (int d = 0; d < levels; ++d) {
    const std::uint32_t* in = w.lists[cur].data();
    flag_level<<<blocks_for(n), kThreads, 0, stream>>>(nn, max_leaf, d > 0, in, x, y, z, w.node.data(),
                                                       w.flag.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    const FlagIter level_flags(thrust::counting_iterator<std::size_t>(0), FlagOf{in, w.flag.data()});
    exclusive_sum(w.temp.data(), w.temp.capacity(), level_flags, w.scan.data(), 3 * n, stream, max_cub_items);
    partition_level<<<dim3(blocks_for(n), 3), kThreads, 0, stream>>>(nn, max_leaf, w.node.data(), in, w.scan.data(),
                                                                       w.flag.data(), w.lists[1 - cur].data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    cur = 1 - cur;
  }
  leaf_order<<<blocks_for(n), kThreads, 0, stream>>>(nn, max_leaf, levels > 0, w.lists[cur].data(), x, y, z,
                                                     w.node.data(), order);
  ORBIS_CUDA_CHECK(cudaGetLastError());
  w.release();
}

}  // namespace orbis::gpu
