// The CUDA step engine (integrate/step_engine.hpp) as C++ sees it: the particles live in
// device memory from load() on (positions, momenta, ids, time bins, long- and short-range
// accelerations); forces, kicks and drifts run there, and the host receives the particles
// only when it asks (outputs, checkpoints). No CUDA types here, so the factory and the
// tests in plain C++ can use it.
//
// Over several ranks (a communicator of more than one; issue #17) one engine per rank holds
// its rank's particles on its GPU, in the rank domains of the host engine
// (domain/rank_domains.hpp: runs of the global ORB tree's depth-d nodes, whole remote nodes
// within r_cut as ghosts). At a long-range step that builds the short-range tree (the tree
// policy's choice, tree/tree_reuse.hpp, the same on every rank: its pair counts are summed
// over the ranks) the domains are updated with the state on the device
// (gpu/domain_update_cuda.cuh: the host decides the groups and the runs, only the migrants
// cross the bus, the new own set is put in subtree order on the device, the host engine's
// order bit for bit); at the other steps the domains stay, and the ghosts are refreshed from
// the device's positions (gpu/ghost_exchange_cuda.cuh: the own groups' boxes come down, the ghosts'
// positions alone go between the ranks). The long-range force of TreePM is CudaPmRanks'
// (gpu/pm_cuda_ranks.hpp): from the device positions, the particles routed to x slabs on the
// GPUs, into the device's long-range accelerations; the host PmSolver on x slabs (cuFFT
// transforms where it can, gpu/pm_cuda_slabs.hpp; positions brought down for it) is the
// fallback and PM-only's path. The short range runs on the device on the rank's forest
// (DeviceShortRange::compute_forest): the own particles and the ghosts, the own
// active ones as targets; refitted while the ghosts are the same particles. Kicks, drifts,
// bins and the reductions stay on the device, each reduced over the ranks as the host
// engine reduces them. The phases "domain" (update, ghosts) and "comm"
// (time inside communication) are the host engine's.
//
// Isolated systems ([gravity] boundary = "vacuum"; one rank): the same engine without a PM,
// the whole force from the short-range step with vacuum boundaries (Newtonian P2P and M2L,
// the walk by the opening angle alone; gpu/short_range_cuda.cuh), G of the [units] system,
// positions not wrapped: the host's VacuumStepEngine (integrate/vacuum_engine.hpp) on the GPU.
// Individual masses (Particles::masses, isolated systems only: a periodic run refuses them)
// go to the device as weights w_i = m_i / m (m = Particles::mass, their mean; G m is the
// kernels' constant), which the P2P sources, the multipoles, the leaf-cell pairs' P2L, the
// pair sum of W and the total momentum take; particles() returns the masses and types in the
// positions' order (one rank never reorders its state).
#pragma once
#include <cstddef>
#include <cstdint>
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
  // comm: the ranks of the run (one rank: the particles stay on the device throughout).
  // Over ranks the construction is collective, and a failure on one rank is every rank's.
  explicit CudaStepEngine(const Params& params, int device = 0, const Comm& comm = Comm::self());
  ~CudaStepEngine() override;

  std::string describe() const override;
  double softening() const override;
  void load(Particles particles) override;
  const Particles& particles() override;
  Particles particles_copy() override;
  void recycle(Particles spent) override;
  const std::vector<Vec3d>& accelerations() override;
  void compute_forces(bool long_range, int min_active_bin, ForceStats& stats) override;
  void kick(const KickPlan& plan) override;
  void drift(double drift_factor) override;
  bool has_short_range() const override;
  double max_acceleration() override;
  double rms_momentum() override;
  // With individual masses the sum of w_i p_i (w_i = m_i / m), so that times the mass it is
  // the total momentum as without; rms_momentum() stays the particles' (unweighted).
  Vec3d total_momentum() override;
  // The energy check's pair sum and mesh term on the device from the device positions
  // (gpu/pair_energy_cuda.cuh, the engine's PM; over ranks the forest's sources and the PM
  // over ranks); without the device memory it needs: nullopt. The mesh term is the last
  // long-range pass's when expect_potential_energy() asked it for it and nothing drifted since.
  std::optional<PotentialEnergyTerms> potential_energy_terms(const PotentialEnergyRequest& request) override;
  void expect_potential_energy(bool expected) override;
  BinCounts assign_bins(const BinRule& rule) override;
  // The short-range tree is kept between steps (tree/tree_reuse.hpp decides when it is built).
  bool forces_from_fresh_tree() const override;
  std::string tree_summary() const override;
  // computes_whole_leaves(): false, the default. The P2P kernel takes only the active
  // particles of a target leaf (gpu/p2p_cuda_kernel.cuh; the walk still goes by leaves, a cost
  // the ETA calibrates from the sub-steps it measures).
  // P(k) on the device from the device positions: one rank's (gpu/power_spectrum_cuda.cuh),
  // over ranks the meshes in x slabs over the ranks' GPUs (gpu/power_spectrum_cuda_ranks.hpp,
  // collective); without the device memory it needs (on any rank): nullopt.
  std::optional<PowerSpectrum> power_spectrum(const PowerSpectrumSettings& settings) override;
  // Vacuum boundaries: the pair sum on the device from the device positions; otherwise nullopt.
  // With individual masses S = sum_{i<j} w_i w_j / s_ij (w_i = m_i / m), so that W = -G m^2 S
  // as with one mass.
  std::optional<std::vector<double>> softened_potentials() override;
  bool sums_potentials() const override;
  // One rank: the FoF groups linked on the device from the device positions
  // (gpu/fof_cuda.cuh); over ranks, or without the device memory it needs: nullopt.
  std::optional<std::vector<std::uint32_t>> fof_labels(double linking_length_over_spacing) override;
  // Over ranks: this rank's particles (from the device positions, wrapped into the box as they
  // are copied) and the output's ghosts linked on the device (gpu/fof_cuda.cuh
  // fof_labels_with_ghosts); one rank, or without the device memory it needs: nullopt.
  std::optional<std::vector<std::uint32_t>> fof_labels_with_ghosts(const std::vector<Vec3d>& ghosts,
                                                                   double link_mpc_h) override;
  bool links_fof_with_ghosts() const override;
  // Over ranks: the rank domains (as HostStepEngine); one rank: none.
  std::string domain_state() const override;
  void restore_domain_state(const std::string& state, const std::string& what) override;

  // Beyond the seam (tests, the benchmark).
  std::size_t planned_device_bytes() const;    // the memory plan of the last load()
  std::size_t peak_device_bytes() const;       // device memory the engine added, the most seen after a step
  std::string device_name() const;
  // The last step's device phases and counts in one line (the benchmark).
  std::string last_step_details() const;
  // Over ranks: the bytes the last force computation's ghost refresh moved over this rank's
  // bus (the own groups' boxes down, the sent ghosts down, the received up, the send list up
  // at a new choice); 0 on one rank.
  std::uint64_t ghost_bus_bytes() const;
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
  void setup(const Params& params);   // the settings, the device, the stream (one rank's work)
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The CUDA step engine on `device` (the rank's, gpu_device_for_rank; the caller checked
// cuda_device_usable, on every rank of comm).
std::unique_ptr<StepEngine> make_cuda_step_engine(const Params& params, int device, const Comm& comm = Comm::self());

}  // namespace orbis
