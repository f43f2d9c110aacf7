#include "gpu/device_memory_plan.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/error.hpp"
#include "tree/multi_index.hpp"

namespace orbis {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Grow-only device arrays of changing size take 1/8 more than asked (gpu/device_buffer.cuh).
std::size_t padded(std::size_t bytes) { return bytes + bytes / 8; }

std::size_t leaves_of(std::size_t n, int max_leaf, std::map<std::size_t, std::size_t>& memo) {
  if (n <= static_cast<std::size_t>(max_leaf)) return 1;
  const auto it = memo.find(n);
  if (it != memo.end()) return it->second;
  const std::size_t l = leaves_of(n / 2, max_leaf, memo) + leaves_of(n - n / 2, max_leaf, memo);
  memo[n] = l;
  return l;
}

// Task lists per tree leaf / node that the plan reserves when the particles' mean spacing is
// unknown (tests that set no ShortRangeSettings::mean_spacing): P2P entries (a mutual pair is
// one entry) per leaf (kPlannedP2PEntriesPerLeaf, fmm/short_range.hpp), M2L tasks per node,
// and the largest frontier of node pairs per leaf, of one tree or of a rank's forest.
constexpr double kM2LPerNode = 6;
constexpr double kFrontierPerLeaf = 16;
constexpr double kForestFrontierPerLeaf = 64;

// A box's walk is bounded by the cut. With r = r_cut / d (d the mean interparticle spacing)
// and a leaf of m = max_leaf particles (side ~ m^(1/3) d), measured at 256^3 in 1 Gpc/h at
// z = 0.05 (max_leaf 32, theta 0.5; r = 4.8, 7.2, 14.4: the PM meshes 3N, 2N, N), the full
// steps' largest counts, one tree (one rank) / a rank's forest (2 ranks):
//   P2P entries a leaf   47 / 39, 97 / 81, 408 / 288: the volume within the cut of a leaf,
//                        2.2 (r + 1.26 m^(1/3))^3 / m (47, 97, 429) for one tree; a
//                        forest's targets are the rank's own particles alone: 0.70-0.83 of it;
//   widest frontier      0.64, 0.74, 0.98 of the entries (a forest's: 0.56, 0.62, 0.90 of
//                        one tree's);
//   M2L tasks a node     0.0026 / 0.0021, 0.038 / 0.032, 12.4 / 8.8: none until nodes fit
//                        inside the cut at the opening angle, then steeply more, as
//                        12.4 (x / 4.54)^8.35 with x = r / m^(1/3) (0.0013, 0.038, 12.4), at
//                        most what an isolated system's whole tree takes.
// Planned with headroom over these (the entries by 8%, a forest's at 0.85 of one tree's; the
// widest frontier at 0.95 of the entries, a forest's at 0.73 of its own; the M2L tasks by 40%);
// a step that needs more grows the walk's buffers.
PlannedWalk box_walk(const ShortRangeSettings& s, bool forest, double isolated_m2l_per_node) {
  const double m = std::max(s.max_leaf, 1), side = std::cbrt(m), r = s.r_cut / s.mean_spacing;
  PlannedWalk w;
  w.entries_per_leaf = (forest ? 0.85 : 1.0) * 1.08 * 2.2 * std::pow(r + 1.26 * side, 3) / m;
  w.frontier_per_leaf = (forest ? 0.73 : 0.95) * w.entries_per_leaf;
  w.m2l_per_node = std::min(1.4 * 12.4 * std::pow(r / side / 4.54, 8.35), isolated_m2l_per_node);
  return w;
}

}  // namespace

