// CUB calls whose item counts may exceed 2^31. CUB instantiates its kernels for the type of
// the count it is given: int counts get the 32-bit-offset kernels orbis was measured with,
// 64-bit counts CUB's 64-bit-offset ones. These wrappers take a 64-bit count and pass it as
// int up to max_items items (kCubMaxItems = INT_MAX unless a test lowers it, so that the
// 64-bit path runs on small inputs on any GPU), as a 64-bit count beyond:
//   exclusive_sum, radix_sort_pairs   any count;
//   run_length_encode                 CUB takes its count as int only: more than max_items
//                                     is an error (callers bound it: P2P tasks go in chunks of
//                                     at most kMaxP2PChunkTasks = kCubMaxItems).
#pragma once
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include "core/error.hpp"
#include "gpu/cuda_check.cuh"

namespace orbis::gpu {

inline constexpr std::size_t kCubMaxItems = INT_MAX;

namespace detail {

inline void check_limit(std::size_t max_items) {
  if (max_items == 0 || max_items > kCubMaxItems)
    fail("internal: CUB call limit of {} items (1 .. {})", max_items, kCubMaxItems);
}

}  // namespace detail

// Temporary bytes for exclusive_sum over `count` items.
template <typename InIt, typename OutIt>
std::size_t exclusive_sum_bytes(InIt in, OutIt out, std::size_t count, std::size_t max_items = kCubMaxItems) {
  detail::check_limit(max_items);
  std::size_t bytes = 0;
  if (count <= max_items)
    ORBIS_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, in, out, static_cast<int>(count)));
  else
    ORBIS_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, in, out, static_cast<std::uint64_t>(count)));
  return std::max<std::size_t>(bytes, 1);
}

// out[i] = in[0] + ... + in[i - 1] for i < count, queued on `stream` (out may equal in; an
// output iterator, e.g. thrust's tabulate_output_iterator, gets each value once).
template <typename InIt, typename OutIt>
void exclusive_sum(void* temp, std::size_t temp_bytes, InIt in, OutIt out, std::size_t count, cudaStream_t stream,
                   std::size_t max_items = kCubMaxItems) {
  if (count == 0) return;
  if (temp_bytes < exclusive_sum_bytes(in, out, count, max_items))
    fail("internal: exclusive_sum of {} items given {} temporary bytes", count, temp_bytes);
  if (count <= max_items)
    ORBIS_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp, temp_bytes, in, out, static_cast<int>(count), stream));
  else
    ORBIS_CUDA_CHECK(
        cub::DeviceScan::ExclusiveSum(temp, temp_bytes, in, out, static_cast<std::uint64_t>(count), stream));
}

// Temporary bytes for radix_sort_pairs (double-buffer form) over `count` items.
template <typename K, typename V>
std::size_t radix_sort_pairs_bytes(std::size_t count, int begin_bit, int end_bit,
                                   std::size_t max_items = kCubMaxItems) {
  detail::check_limit(max_items);
  cub::DoubleBuffer<K> keys(nullptr, nullptr);
  cub::DoubleBuffer<V> values(nullptr, nullptr);
  std::size_t bytes = 0;
  if (count <= max_items)
    ORBIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, values, static_cast<int>(count),
                                                     begin_bit, end_bit));
  else
    ORBIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, values, static_cast<std::uint64_t>(count),
                                                     begin_bit, end_bit));
  return std::max<std::size_t>(bytes, 1);
}

// Stable sort of `count` (key, value) pairs by key bits [begin_bit, end_bit), on `stream`;
// the result is in keys.Current() / values.Current().
template <typename K, typename V>
void radix_sort_pairs(void* temp, std::size_t temp_bytes, cub::DoubleBuffer<K>& keys, cub::DoubleBuffer<V>& values,
                      std::size_t count, int begin_bit, int end_bit, cudaStream_t stream,
                      std::size_t max_items = kCubMaxItems) {
  if (count == 0) return;
  if (temp_bytes < radix_sort_pairs_bytes<K, V>(count, begin_bit, end_bit, max_items))
    fail("internal: radix sort of {} items given {} temporary bytes", count, temp_bytes);
  if (count <= max_items)
    ORBIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, values, static_cast<int>(count),
                                                     begin_bit, end_bit, stream));
  else
    ORBIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, values,
                                                     static_cast<std::uint64_t>(count), begin_bit, end_bit, stream));
}

// The same into separate output arrays (keys_in and values_in are left as they are).
template <typename K, typename V>
std::size_t radix_sort_pairs_copy_bytes(std::size_t count, int begin_bit, int end_bit,
                                        std::size_t max_items = kCubMaxItems) {
  detail::check_limit(max_items);
  std::size_t bytes = 0;
  const K* k = nullptr;
  const V* v = nullptr;
  if (count <= max_items)
    ORBIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, k, static_cast<K*>(nullptr), v,
                                                     static_cast<V*>(nullptr), static_cast<int>(count), begin_bit,
                                                     end_bit));
  else
    ORBIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, k, static_cast<K*>(nullptr), v,
                                                     static_cast<V*>(nullptr), static_cast<std::uint64_t>(count),
                                                     begin_bit, end_bit));
  return std::max<std::size_t>(bytes, 1);
}
template <typename K, typename V>
void radix_sort_pairs_copy(void* temp, std::size_t temp_bytes, const K* keys_in, K* keys_out, const V* values_in,
                           V* values_out, std::size_t count, int begin_bit, int end_bit, cudaStream_t stream,
                           std::size_t max_items = kCubMaxItems) {
  if (count == 0) return;
  if (temp_bytes < radix_sort_pairs_copy_bytes<K, V>(count, begin_bit, end_bit, max_items))
    fail("internal: radix sort of {} items given {} temporary bytes", count, temp_bytes);
  if (count <= max_items)
    ORBIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, values_in, values_out,
                                                     static_cast<int>(count), begin_bit, end_bit, stream));
  else
    ORBIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, values_in, values_out,
                                                     static_cast<std::uint64_t>(count), begin_bit, end_bit, stream));
}

namespace detail {
[[noreturn]] inline void fail_run_length_limit(std::size_t count, std::size_t max_items) {
  fail("internal: run-length encoding of {} items, more than the {} one CUB call takes (the caller must "
       "chunk them)", count, max_items);
}
}  // namespace detail

// Runs of equal keys in `count` items: unique[r], counts[r] and their number in *n_runs.
template <typename K, typename C, typename N>
std::size_t run_length_encode_bytes(const K* in, K* unique, C* counts, N* n_runs, std::size_t count,
                                    std::size_t max_items = kCubMaxItems) {
  detail::check_limit(max_items);
  if (count > max_items) detail::fail_run_length_limit(count, max_items);
  std::size_t bytes = 0;
  ORBIS_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, bytes, in, unique, counts, n_runs,
                                                      static_cast<int>(std::max<std::size_t>(count, 1))));
  return std::max<std::size_t>(bytes, 1);
}
template <typename K, typename C, typename N>
void run_length_encode(void* temp, std::size_t temp_bytes, const K* in, K* unique, C* counts, N* n_runs,
                       std::size_t count, cudaStream_t stream, std::size_t max_items = kCubMaxItems) {
  if (temp_bytes < run_length_encode_bytes(in, unique, counts, n_runs, count, max_items))
    fail("internal: run-length encoding of {} items given {} temporary bytes", count, temp_bytes);
  ORBIS_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(temp, temp_bytes, in, unique, counts, n_runs,
                                                      static_cast<int>(count), stream));
}

}  // namespace orbis::gpu
