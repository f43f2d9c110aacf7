// The seam between the walk and the P2P backends: one interface, a CPU
// (OpenMP) and a CUDA implementation that compute the same sums with the same host+device
// interaction code (p2p_kernel.hpp). Only p2p_backend.cpp knows both implementations.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/vec3.hpp"
#include "fmm/kernel_kind.hpp"
#include "fmm/pair_energy.hpp"
#include "fmm/tasks.hpp"
#include "fmm/walk.hpp"
#include "tree/orb_tree.hpp"

namespace orbis {

struct P2PSettings {
  double box_mpc_h = 0;         // periodic box side
  double r_s = 0;               // force-split scale, Mpc/h
  double r_cut = 0;             // pairs farther apart than this contribute nothing
  double softening = 0;         // Plummer-equivalent softening length, Mpc/h
  double g_mass = 0;            // G * particle mass, (km/s)^2 Mpc/h
  int taylor_order = 3;         // 0..4; -1: exact erfc/exp (reference path)
  int table_size = 512;         // nodes of the T(x) table on [0, 3]
  bool double_precision = false;
  // The shifted cut's a (1/(Mpc/h)^2, cut_shift_of in fmm/short_range.hpp): T(x) - a r^2 per
  // pair, zero at the cut; 0: a sharp cut. Not read by the Newtonian kernel.
  double cut_shift = 0;
  // newtonian: the plain softened 1/r^2 of vacuum boundaries (T = 1, fmm/p2p_kernel.hpp):
  // box_mpc_h, r_s, taylor_order and table_size are not read, every task's image is 0, and
  // r_cut must lie beyond every pair of the system (ShortRangeSolver sets it so), so that no
  // pair is cut. Lengths in any unit (g_mass in unit (velocity)^2).
  KernelKind kernel = KernelKind::truncated;
};

struct P2PInput {
  const std::vector<Vec3d>* positions = nullptr;   // tree order, Mpc/h, in [0, box)
  const std::vector<Leaf>* leaves = nullptr;
  const std::vector<InteractionTask>* tasks = nullptr;   // target/source = leaf indices
  // Instead of `tasks`, for evaluators whose accepts_task_spans() is true: the task list as
  // consecutive pieces (the walk's buffers, so it need not be grouped or concatenated
  // first), in any order; a task flagged kMutualTask (tasks.hpp) stands for two.
  const std::vector<TaskSpan>* task_spans = nullptr;
  // Optional, tree order: the particles whose forces are wanted (block time steps); an
  // evaluator may then skip the others of a target leaf (the tiled CPU kernel does, with
  // the same bits for the flagged ones), and their entries are unspecified.
  const std::vector<std::uint8_t>* targets = nullptr;
  // Optional, tree order, Newtonian kernel only: each source's mass over the reference mass
  // whose G m is P2PSettings::g_mass (isolated systems of individual masses, Particles::masses);
  // null: every source weighs 1. Only evaluators whose accepts_weights() is true take it.
  const std::vector<double>* weights = nullptr;
};

struct P2PStats {
  double seconds = 0;
  double interactions = 0;      // pairs evaluated (i, j), both in the same task list
  std::string where;            // "cpu (2 threads)", "cuda (NVIDIA H100 ...)"
};

// The short-range step's tree and walk for an evaluator that does them on its own device
// (the CUDA one): the same tree as OrbTree::build and the same task sets as DualTreeWalk,
// so the CPU and CUDA backends compute the same sums.
struct DeviceTreeStep {
  const std::vector<Vec3d>* positions = nullptr;   // caller order, Mpc/h, in [0, box)
  int max_leaf = 32;
  WalkSettings walk;
};
// What the host gets back for the far field (M2L/L2L/L2P on the CPU while P2P runs).
struct DeviceTreeResult {
  OrbTree* tree = nullptr;                         // adopted from the device (OrbTree::adopt)
  std::vector<InteractionTask>* m2l = nullptr;     // grouped by target node
  std::vector<std::size_t>* m2l_offsets = nullptr; // per node, n_nodes + 1
  double tree_seconds = 0;                         // device build, as the host waited for it
  double walk_seconds = 0;                         // device walk, likewise
  std::size_t p2p_tasks = 0;                       // a mutual pair counted twice
};

class P2PEvaluator {
 public:
  virtual ~P2PEvaluator() = default;
  // Short-range accelerations (comoving, (km/s)^2/(Mpc/h)) of every particle of every
  // target leaf, written (not added) once per particle in tree order: acc.size() ==
  // positions.size(); particles in no target leaf get zero.
  virtual P2PStats evaluate(const P2PSettings& settings, const P2PInput& input,
                            std::vector<Vec3d>& acc) = 0;
  virtual std::string name() const = 0;
  // True when evaluate/start read P2PInput::task_spans (then tasks may be null), mutual
  // tasks included.
  virtual bool accepts_task_spans() const { return false; }
  // True when evaluate/start read P2PInput::weights (sources of individual masses).
  virtual bool accepts_weights() const { return false; }

  // The same evaluation split in two, so the run loop can overlap P2P with M2L/PM on the
  // CPU: start() queues the work and returns (the CUDA backend once the GPU has it; this
  // default only records the request), finish() completes it and writes acc exactly as
  // evaluate() does. The input arrays must stay alive and unchanged until finish().
  virtual void start(const P2PSettings& settings, const P2PInput& input) {
    pending_settings_ = settings;
    pending_input_ = input;
  }
  virtual P2PStats finish(std::vector<Vec3d>& acc) {
    return evaluate(pending_settings_, pending_input_, acc);
  }

  // True when the evaluator can build the tree and walk it itself (start_tree_step).
  virtual bool builds_tree() const { return false; }
  // Builds the tree of step.positions, walks it and starts the P2P of the resulting tasks,
  // like start() on the tasks of OrbTree::build + DualTreeWalk::run; fills `out` (tree and
  // M2L lists on the host) before returning. finish() then returns the P2P accelerations
  // in the tree order of out.tree.
  virtual void start_tree_step(const P2PSettings&, const DeviceTreeStep&, DeviceTreeResult&) {
    fail("the P2P evaluator '{}' cannot build the tree itself", name());
  }

  // The pair sum of the potential energy diagnostic (fmm/pair_energy.hpp): on the CPU, unless
  // the evaluator has a device of its own.
  virtual double pair_potential_sum(const PairPotentialInput& input) { return pair_potential_sum_cpu(input); }

 private:
  P2PSettings pending_settings_;
  P2PInput pending_input_;
};

// The CUDA device of this rank: [gpu] device when it is >= 0; for -1 (the default) the rank's
// index among the ranks on its node modulo the node's device count (0 without a device), so
// that N ranks on a node with N GPUs take one each. Collective over comm when it is -1.
int gpu_device_for_rank(std::int64_t configured, const Comm& comm);

// backend: "auto" | "cpu" | "cuda". An explicit "cuda" without a usable GPU is an error.
std::unique_ptr<P2PEvaluator> make_p2p_evaluator(const std::string& backend, int device);

}  // namespace orbis