// A periodic box's walk is bounded by the cut (the constants above). An isolated system's
// (vacuum) accepts by the opening angle alone over the whole tree. At theta 0.5 (bench_vacuum,
// max_leaf 32, the CUDA engine's counts: Plummer sphere and Hernquist pair of 1e6 particles,
// Plummer of 1.6e7) 108-134 M2L tasks a node and, per leaf, 60-69 P2P entries and 24-45
// leaf-cell pairs; the host walk at 3e5 particles agrees (118 and 48). From theta 0.4 to 0.7
// the M2L tasks grew as theta^-1.3 and the P2P and leaf-cell pairs as theta^-2 (a halo with a
// bulge at 0.4: 184, 112 and 81). Planned at 1.4 times 125, 70 and 50 at 0.5, which held
// those runs' measured peaks with 4-24% to spare (their sorts' temporaries and the pool's
// fragmentation are not itemised); the walk still grows its buffers when a system needs more.
// Direct summation (theta 0): every leaf pair, once.
PlannedWalk planned_walk(const ShortRangeSettings& s, std::size_t leaves, bool forest) {
  const double t = s.theta > 0 ? 0.5 / s.theta : 0, headroom = 1.4;
  const double isolated_m2l_per_node = headroom * 125 * std::pow(t, 1.3);
  if (s.boundary != Boundary::vacuum) {
    if (s.mean_spacing > 0) return box_walk(s, forest, isolated_m2l_per_node);
    return {kPlannedP2PEntriesPerLeaf, kM2LPerNode, forest ? kForestFrontierPerLeaf : kFrontierPerLeaf, 0};
  }
  if (!(s.theta > 0)) {
    const double all = 0.5 * static_cast<double>(leaves) + 1;
    return {all, 0, all, 0};
  }
  PlannedWalk w;
  w.entries_per_leaf = headroom * 70 * t * t;
  w.m2l_per_node = isolated_m2l_per_node;
  w.leaf_cell_per_leaf = s.leaf_cell ? headroom * 50 * t * t : 0;
  // The widest frontier (node pairs of one level) was 0.39-0.42 of the P2P entries and
  // leaf-cell pairs (35-78 pairs a leaf).
  w.frontier_per_leaf = 0.5 * (w.entries_per_leaf + w.leaf_cell_per_leaf);
  return w;
}

std::size_t orb_tree_leaves(std::size_t n, int max_leaf) {
  if (n == 0) return 0;
  std::map<std::size_t, std::size_t> memo;
  return leaves_of(n, std::max(max_leaf, 1), memo);
}

std::size_t DeviceMemoryPlan::held() const {
  std::size_t t = 0;
  for (const Part& p : parts)
    if (p.phase.empty()) t += p.bytes;
  return t;
}

std::size_t DeviceMemoryPlan::phase_bytes(const std::string& phase) const {
  std::size_t t = 0;
  for (const Part& p : parts)
    if (p.phase == phase) t += p.bytes;
  return t;
}

std::string DeviceMemoryPlan::largest_phase() const {
  std::string largest;
  for (const Part& p : parts)
    if (!p.phase.empty() && (largest.empty() || phase_bytes(p.phase) > phase_bytes(largest))) largest = p.phase;
  return largest;
}

std::size_t DeviceMemoryPlan::total() const {
  const std::string largest = largest_phase();
  return held() + (largest.empty() ? 0 : phase_bytes(largest));
}

std::string DeviceMemoryPlan::describe() const {
  const auto gib = [](std::size_t b) { return fmt::format("{:.2f} GiB", b / kGiB); };
  std::string held_text, phases_text;
  std::vector<std::string> phases;
  for (const Part& p : parts) {
    if (p.phase.empty()) {
      held_text += fmt::format("{}{} {}", held_text.empty() ? "" : ", ", p.name, gib(p.bytes));
    } else if (std::find(phases.begin(), phases.end(), p.phase) == phases.end()) {
      phases.push_back(p.phase);
    }
  }
  for (const std::string& phase : phases) {
    std::string inside;
    int count = 0;
    for (const Part& p : parts)
      if (p.phase == phase) {
        inside += fmt::format("{}{} {}", inside.empty() ? "" : ", ", p.name, gib(p.bytes));
        ++count;
      }
    phases_text += fmt::format("{}{} {}{}", phases_text.empty() ? "" : ", ", phase, gib(phase_bytes(phase)),
                               count > 1 ? " (" + inside + ")" : std::string());
  }
  return fmt::format("held: {}; phases, one at a time: {}; {} in all ({:.0f} bytes per particle)", held_text,
                     phases_text, gib(total()), particles > 0 ? static_cast<double>(total()) / particles : 0.0);
}

std::size_t planned_p2p_chunk_tasks(std::size_t leaves, bool forest) {
  const auto entries = static_cast<std::size_t>(kPlannedP2PEntriesPerLeaf * static_cast<double>(leaves));
  const std::size_t tasks = 2 * entries;
  return std::max<std::size_t>({tasks / (forest ? 8 : 4), std::min(tasks, kMinPlannedP2PChunkTasks), 1});
}

