// The P2P kernel (p2p_cuda_kernel.cuh) as the device step runs it on data that already live
// on the device: the T(x) table staged once per settings, the kernel and its shared memory
// chosen, the leaf-relative positions made from the tree-order positions, and the launch
// over the grouped tasks, optionally only for target leaves flagged active.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime.h>

#include "fmm/p2p.hpp"
#include "gpu/device_buffer.cuh"
#include "gpu/p2p_cuda_kernel.cuh"

namespace orbis::gpu {

// What one launch reads and writes (device pointers).
struct P2PLaunch {
  const GroupIdx* groups = nullptr;
  const std::uint32_t* n_groups = nullptr;      // on the device (the grouping's count)
  const std::uint32_t* sources = nullptr;       // packed sources sorted by target
  const DeviceLeaf* leaves = nullptr;
  std::size_t n_leaves = 0, n_tasks = 0;
  const void* rel = nullptr;                    // leaf-relative positions x | y | z (R), table units
  std::size_t n = 0;                            // particles
  double* acc = nullptr;                        // 3 per particle, tree order, pre-zeroed
  const std::uint32_t* active_prefix = nullptr; // null: every particle a target; else active flags'
                                                // exclusive prefix sum, tree order (P2PKernelArgs)
  const double* weights = nullptr;              // null: every source weighs 1; else m_i / m per
                                                // particle, tree order (the Newtonian kernel only)
};

// rel = (x - leaf box centre) * scale per particle of every leaf, rounded once to R (float
// or double): leaf_relative_positions (fmm/p2p_prepare.hpp) on the device, queued on stream.
template <typename R>
void device_leaf_relative_positions(const double* x, const double* y, const double* z, const DeviceLeaf* leaves,
                                    std::size_t n_leaves, std::size_t n, double scale, R* rel, cudaStream_t stream);

class P2PKernelRunner {
 public:
  explicit P2PKernelRunner(int device);

  // Table and kernel for these settings (the table is uploaded when its size changes);
  // fails when the table does not fit in shared memory.
  void prepare(const P2PSettings& settings);
  bool double_precision() const { return settings_.double_precision; }
  double length_scale() const { return length_scale_; }
  std::size_t position_bytes() const { return double_precision() ? sizeof(double) : sizeof(float); }

  // rel = (x - leaf box centre) * length_scale per particle of every leaf, rounded once.
  void relative_positions(const double* x, const double* y, const double* z, const DeviceLeaf* leaves,
                          std::size_t n_leaves, std::size_t n, void* rel, cudaStream_t stream) const;
  // With in.weights, the Weighted kernel (p2p_cuda_kernel.cuh): the Newtonian kernel only,
  // else fails.
  void launch(const P2PLaunch& in, cudaStream_t stream) const;
  // Particle pairs of the walk's P2P entries (tasks.hpp's upload format; a mutual entry
  // counts both directions) into *pairs (device): the target leaf's particles times the
  // source leaf's, or with active_prefix (as P2PLaunch) its active particles only: the
  // pairs the kernel evaluates.
  static void count_pairs(const std::uint32_t* targets, const std::uint32_t* sources, std::size_t entries,
                          const DeviceLeaf* leaves, const std::uint32_t* active_prefix, unsigned long long* pairs,
                          cudaStream_t stream);

 private:
  template <typename R> void prepare_as();
  template <typename R> void launch_as(const P2PLaunch& in, cudaStream_t stream) const;

  int sm_count_ = 0;
  std::size_t smem_optin_ = 0;
  P2PSettings settings_;
  bool prepared_ = false;
  const void* kernel_ = nullptr;
  const void* weighted_kernel_ = nullptr;   // the Newtonian kernel's Weighted form; null for the others
  std::size_t table_bytes_ = 0;
  int per_sm_ = 0, weighted_per_sm_ = 0;
  double length_scale_ = 0;
  unsigned char constants_[64] = {};   // P2PPairConstants<R> of the prepared settings
  DeviceArray<unsigned char> table_, coef_, coef4_;
  int table_size_ = 0;
  bool table_double_ = false;
  DeviceArray<std::uint32_t> next_group_;
};

}  // namespace orbis::gpu
