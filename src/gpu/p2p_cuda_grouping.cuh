// P2P tasks grouped by target leaf on the device (PhotoNs-GPU §3.2): TaskGroup (tasks in
// target order, stable) and GroupIdx (i_leaf, start, count). thrust::sort_by_key on 32-bit
// keys is CUB's radix sort underneath; CUB is called directly so that the sort runs on our
// stream, reuses its temporary storage and never synchronises with the host (the group
// count stays on the device and the kernel reads it there). Radix sort is stable, so the
// result equals the host counting sort (p2p_grouping.hpp) element for element.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "fmm/p2p_grouping.hpp"
#include "fmm/tasks.hpp"
#include "gpu/device_buffer.cuh"

namespace orbis::gpu {

class DeviceGrouping {
 public:
  // Bytes that run() for n_tasks would newly allocate.
  std::size_t growth_bytes(std::size_t n_tasks, std::size_t n_leaves);
  // Queues the grouping of tasks_in[0, n_tasks) (device memory) on stream.
  void run(cudaStream_t stream, const InteractionTask* tasks_in, std::size_t n_tasks,
           std::size_t n_leaves);
  const InteractionTask* sorted() const { return sorted_.data(); }
  const GroupIdx* groups() const { return groups_.data(); }
  const std::uint32_t* n_groups() const { return n_groups_.data(); }

 private:
  std::size_t temp_bytes(std::size_t n_tasks, std::size_t n_leaves);
  DeviceArray<InteractionTask> sorted_;
  DeviceArray<std::uint32_t> keys_in_, keys_out_, idx_in_, idx_out_, unique_, counts_, starts_;
  DeviceArray<std::uint32_t> n_groups_;
  DeviceArray<GroupIdx> groups_;
  DeviceArray<unsigned char> temp_;
};

}  // namespace orbis::gpu
