// The CUDA step engine (integrate/step_engine.hpp) as C++ sees it: the particles live in
// device memory from load() on (positions, momenta, ids, time bins, long- and short-range
// accelerations); forces, kicks and drifts run there, and the host receives the particles
// only when it asks (outputs, checkpoints). No CUDA types here, so the factory and the
// tests in plain C++ can use it.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "integrate/step_engine.hpp"
#include "tree/tree_reuse.hpp"

namespace orbis {

class Params;

class CudaStepEngine final : public StepEngine {
 public:
  // Checks the settings ([gravity], [gpu]) and the device before any work; the device
  // memory is planned (and checked) in load(), when the particle count is known.
  // device: the rank's (the factory passes gpu_device_for_rank's choice; tests and benches
  // construct it on device 0).
  explicit CudaStepEngine(const Params& params, int device = 0);
  ~CudaStepEngine() override;

  std::string describe() const override;
  double softening() const override;
  void load(Particles particles) override;
  const Particles& particles() override;
  const std::vector<Vec3d>& accelerations() override;
  void compute_forces(bool long_range, int min_active_bin, ForceStats& stats) override;
  void kick(const KickPlan& plan) override;
  void drift(double drift_factor) override;
  bool has_short_range() const override;
  double max_acceleration() override;
  double rms_momentum() override;
  Vec3d total_momentum() override;
  BinCounts assign_bins(const BinRule& rule) override;
  // The short-range tree is kept between steps (tree/tree_reuse.hpp decides when it is built).
  bool forces_from_fresh_tree() const override;
  std::string tree_summary() const override;
  // The P2P kernel skips only the leaves with no active particle (gpu/short_range_cuda.cuh).
  bool computes_whole_leaves() const override { return true; }

  // Beyond the seam (tests, the benchmark).
  std::size_t planned_device_bytes() const;    // the memory plan of the last load()
  std::size_t peak_device_bytes() const;       // device memory the engine added, the most seen after a step
  std::string device_name() const;
  // The last step's device phases and counts in one line (the benchmark).
  std::string last_step_details() const;
  // Benchmark and test hook: the tree policy ([gpu] tree_rebuild_every and tree_max_refits
  // otherwise); it starts afresh, as after load().
  void set_tree_policy(const TreeReuseSettings& settings);
  // Whether the last compute_forces() built the short-range tree (else refitted it).
  bool last_step_built_tree() const;
  // The next long-range step builds the tree (the benchmark's building step; a run that
  // asks leaves the trajectory it would have had).
  void rebuild_tree_next();
  // At most this many P2P tasks sorted at once (0: as many as free memory holds); beyond it
  // the tasks go in chunks of target leaves, bitwise the same (gpu/p2p_cuda_chunks.cuh).
  void set_max_chunk_tasks(std::size_t tasks);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The CUDA step engine on `device` (the rank's, gpu_device_for_rank; the caller checked
// cuda_device_usable).
std::unique_ptr<StepEngine> make_cuda_step_engine(const Params& params, int device);

}  // namespace orbis
