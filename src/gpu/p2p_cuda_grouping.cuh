// P2P tasks grouped by target leaf on the device (PhotoNs-GPU §3.2): the sources in target
// order (TaskGroup, stable) and GroupIdx (i_leaf, start, count). The tasks arrive as two
// arrays, targets and packed sources (tasks.hpp: leaf | image in one word), a mutual pair
// as one entry that a scan and a scatter expand first (in the order the host would), so
// the grouping is one key-value sort with the targets as keys and no gather: thrust::sort_by_key on
// 32-bit keys is CUB's radix sort underneath; CUB is called directly so that the sort runs
// on our stream, reuses its temporary storage and never synchronises with the host (the
// group count stays on the device and the kernel reads it there). Radix sort is stable, so
// the result equals the host counting sort (p2p_grouping.hpp) element for element.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "fmm/p2p_grouping.hpp"
#include "fmm/tasks.hpp"
#include "gpu/cub_counts.cuh"
#include "gpu/device_buffer.cuh"

namespace orbis::gpu {

class DeviceGrouping {
 public:
  // The most tasks one run() groups: GroupIdx holds task positions in 32 bits and CUB's
  // run-length encoding counts in int. Callers chunk longer lists (by target leaves).
  static constexpr std::size_t kMaxTasks = kCubMaxItems;

  // Bytes that run() for n_entries uploaded entries expanding to n_tasks would newly allocate.
  std::size_t growth_bytes(std::size_t n_entries, std::size_t n_tasks, std::size_t n_leaves);
  // Bytes it holds now (given back if the arrays had to grow).
  std::size_t held_bytes() const;
  // Where the caller uploads the packed entries (targets with kMutualBit, packed sources;
  // tasks.hpp) before run(): room for n_tasks (expanded), so the same arrays then serve as
  // the sort's second buffers. Call before filling them: a grown array holds no data.
  std::uint32_t* upload_targets(std::size_t n_tasks);
  std::uint32_t* upload_sources(std::size_t n_tasks);
  // Queues on stream: the expansion of the n_entries uploaded entries into the expansion
  // arrays (each mutual entry becomes its task and, right after, the reverse one: n_tasks in
  // all), then their stable sort by target and the GroupIdx. run() never resizes the upload
  // arrays (that would drop the caller's data): it fails unless they hold n_tasks. The
  // expansion arrays hold nothing before the call and are sized here; they are the sort's
  // other double buffers, so the sorted tasks end up there or in the upload arrays
  // (sorted_targets/sorted_sources say which). Fails when n_tasks exceeds kMaxTasks.
  void run(cudaStream_t stream, std::size_t n_entries, std::size_t n_tasks, std::size_t n_leaves);
  const std::uint32_t* sorted_targets() const { return sorted_targets_; }
  const std::uint32_t* sorted_sources() const { return sorted_sources_; }
  const GroupIdx* groups() const { return groups_.data(); }
  const std::uint32_t* n_groups() const { return n_groups_.data(); }

 private:
  std::size_t temp_bytes(std::size_t n_entries, std::size_t n_tasks, std::size_t n_leaves);
  DeviceArray<std::uint32_t> up_targets_, up_sources_, counts_in_, positions_;
  DeviceArray<std::uint32_t> targets_, sources_;   // the expanded tasks (the sort's other buffers)
  DeviceArray<std::uint32_t> unique_, counts_, starts_;
  DeviceArray<std::uint32_t> n_groups_;
  DeviceArray<GroupIdx> groups_;
  DeviceArray<unsigned char> temp_;
  const std::uint32_t* sorted_targets_ = nullptr;
  const std::uint32_t* sorted_sources_ = nullptr;
};

// The order in which the P2P kernel's persistent blocks take the target groups: heaviest
// first, by powers of two of their task counts; a stable sort on that key keeps the
// target-leaf order, and with it the sharing of sources between neighbouring groups, inside
// each class. In target order a block that takes a heavy group late runs alone at the end of
// the launch while the other SMs idle: at 256^3 z = 0 on an H100 the P2P of a refitted tree
// took 107-110 ms in target order and 100-101 ms heaviest first (a fresh tree's 99 ms either
// way). Only the schedule changes: each group's sums, and so the forces, do not.
class GroupSchedule {
 public:
  // Bytes that run() for up to max_groups groups would newly allocate, and that it holds.
  std::size_t growth_bytes(std::size_t max_groups);
  std::size_t held_bytes() const;
  // Queues on stream: the n_groups (on the device, at most max_groups) groups in the kernel's
  // order; the result stays valid until the next run() or release().
  const GroupIdx* run(const GroupIdx* groups, const std::uint32_t* n_groups, std::size_t max_groups,
                      cudaStream_t stream);
  void release();

 private:
  std::size_t temp_bytes(std::size_t max_groups) const;
  DeviceArray<std::uint32_t> keys_[2], index_[2];
  DeviceArray<GroupIdx> ordered_;
  DeviceArray<unsigned char> temp_;
};

}  // namespace orbis::gpu
