// The device memory of a CUDA step, planned before the first step: the particle state, the
// ORB tree, the walk's task lists, the P2P and far-field work arrays and the PM, from the
// particle count and the settings alone. The task lists depend on the clustering; they are
// estimated per tree leaf (the largest counts the benchmark scenes needed, plus headroom),
// and the walk grows its buffers when a step needs more. A plan that does not fit in the
// memory the run may use stops the run before any work, saying what was needed, what was
// available and which settings lower the need. Plain C++ (no CUDA): the planning is tested
// on any machine.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "fmm/short_range.hpp"

namespace orbis {

// Parts held for the whole run (phase empty), and parts of the step's phases, which are never
// live at the same time: each phase takes its arrays from the device's stream-ordered pool
// when it starts and gives them back when it ends (gpu/device_buffer.cuh). The device holds
// the held parts plus the largest phase.
struct DeviceMemoryPlan {
  struct Part {
    std::string name;
    std::size_t bytes = 0;
    std::string phase;   // empty: held for the whole run
  };
  std::vector<Part> parts;
  std::size_t particles = 0;

  std::size_t held() const;
  std::size_t phase_bytes(const std::string& phase) const;
  std::string largest_phase() const;
  std::size_t total() const;   // held() + the largest phase
  // "held: state 1.2 GiB, tree 0.4 GiB, ...; phases, one at a time: PM 2.0 GiB, tree build
  // 1.1 GiB, short range 2.1 GiB (walk ..., P2P ...); 5.1 GiB in all (310 bytes per particle)"
  std::string describe() const;
};

struct DeviceMemoryInput {
  std::size_t particles = 0;
  bool short_range = true;          // TreePM; false: PM only
  ShortRangeSettings settings;      // when short_range
  std::size_t pm_bytes = 0;         // the PM's meshes and cuFFT work area (its phase)
  std::size_t pm_held_bytes = 0;    // the PM's tables (held)
  bool short_acc_double = false;    // short-range accelerations kept in double
  bool weights = false;             // individual masses (vacuum): a weight per particle, held and in tree order
  // Over ranks (domain/rank_domains.hpp): the particles of the rank's short-range forest, its
  // own and the ghosts (0: one rank, the tree holds `particles`). The tree, the walk and the
  // P2P are then planned for these, and the forest's positions and target mask are held
  // beside the state. forest_leaves: the forest's leaves when its groups are known (the
  // leaves of each group's subtree, summed), else 0: those of one tree of `sources`.
  std::size_t sources = 0;
  std::size_t forest_leaves = 0;
  // Over ranks with the PM's particle side on the GPUs (gpu/pm_cuda_ranks.hpp), the PM phase:
  // its x slabs with their ghost planes and the cuFFT slabs' y slabs, and the buffers of the
  // particles that leave this rank's slab or arrive in it (CudaPmRanks::routing_bytes; what it
  // holds between steps goes in pm_held_bytes).
  std::size_t pm_slab_bytes = 0;
  std::size_t pm_routing_bytes = 0;
};

DeviceMemoryPlan plan_device_memory(const DeviceMemoryInput& in);

// Leaves of the ORB tree of n particles with max_leaf (OrbTree::shape, counted without
// building it).
std::size_t orb_tree_leaves(std::size_t n, int max_leaf);

// The walk's lists per tree leaf and node that the plan reserves (P2P entries, leaf-cell
// pairs and the widest frontier of node pairs per leaf, M2L tasks per node), for a tree of
// `leaves` leaves: a box's bounded by the cut, an isolated system's by the opening angle; a
// rank's forest (over ranks) walks a wider frontier. Also the device walk's first sizes
// (DeviceWalk::reserve).
struct PlannedWalk {
  double entries_per_leaf = 0, m2l_per_node = 0, frontier_per_leaf = 0, leaf_cell_per_leaf = 0;
};
PlannedWalk planned_walk(const ShortRangeSettings& s, std::size_t leaves, bool forest = false);

// The P2P tasks a step expands and sorts at once at most (one chunk of target leaves): a
// quarter of the tasks the plan reserves for a tree of `leaves` leaves (kPlannedP2PEntriesPerLeaf
// entries a leaf, two tasks an entry at most), so that the short-range step stays within its part of
// the plan however much memory is free (four chunks cost ~2% of a 512^3 step on an H100);
// an eighth for a rank's forest over ranks (its own particles' and ghosts' subtrees), whose
// short-range step is the largest phase of its memory (0.12 GiB less a rank at 256^3 on 2
// ranks, a few more chunks in its few full steps); but all of them up to
// kMinPlannedP2PChunkTasks (~170 MB of chunk arrays): a small step's chunks cost more than
// they save (each a host wait, sorts and a kernel's tail; at 10^6 particles in vacuum three
// chunks of ~1.5e6 tasks).
inline constexpr std::size_t kMinPlannedP2PChunkTasks = std::size_t{1} << 23;
std::size_t planned_p2p_chunk_tasks(std::size_t leaves, bool forest = false);

// The most P2P tasks the device expands, sorts and groups at once (one chunk of target
// leaves): a chunk's groups hold task positions in 32 bits, and CUB's run-length encoding
// counts in int (gpu::kCubMaxItems, the same number).
inline constexpr std::size_t kMaxP2PChunkTasks = 2147483647;

// Device bytes per target leaf of a P2P chunk: its groups (run keys, counts, starts and the
// GroupIdx: 24) and their schedule (gpu::GroupSchedule: two key and two index buffers and the
// ordered GroupIdx: 28). The plan and DeviceP2PChunks::bytes_for both count them.
inline constexpr std::size_t kP2PBytesPerLeaf = 24 + 28;

// The float copy of the multipoles (vacuum's M2L and M2P: DeviceFmm::multipoles) keeps each
// node's nm moments in a run padded to whole float4s: M2L's lanes, each on another source
// node, then load them 16 bytes at a time (35 scattered 4-byte loads a lane at p = 4 were
// M2L's bottleneck). The plan counts the same runs.
constexpr int float_multipole_stride(int nm) { return (nm + 3) / 4 * 4; }

// Tasks per chunk: what `usable` bytes hold beside `fixed` ones at bytes_per_task each, at
// most `requested` when that is positive (a test hook), never more than max_tasks; 0 when
// not one task fits. Free memory alone would allow more than 2^31 tasks on a large GPU.
std::size_t p2p_chunk_tasks(std::size_t usable, std::size_t fixed, std::size_t bytes_per_task,
                            std::size_t requested, std::size_t max_tasks = kMaxP2PChunkTasks);

// The bytes the run may use: free_bytes, or limit_gib GiB ([gpu] memory_limit_gib) when that
// is positive and smaller.
std::size_t usable_device_memory(std::size_t free_bytes, double limit_gib);

// Fails (orbis::Error, before any work) when the plan does not fit in `usable` bytes; the
// message gives both, the device, the limit when one is set, and what lowers the need.
void check_device_memory(const DeviceMemoryPlan& plan, std::size_t usable, std::size_t free_bytes, double limit_gib,
                         const std::string& device);

}  // namespace orbis
