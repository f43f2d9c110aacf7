#include "gpu/p2p_cuda_grouping.cuh"

#include <algorithm>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

namespace orbis::gpu {
namespace {

__global__ void pack_groups(const std::uint32_t* unique, const std::uint32_t* starts,
                            const std::uint32_t* counts, const std::uint32_t* n_groups,
                            GroupIdx* groups) {
  const std::uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g < *n_groups) groups[g] = GroupIdx{unique[g], starts[g], counts[g]};
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

std::size_t DeviceGrouping::temp_bytes(std::size_t n_tasks, std::size_t n_leaves) {
  const int n = static_cast<int>(n_tasks);
  const int ng = static_cast<int>(max_groups(n_tasks, n_leaves));
  std::size_t sort = 0, rle = 0, scan = 0;
  cub::DoubleBuffer<std::uint32_t> keys(nullptr, nullptr), values(nullptr, nullptr);
  ORBIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort, keys, values, n, 0, key_bits(n_leaves)));
  ORBIS_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, rle, keys_out_.data(), unique_.data(),
                                                      counts_.data(), n_groups_.data(), n));
  ORBIS_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan, counts_.data(), starts_.data(), ng));
  return std::max({sort, rle, scan, std::size_t{1}});
}

std::size_t DeviceGrouping::growth_bytes(std::size_t n_tasks, std::size_t n_leaves) {
  const std::size_t ng = max_groups(n_tasks, n_leaves);
  return keys_out_.growth_bytes(n_tasks) + values_out_.growth_bytes(n_tasks) +
         unique_.growth_bytes(ng) + counts_.growth_bytes(ng) + starts_.growth_bytes(ng) +
         groups_.growth_bytes(ng) + temp_.growth_bytes(temp_bytes(n_tasks, n_leaves)) + 64;
}

std::size_t DeviceGrouping::held_bytes() const {
  return (keys_out_.capacity() + values_out_.capacity() + unique_.capacity() + counts_.capacity() +
          starts_.capacity()) * sizeof(std::uint32_t) + groups_.capacity() * sizeof(GroupIdx) + temp_.capacity();
}

void DeviceGrouping::run(cudaStream_t stream, std::uint32_t* targets, std::uint32_t* packed,
                         std::size_t n_tasks, std::size_t n_leaves) {
  const std::size_t ng = max_groups(n_tasks, n_leaves);
  keys_out_.ensure(std::max<std::size_t>(n_tasks, 1));
  values_out_.ensure(std::max<std::size_t>(n_tasks, 1));
  for (auto* a : {&unique_, &counts_, &starts_}) a->ensure(ng);
  n_groups_.ensure(1);
  groups_.ensure(ng);
  std::size_t temp = temp_bytes(n_tasks, n_leaves);
  temp_.ensure(temp);
  ORBIS_CUDA_CHECK(cudaMemsetAsync(n_groups_.data(), 0, sizeof(std::uint32_t), stream));
  sorted_targets_ = targets;
  sorted_sources_ = packed;
  if (n_tasks == 0) return;
  const int n = static_cast<int>(n_tasks);
  temp = temp_.capacity();
  // Double-buffer sort: no second copy of keys and values inside CUB's temporary storage.
  cub::DoubleBuffer<std::uint32_t> keys(targets, keys_out_.data()), values(packed, values_out_.data());
  ORBIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp_.data(), temp, keys, values, n, 0,
                                                   key_bits(n_leaves), stream));
  sorted_targets_ = keys.Current();
  sorted_sources_ = values.Current();
  // Counts past the last run stay zero, so the scan over all ng entries is valid for the runs.
  ORBIS_CUDA_CHECK(cudaMemsetAsync(counts_.data(), 0, ng * sizeof(std::uint32_t), stream));
  temp = temp_.capacity();
  ORBIS_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(temp_.data(), temp, sorted_targets_,
                                                      unique_.data(), counts_.data(),
                                                      n_groups_.data(), n, stream));
  temp = temp_.capacity();
  ORBIS_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp_.data(), temp, counts_.data(), starts_.data(),
                                                 static_cast<int>(ng), stream));
  pack_groups<<<blocks_for(ng), 256, 0, stream>>>(unique_.data(), starts_.data(), counts_.data(),
                                                  n_groups_.data(), groups_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace orbis::gpu
