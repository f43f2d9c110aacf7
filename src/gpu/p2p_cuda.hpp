// The CUDA P2P evaluator as C++ sees it (no CUDA types here, so tests and benchmarks in
// plain C++ can use it). The engine reaches it only through the factory (p2p_backend.cpp).
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "fmm/p2p.hpp"
#include "fmm/p2p_grouping.hpp"

namespace orbis {

// Where the time of the last evaluation went (seconds; device times from CUDA events).
struct CudaP2PTimings {
  double host_prepare = 0;   // CPU, in start(): leaf-relative positions and the packed tasks
                             // into pinned memory (OpenMP), queueing included
  double upload = 0;         // device: host -> device copies (overlapping host_prepare: the
                             // tasks go up in slices as they are packed)
  double grouping = 0;       // device: sort by target + GroupIdx
  double kernel = 0;         // device: the P2P kernel
  double download = 0;       // device: accelerations back
  double finish_wait = 0;    // CPU, in finish(): waiting for the device, then the copy out
  int chunks = 1;            // target-leaf chunks the tasks were split into (device memory)
  // start_tree_step only (then upload is the positions' upload and host_prepare their
  // staging into pinned memory):
  bool device_tree = false;
  double tree = 0;           // device: the ORB tree build
  double walk = 0;           // device: the dual-tree walk (with its host round trips)
  double host_tree = 0;      // CPU: the tree and the M2L lists down to the host (adopt)
};

// Counted only when enabled: a warp costs 32 lane slots per step of its slowest lane.
struct CudaP2POccupancy {
  double lane_slots = 0;     // lane-iterations issued
  double pairs = 0;          // lane-iterations that evaluated a pair
  double active_fraction() const { return lane_slots > 0 ? pairs / lane_slots : 0; }
};

class CudaP2PEvaluator : public P2PEvaluator {
 public:
  explicit CudaP2PEvaluator(int device);
  ~CudaP2PEvaluator() override;

  P2PStats evaluate(const P2PSettings& settings, const P2PInput& input,
                    std::vector<Vec3d>& acc) override;
  // Asynchronous pair: start() prepares the positions on the CPU, queues uploads, grouping,
  // kernel and download on the evaluator's stream and returns; finish() waits and writes acc.
  void start(const P2PSettings& settings, const P2PInput& input) override;
  P2PStats finish(std::vector<Vec3d>& acc) override;
  std::string name() const override { return "cuda"; }
  bool accepts_task_spans() const override { return true; }
  // Tree, walk and P2P on the device (P2PEvaluator::start_tree_step): positions go up once,
  // the task lists never cross the bus, the host gets the tree and the M2L lists back.
  bool builds_tree() const override { return true; }
  void start_tree_step(const P2PSettings& settings, const DeviceTreeStep& step, DeviceTreeResult& out) override;
  // The energy diagnostic's pair sum on this device (gpu/pair_energy_cuda.cuh).
  double pair_potential_sum(const PairPotentialInput& input) override;

  std::string device_name() const;
  const CudaP2PTimings& timings() const;
  void set_count_occupancy(bool on);       // off by default (costs a little per tile)
  // Table form in the kernel: per-node coefficients (default, fewer instructions per pair)
  // or eq. 2's {T_i, E_i} with the factors derived per pair (same series; benchmarks).
  void set_coefficient_table(bool on);
  CudaP2POccupancy occupancy() const;      // of the last evaluation, when counting
  // Test hook and tuning knob: at most this many tasks on the device at once (0: as many
  // as free device memory allows). Beyond it the tasks are processed in chunks of whole
  // target leaves, each target still written once: the result is bitwise the same.
  void set_max_tasks_per_chunk(std::size_t n);

  // The device grouping alone (tests: it must equal group_tasks_by_target element by element).
  GroupedTasks group_on_device(const std::vector<InteractionTask>& tasks, std::size_t n_leaves);

  static constexpr unsigned kMaxLeafCount = 256;   // = kTileCap in the kernel

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace orbis