DeviceMemoryPlan plan_device_memory(const DeviceMemoryInput& in) {
  DeviceMemoryPlan plan;
  const std::size_t n = in.particles;
  plan.particles = n;
  // Positions, momenta, ids, time bins, long-range (double) and short-range accelerations,
  // individual masses' weights; PM only: the transfers' staging (TreePM borrows the
  // short-range step's).
  plan.parts.push_back({"state",
                        n * (24 + 24 + 8 + 1 + 24 + (in.short_acc_double ? 24 : 12) + (in.short_range ? 0 : 24) +
                             (in.weights ? 8 : 0)),
                        ""});
  if (in.short_range && in.sources > 0) {
    // Over ranks the forest's particles (own then ghosts) in x | y | z blocks, which are also
    // its tree-order positions, and the target mask (the targets' forces go straight into the
    // state's arrays); and the positions this rank sends as ghosts, about as many as it
    // receives, packed in the ghost exchange's buffer (a quarter more when it grows).
    const std::size_t ghosts = in.sources > n ? in.sources - n : 0;
    plan.parts.push_back({"forest sources", in.sources * (24 + 1) + ghosts * 30, ""});
  }
  if (in.short_range) {
    const ShortRangeSettings& s = in.settings;
    // The tree holds the forest over ranks, the particles on one rank.
    const std::size_t nt = in.sources > 0 ? in.sources : n;
    const std::size_t nl = in.forest_leaves > 0 ? in.forest_leaves : orb_tree_leaves(nt, s.max_leaf);
    const std::size_t nn = 2 * nl - 1;
    // The device ORB tree kept from step to step: tree order and (but for a forest, whose
    // are its sources') tree-order positions per particle; per node the shape, level lists,
    // left particles before it in its depth (the build's scan terms), axis, radius, arrival
    // count and geometry; per leaf its record, node and ancestors (a forest over ranks is
    // deeper than a tree of its leaves by up to a few levels: 8 more planned).
    const std::size_t depth = static_cast<std::size_t>(std::ceil(std::log2(static_cast<double>(nl) + 1))) + 8;
    plan.parts.push_back({"tree",
                          nt * (4 + (in.sources > 0 ? 0 : 24)) +
                              padded(nn * (28 + 4 + 4 + 1 + 8 + 4 + 80) + nl * (36 + 4 * depth)),
                          ""});
    // Its build: three sorted index lists twice, the three axes' sorts' keys and values (they
    // run at once), node of each particle, flags, the temporaries. A forest is assembled
    // without sorting (its groups come in their subtree order from the domain update).
    if (in.sources == 0) plan.parts.push_back({"build", nt * (24 + 3 * (8 + 16) + 4 + 1 + 8), "tree build"});
    const PlannedWalk w = planned_walk(s, nl, in.sources > 0);
    const auto entries = static_cast<std::size_t>(w.entries_per_leaf * static_cast<double>(nl));
    const auto m2l = static_cast<std::size_t>(w.m2l_per_node * static_cast<double>(nn));
    const auto frontier = static_cast<std::size_t>(w.frontier_per_leaf * static_cast<double>(nl));
    // Vacuum's leaf-cell pairs: P2L and M2P tasks (12 bytes each), sorted into a second copy
    // by target with 4-byte keys, and their offsets per node and leaf.
    const auto leaf_cell = static_cast<std::size_t>(w.leaf_cell_per_leaf * static_cast<double>(nl));
    // The short-range step: the walk's outputs (P2P entries with 1/4 headroom, M2L tasks
    // sorted, offsets) live through it; beside them, in turn, the walk's work arrays (two
    // frontiers, the unsorted M2L tasks and their keys, the node records), then the P2P's
    // (per entry its position in the chunk, the tasks of one chunk expanded and sorted in two
    // buffers, per leaf the groups and their schedule; leaf-relative positions and tree-order
    // accelerations), then the far field's (expansions per node, the accelerations).
    const std::size_t outputs = (entries + entries / 4) * 8 + m2l * 16 + nn * 8 +
                                (leaf_cell > 0 ? leaf_cell * 2 * 12 + (nn + nl) * 8 : 0);
    const std::size_t walk_work = frontier * 16 + m2l * (16 + 8) + nn * 96 + leaf_cell * 2 * (12 + 8);
    // (With individual masses the weights in tree order live through P2P and the far field.)
    const std::size_t acc_tree = nt * 24 + (in.weights ? nt * 8 : 0);
    const std::size_t p2p = entries * 4 + planned_p2p_chunk_tasks(nl, in.sources > 0) * 16 + nl * kP2PBytesPerLeaf +
                            nt * 3 * (s.p2p_double ? 8 : 4) + acc_tree;
    const std::size_t per_node =
        (MultiIndexSet::count(s.multipole_order) + MultiIndexSet::count(s.multipole_order + 1)) * sizeof(double) + 2;
    // Vacuum's far field also keeps its chunks' partial expansions (65536 at most, DeviceFmm's
    // kMaxChunks), per node the chunk and entry scans and its multipoles in float (M2P's), and
    // per particle its M2P field.
    const auto nm = static_cast<std::size_t>(MultiIndexSet::count(s.multipole_order));
    const auto nm_float = static_cast<std::size_t>(float_multipole_stride(MultiIndexSet::count(s.multipole_order)));
    const std::size_t chunks = leaf_cell > 0 ? 65536 * MultiIndexSet::count(s.multipole_order + 1) * sizeof(double) +
                                                   (nn + 1) * 16 + nn * nm_float * 4 + nt * 24
                                             : 0;
    // A box keeps the expansions of the nodes its M2L tasks need alone (the sources' and the
    // targets' subtrees: 9.3k nodes for 21k tasks at 256^3 on 2 ranks, DeviceFmm::prepare), and
    // per node their flags and places.
    const bool box = s.boundary != Boundary::vacuum;
    const std::size_t expansions =
        (box ? padded(std::min(nn, m2l) * (per_node - 2) + nn * (2 + 2 * 4)) : padded(nn * per_node)) + chunks;
    plan.parts.push_back({"walk outputs", outputs, "short range"});
    if (leaf_cell > 0) {
      // Vacuum makes the multipoles while the walk runs and the other expansions while the P2P
      // runs (gpu/short_range_cuda.cu): their arrays live beside the walk's, then the P2P's.
      const std::size_t multipoles = padded(nn * (nm * 8 + nm_float * 4 + 1));
      plan.parts.push_back({"walk and multipoles, or P2P and far field arrays",
                            std::max(walk_work + multipoles, p2p + expansions), "short range"});
    } else {
      plan.parts.push_back({"P2P, walk or far field arrays", std::max({walk_work, p2p, expansions + acc_tree}),
                            "short range"});
    }
  }
  if (in.short_range && in.sources > 0) {
    // Over ranks, a domain update on the device (gpu/domain_update_cuda.cuh), its arrays from
    // the pool for the update alone: at its peak the subtree order's working arrays (~70 bytes
    // a particle: gpu/subtree_order_cuda.cuh), the order, the own groups and the leavers' then
    // stayers' indices (4 bytes each), and the arrivals' state (57 bytes a particle; after reading a
    // snapshot nearly every particle may arrive). The top tree's arrays (~38 bytes) and each
    // particle's group (4 bytes, from the top tree to the own groups) are gone by then.
    // The forest's positions (24 bytes a source, held) are given back before it (the ghost
    // refresh after it fills them anew): its arrays take their place.
    const std::size_t update = n * (70 + 4 + 4 + 4 + 57), positions = in.sources * 24;
    plan.parts.push_back({"domain update", update > positions ? update - positions : 0, "domain update"});
  }
  plan.parts.push_back({"PM", in.pm_bytes, "PM"});
  plan.parts.push_back({"PM tables", in.pm_held_bytes, ""});
  if (in.pm_slab_bytes > 0 || in.pm_routing_bytes > 0) {
    // Taken from the pool by each PM step and given back (gpu/pm_cuda_ranks.hpp).
    plan.parts.push_back({"PM slabs", in.pm_slab_bytes, "PM"});
    plan.parts.push_back({"PM routed particles", padded(in.pm_routing_bytes), "PM"});
  }
  plan.parts.push_back({"CUDA and CUB reserve", std::size_t{256} << 20, ""});
  return plan;
}

