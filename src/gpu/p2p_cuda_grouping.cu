#include "gpu/p2p_cuda_grouping.cuh"

#include <algorithm>

#include "core/error.hpp"

namespace orbis::gpu {
namespace {

__global__ void pack_groups(const std::uint32_t* unique, const std::uint32_t* starts,
                            const std::uint32_t* counts, const std::uint32_t* n_groups,
                            GroupIdx* groups) {
  const std::uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g < *n_groups) groups[g] = GroupIdx{unique[g], starts[g], counts[g]};
}

// GroupSchedule's key: the leading zeros of the task count (fewer: more tasks, earlier);
// 33 past the last group, so those sort to the end.
constexpr int kScheduleKeyBits = 6;
__global__ void schedule_keys(const GroupIdx* groups, const std::uint32_t* n_groups, std::uint32_t max_groups,
                              std::uint32_t* keys, std::uint32_t* index) {
  const std::uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= max_groups) return;
  keys[g] = g < *n_groups ? static_cast<std::uint32_t>(__clz(groups[g].count)) : 33u;
  index[g] = g;
}

__global__ void gather_groups(const GroupIdx* groups, const std::uint32_t* index, const std::uint32_t* n_groups,
                              GroupIdx* out) {
  const std::uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g < *n_groups) out[g] = groups[index[g]];
}

// 1 or 2 tasks per uploaded entry.
__global__ void entry_sizes(const std::uint32_t* targets, std::uint32_t n, std::uint32_t* sizes) {
  const std::uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) sizes[k] = 1u + (targets[k] >> 31);
}

// Entry k to position at[k]; a mutual entry's reverse task (source and target swapped,
// image negated) to at[k] + 1.
__global__ void expand_entries(const std::uint32_t* in_t, const std::uint32_t* in_s, const std::uint32_t* at,
                               std::uint32_t n, std::uint32_t* out_t, std::uint32_t* out_s) {
  const std::uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= n) return;
  const std::uint32_t t = in_t[k], w = in_s[k], p = at[k];
  const std::uint32_t target = t & ~kMutualBit;
  out_t[p] = target;
  out_s[p] = w;
  if (t & kMutualBit) {
    const std::int8_t back[3] = {static_cast<std::int8_t>(-packed_image(w, 0)),
                                 static_cast<std::int8_t>(-packed_image(w, 1)),
                                 static_cast<std::int8_t>(-packed_image(w, 2))};
    out_t[p + 1] = packed_leaf(w);
    out_s[p + 1] = pack_source(target, back);
  }
}

int key_bits(std::size_t n_leaves) {
  int bits = 1;
  while (bits < 32 && (std::uint64_t{1} << bits) < n_leaves) ++bits;
  return bits;
}

unsigned blocks_for(std::size_t n) { return static_cast<unsigned>((n + 255) / 256); }

// Groups (distinct targets) are at most min(tasks, leaves).
std::size_t max_groups(std::size_t n_tasks, std::size_t n_leaves) {
  return std::max<std::size_t>(std::min(n_tasks, n_leaves), 1);
}

}  // namespace

std::size_t DeviceGrouping::temp_bytes(std::size_t n_entries, std::size_t n_tasks, std::size_t n_leaves) {
  const std::size_t ng = max_groups(n_tasks, n_leaves);
  const std::size_t sort = radix_sort_pairs_bytes<std::uint32_t, std::uint32_t>(n_tasks, 0, key_bits(n_leaves));
  const std::size_t rle = run_length_encode_bytes(up_targets_.data(), unique_.data(), counts_.data(),
                                                  n_groups_.data(), n_tasks);
  const std::size_t scan = exclusive_sum_bytes(counts_.data(), starts_.data(), ng);
  const std::size_t expand = exclusive_sum_bytes(counts_in_.data(), positions_.data(), std::max<std::size_t>(n_entries, 1));
  return std::max({sort, rle, scan, expand});
}

std::size_t DeviceGrouping::growth_bytes(std::size_t n_entries, std::size_t n_tasks, std::size_t n_leaves) {
  const std::size_t ng = max_groups(n_tasks, n_leaves);
  return up_targets_.growth_bytes(n_tasks) + up_sources_.growth_bytes(n_tasks) + targets_.growth_bytes(n_tasks) +
         sources_.growth_bytes(n_tasks) + counts_in_.growth_bytes(n_entries) + positions_.growth_bytes(n_entries) +
         unique_.growth_bytes(ng) + counts_.growth_bytes(ng) + starts_.growth_bytes(ng) + groups_.growth_bytes(ng) +
         temp_.growth_bytes(temp_bytes(n_entries, n_tasks, n_leaves)) + 64;
}

std::size_t DeviceGrouping::held_bytes() const {
  return (up_targets_.capacity() + up_sources_.capacity() + targets_.capacity() + sources_.capacity() +
          counts_in_.capacity() + positions_.capacity() + unique_.capacity() + counts_.capacity() +
          starts_.capacity()) * sizeof(std::uint32_t) +
         groups_.capacity() * sizeof(GroupIdx) + temp_.capacity();
}

std::uint32_t* DeviceGrouping::upload_targets(std::size_t n_tasks) {
  up_targets_.ensure(std::max<std::size_t>(n_tasks, 1));
  return up_targets_.data();
}
std::uint32_t* DeviceGrouping::upload_sources(std::size_t n_tasks) {
  up_sources_.ensure(std::max<std::size_t>(n_tasks, 1));
  return up_sources_.data();
}

