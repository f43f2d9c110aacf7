// The device step's P2P from the walk's entries (tasks.hpp's half form: a mutual entry
// stands for two tasks), a chunk of consecutive target leaves at a time: each chunk selects
// the tasks of its targets (an entry's forward task when its target is in the chunk, its
// reverse task when its source is), sorts them by target (stable, so each target's tasks
// keep the walk's order), makes the target groups and runs the P2P kernel over them. Every
// target belongs to one chunk and its tasks arrive in the same order whatever the chunks, so
// the forces are bitwise those of one chunk; the chunk size bounds the memory the expanded
// and sorted tasks take (16 bytes per task), so a step that cannot hold them all at once
// still runs (the memory plan's "or chunks the work").
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "fmm/p2p_grouping.hpp"
#include "gpu/cub_counts.cuh"
#include "gpu/device_buffer.cuh"
#include "gpu/p2p_cuda_grouping.cuh"
#include "gpu/p2p_cuda_launch.cuh"

namespace orbis::gpu {

class DeviceP2PChunks {
 public:
  // Queues the P2P of the `entries` walk entries (device: targets with kMutualBit, packed
  // sources) expanding to `tasks` tasks over n_leaves target leaves, at most max_tasks tasks
  // per chunk (0: one chunk), with `launch`'s positions, leaves, accelerations and active
  // flags. Waits for the device once when it splits (the per-leaf task counts).
  void run(const std::uint32_t* entry_targets, const std::uint32_t* entry_sources, std::size_t entries,
           std::size_t tasks, std::size_t n_leaves, std::size_t max_tasks, const P2PKernelRunner& runner,
           P2PLaunch launch, cudaStream_t stream);

  ~DeviceP2PChunks();
  // Test hook: at most this many items per CUB call (gpu/cub_counts.cuh), hence per chunk
  // too, so that a small step takes the paths of one with more than 2^31 tasks.
  void set_max_cub_items(std::size_t items) { max_cub_items_ = items; }
  int chunks() const { return static_cast<int>(bounds_.size()) - 1; }
  // Device seconds of the last run in selecting and sorting the tasks, and in the kernel
  // (wait for the run).
  double sort_seconds() const;
  double kernel_seconds() const;
  // Device bytes for `chunk_tasks` tasks per chunk and `entries` entries over n_leaves.
  static std::size_t bytes_for(std::size_t entries, std::size_t chunk_tasks, std::size_t n_leaves);
  std::size_t held_bytes() const;
  // Gives the task arrays back to the device pool, queued on the allocation stream (after
  // run(): they are not live beside the PM or the tree build).
  void release();

 private:
  DeviceArray<std::uint32_t> position_;            // per entry: its first task in the chunk
  DeviceArray<std::uint32_t> keys_[2], values_[2];  // the chunk's tasks, sort double buffers
  DeviceArray<std::uint32_t> unique_, counts_, starts_, n_groups_;
  DeviceArray<GroupIdx> groups_;
  GroupSchedule schedule_;                          // the groups in the kernel's order
  DeviceArray<unsigned char> temp_;
  PinnedArray<std::uint32_t> host_counts_;
  std::vector<std::uint32_t> bounds_{0, 0};        // chunk c: target leaves [bounds[c], bounds[c+1])
  std::vector<std::size_t> chunk_tasks_;
  std::vector<cudaEvent_t> events_;   // per chunk: start, sorted, done
  std::size_t events_used_ = 0;
  std::size_t max_cub_items_ = kCubMaxItems;
  cudaEvent_t event(std::size_t i);
};

}  // namespace orbis::gpu