std::size_t p2p_chunk_tasks(std::size_t usable, std::size_t fixed, std::size_t bytes_per_task, std::size_t requested,
                            std::size_t max_tasks) {
  std::size_t tasks = usable > fixed ? (usable - fixed) / std::max<std::size_t>(bytes_per_task, 1) : 0;
  if (requested > 0) tasks = std::min(tasks, requested);
  return std::min(tasks, max_tasks);
}

std::size_t usable_device_memory(std::size_t free_bytes, double limit_gib) {
  if (!(limit_gib > 0)) return free_bytes;
  return std::min(free_bytes, static_cast<std::size_t>(limit_gib * kGiB));
}

void check_device_memory(const DeviceMemoryPlan& plan, std::size_t usable, std::size_t free_bytes, double limit_gib,
                         const std::string& device) {
  if (plan.total() <= usable) return;
  const std::string limit =
      limit_gib > 0 && usable < free_bytes ? fmt::format(", limited by [gpu] memory_limit_gib = {}", limit_gib) : "";
  fail("GPU memory: a step of {} particles on the GPU needs {:.2f} GiB of device memory, but {:.2f} GiB are available "
       "({:.2f} GiB free on {}{}). Plan: {}. Fewer particles per GPU, a larger [gravity] max_leaf (fewer tree nodes), "
       "a lower [gravity] multipole_order, a smaller [gravity] pm_grid_side, [gpu] p2p_precision = \"float\" need "
       "less; [gpu] backend = \"cpu\" needs none",
       plan.particles, plan.total() / kGiB, usable / kGiB, free_bytes / kGiB, device, limit, plan.describe());
}

}  // namespace orbis