void DeviceGrouping::run(cudaStream_t stream, std::size_t n_entries, std::size_t n_tasks, std::size_t n_leaves) {
  if (n_tasks > kMaxTasks)
    fail("P2P grouping on the GPU: {} tasks at once, more than the {} one grouping holds (32-bit task positions); "
         "the caller must split them into chunks of target leaves", n_tasks, kMaxTasks);
  if (n_entries > n_tasks || up_targets_.capacity() < n_tasks || up_sources_.capacity() < n_tasks)
    fail("internal: P2P grouping of {} entries ({} tasks) with upload arrays for {} and {}: upload_targets() and "
         "upload_sources() size them before they are filled", n_entries, n_tasks, up_targets_.capacity(),
         up_sources_.capacity());
  const std::size_t ng = max_groups(n_tasks, n_leaves);
  targets_.ensure(std::max<std::size_t>(n_tasks, 1));
  sources_.ensure(std::max<std::size_t>(n_tasks, 1));
  counts_in_.ensure(std::max<std::size_t>(n_entries, 1));
  positions_.ensure(std::max<std::size_t>(n_entries, 1));
  for (auto* a : {&unique_, &counts_, &starts_}) a->ensure(ng);
  n_groups_.ensure(1);
  groups_.ensure(ng);
  temp_.ensure(temp_bytes(n_entries, n_tasks, n_leaves));
  ORBIS_CUDA_CHECK(cudaMemsetAsync(n_groups_.data(), 0, sizeof(std::uint32_t), stream));
  sorted_targets_ = targets_.data();
  sorted_sources_ = sources_.data();
  if (n_tasks == 0) return;

  // Expansion: positions by an exclusive scan of the entry sizes, then one scatter.
  const auto ne = static_cast<std::uint32_t>(n_entries);
  entry_sizes<<<blocks_for(ne), 256, 0, stream>>>(up_targets_.data(), ne, counts_in_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  exclusive_sum(temp_.data(), temp_.capacity(), counts_in_.data(), positions_.data(), n_entries, stream);
  expand_entries<<<blocks_for(ne), 256, 0, stream>>>(up_targets_.data(), up_sources_.data(), positions_.data(), ne,
                                                     targets_.data(), sources_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());

  // Double-buffer sort: the upload arrays are free again and serve as the second buffers.
  cub::DoubleBuffer<std::uint32_t> keys(targets_.data(), up_targets_.data()),
      values(sources_.data(), up_sources_.data());
  radix_sort_pairs(temp_.data(), temp_.capacity(), keys, values, n_tasks, 0, key_bits(n_leaves), stream);
  sorted_targets_ = keys.Current();
  sorted_sources_ = values.Current();
  // Counts past the last run stay zero, so the scan over all ng entries is valid for the runs.
  ORBIS_CUDA_CHECK(cudaMemsetAsync(counts_.data(), 0, ng * sizeof(std::uint32_t), stream));
  run_length_encode(temp_.data(), temp_.capacity(), sorted_targets_, unique_.data(), counts_.data(), n_groups_.data(),
                    n_tasks, stream);
  exclusive_sum(temp_.data(), temp_.capacity(), counts_.data(), starts_.data(), ng, stream);
  pack_groups<<<blocks_for(ng), 256, 0, stream>>>(unique_.data(), starts_.data(), counts_.data(),
                                                  n_groups_.data(), groups_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

std::size_t GroupSchedule::temp_bytes(std::size_t max_groups) const {
  return radix_sort_pairs_bytes<std::uint32_t, std::uint32_t>(std::max<std::size_t>(max_groups, 1), 0,
                                                              kScheduleKeyBits);
}

std::size_t GroupSchedule::growth_bytes(std::size_t max_groups) {
  std::size_t bytes = ordered_.growth_bytes(max_groups) + temp_.growth_bytes(temp_bytes(max_groups));
  for (int b = 0; b < 2; ++b) bytes += keys_[b].growth_bytes(max_groups) + index_[b].growth_bytes(max_groups);
  return bytes;
}

std::size_t GroupSchedule::held_bytes() const {
  return (keys_[0].capacity() + keys_[1].capacity() + index_[0].capacity() + index_[1].capacity()) *
             sizeof(std::uint32_t) +
         ordered_.capacity() * sizeof(GroupIdx) + temp_.capacity();
}

const GroupIdx* GroupSchedule::run(const GroupIdx* groups, const std::uint32_t* n_groups, std::size_t max_groups,
                                   cudaStream_t stream) {
  if (max_groups == 0) return groups;
  for (int b = 0; b < 2; ++b) {
    keys_[b].ensure(max_groups);
    index_[b].ensure(max_groups);
  }
  ordered_.ensure(max_groups);
  temp_.ensure(temp_bytes(max_groups));
  const auto m = static_cast<std::uint32_t>(max_groups);
  schedule_keys<<<blocks_for(max_groups), 256, 0, stream>>>(groups, n_groups, m, keys_[0].data(), index_[0].data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  cub::DoubleBuffer<std::uint32_t> keys(keys_[0].data(), keys_[1].data()), index(index_[0].data(), index_[1].data());
  radix_sort_pairs(temp_.data(), temp_.capacity(), keys, index, max_groups, 0, kScheduleKeyBits, stream);
  gather_groups<<<blocks_for(max_groups), 256, 0, stream>>>(groups, index.Current(), n_groups, ordered_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  return ordered_.data();
}

void GroupSchedule::release() {
  for (int b = 0; b < 2; ++b) {
    keys_[b].release();
    index_[b].release();
  }
  ordered_.release();
  temp_.release();
}

}  // namespace orbis::gpu
