#include "gpu/p2p_cuda_grouping.cuh"

#include <algorithm>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

namespace orbis::gpu {
namespace {

__global__ void keys_and_indices(const InteractionTask* tasks, std::uint32_t n,
                                 std::uint32_t* keys, std::uint32_t* idx) {
  const std::uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) {
    keys[k] = tasks[k].target;
    idx[k] = k;
  }
}

__global__ void gather_tasks(const InteractionTask* in, const std::uint32_t* idx, std::uint32_t n,
                             InteractionTask* out) {
  const std::uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) out[k] = in[idx[k]];
}

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

}  // namespace

std::size_t DeviceGrouping::temp_bytes(std::size_t n_tasks, std::size_t n_leaves) {
  const int n = static_cast<int>(n_tasks);
  std::size_t sort = 0, rle = 0, scan = 0;
  ORBIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort, keys_in_.data(), keys_out_.data(),
                                                   idx_in_.data(), idx_out_.data(), n, 0,
                                                   key_bits(n_leaves)));
  ORBIS_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, rle, keys_out_.data(), unique_.data(),
                                                      counts_.data(), n_groups_.data(), n));
  ORBIS_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan, counts_.data(), starts_.data(), n));
  return std::max({sort, rle, scan, std::size_t{1}});
}

std::size_t DeviceGrouping::growth_bytes(std::size_t n_tasks, std::size_t n_leaves) {
  return sorted_.growth_bytes(n_tasks) + 7 * keys_in_.growth_bytes(n_tasks) +
         groups_.growth_bytes(n_tasks) + temp_.growth_bytes(temp_bytes(n_tasks, n_leaves)) + 64;
}

void DeviceGrouping::run(cudaStream_t stream, const InteractionTask* tasks_in, std::size_t n_tasks,
                         std::size_t n_leaves) {
  const std::size_t cap = std::max<std::size_t>(n_tasks, 1);
  sorted_.ensure(cap);
  for (auto* a : {&keys_in_, &keys_out_, &idx_in_, &idx_out_, &unique_, &counts_, &starts_})
    a->ensure(cap);
  n_groups_.ensure(1);
  groups_.ensure(cap);
  std::size_t temp = temp_bytes(n_tasks, n_leaves);
  temp_.ensure(temp);
  temp = temp_.capacity();
  ORBIS_CUDA_CHECK(cudaMemsetAsync(n_groups_.data(), 0, sizeof(std::uint32_t), stream));
  if (n_tasks == 0) return;
  const std::uint32_t n = static_cast<std::uint32_t>(n_tasks);
  keys_and_indices<<<blocks_for(n), 256, 0, stream>>>(tasks_in, n, keys_in_.data(), idx_in_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  ORBIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp_.data(), temp, keys_in_.data(),
                                                   keys_out_.data(), idx_in_.data(), idx_out_.data(),
                                                   static_cast<int>(n), 0, key_bits(n_leaves), stream));
  gather_tasks<<<blocks_for(n), 256, 0, stream>>>(tasks_in, idx_out_.data(), n, sorted_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  // Counts past the last run stay zero, so the scan over all n entries is valid for the runs.
  ORBIS_CUDA_CHECK(cudaMemsetAsync(counts_.data(), 0, n * sizeof(std::uint32_t), stream));
  temp = temp_.capacity();
  ORBIS_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(temp_.data(), temp, keys_out_.data(),
                                                      unique_.data(), counts_.data(),
                                                      n_groups_.data(), static_cast<int>(n), stream));
  temp = temp_.capacity();
  ORBIS_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp_.data(), temp, counts_.data(), starts_.data(),
                                                 static_cast<int>(n), stream));
  pack_groups<<<blocks_for(n), 256, 0, stream>>>(unique_.data(), starts_.data(), counts_.data(),
                                                 n_groups_.data(), groups_.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace orbis::gpu
