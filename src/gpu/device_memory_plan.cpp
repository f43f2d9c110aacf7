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

// Task lists per tree leaf / node that the plan reserves: P2P entries (a mutual pair is one
// entry) per leaf (kPlannedP2PEntriesPerLeaf, fmm/short_range.hpp), M2L tasks per node, and
// the largest frontier of node pairs per leaf.
constexpr double kM2LPerNode = 6;
constexpr double kFrontierPerLeaf = 16;

}  // namespace

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

std::size_t planned_p2p_chunk_tasks(std::size_t n, int max_leaf) {
  const auto entries =
      static_cast<std::size_t>(kPlannedP2PEntriesPerLeaf * static_cast<double>(orb_tree_leaves(n, max_leaf)));
  return std::max<std::size_t>(2 * entries / 4, 1);
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
    // Over ranks the forest's particles (own then ghosts) in x | y | z blocks, the target
    // mask, and the forest's accelerations before they go to the own particles; and the
    // positions this rank sends as ghosts, about as many as it receives, packed in the ghost
    // exchange's buffer (a quarter more when it grows).
    const std::size_t ghosts = in.sources > n ? in.sources - n : 0;
    plan.parts.push_back(
        {"forest sources", in.sources * (24 + 1 + (in.short_acc_double ? 24 : 12)) + ghosts * 30, ""});
  }
  if (in.short_range) {
    const ShortRangeSettings& s = in.settings;
    // The tree holds the forest over ranks, the particles on one rank.
    const std::size_t nt = in.sources > 0 ? in.sources : n;
    const std::size_t nl = orb_tree_leaves(nt, s.max_leaf), nn = 2 * nl - 1;
    // The device ORB tree kept from step to step: tree order and tree-order positions per
    // particle; per node the shape, level lists, axis, radius, arrival count and geometry;
    // per leaf its record, node and ancestors (a forest over ranks is deeper than a tree of
    // its leaves by up to a few levels: 8 more planned).
    const std::size_t depth = static_cast<std::size_t>(std::ceil(std::log2(static_cast<double>(nl) + 1))) + 8;
    plan.parts.push_back({"tree", nt * (4 + 24) + padded(nn * (28 + 4 + 1 + 8 + 4 + 80) + nl * (36 + 4 * depth)), ""});
    // Its build: three sorted index lists twice, their scan, the sorts' keys and values,
    // node of each particle, flags, the sorts' temporaries.
    plan.parts.push_back({"build", nt * (24 + 12 + 8 + 16 + 4 + 1 + 8), "tree build"});
    const auto entries = static_cast<std::size_t>(kPlannedP2PEntriesPerLeaf * static_cast<double>(nl));
    const auto m2l = static_cast<std::size_t>(kM2LPerNode * static_cast<double>(nn));
    const auto frontier = static_cast<std::size_t>(kFrontierPerLeaf * static_cast<double>(nl));
    // The short-range step: the walk's outputs (P2P entries with 1/4 headroom, M2L tasks
    // sorted, offsets) live through it; beside them, in turn, the walk's work arrays (two
    // frontiers, the unsorted M2L tasks and their keys, the node records), then the P2P's
    // (per entry its position in the chunk, the tasks of one chunk expanded and sorted in two
    // buffers, per leaf the groups and their schedule; leaf-relative positions and tree-order
    // accelerations), then the far field's (expansions per node, the accelerations).
    const std::size_t outputs = (entries + entries / 4) * 8 + m2l * 16 + nn * 8;
    const std::size_t walk_work = frontier * 16 + m2l * (16 + 8) + nn * 96;
    // (With individual masses the weights in tree order live through P2P and the far field.)
    const std::size_t acc_tree = nt * 24 + (in.weights ? nt * 8 : 0);
    const std::size_t p2p = entries * 4 + planned_p2p_chunk_tasks(nt, s.max_leaf) * 16 + nl * kP2PBytesPerLeaf +
                            nt * 3 * (s.p2p_double ? 8 : 4) + acc_tree;
    const std::size_t per_node =
        (MultiIndexSet::count(s.multipole_order) + MultiIndexSet::count(s.multipole_order + 1)) * sizeof(double) + 2;
    const std::size_t far_field = padded(nn * per_node) + acc_tree;
    plan.parts.push_back({"walk outputs", outputs, "short range"});
    plan.parts.push_back({"P2P, walk or far field arrays", std::max({walk_work, p2p, far_field}), "short range"});
  }
  if (in.short_range && in.sources > 0) {
    // Over ranks, a domain update on the device (gpu/domain_update_cuda.cuh), its arrays from
    // the pool for the update alone: at its peak the subtree order's working arrays (~70 bytes
    // a particle: gpu/subtree_order_cuda.cuh), the order, the own groups and the leavers' then
    // stayers' indices (4 bytes each), and the arrivals' state (57 bytes a particle; after reading a
    // snapshot nearly every particle may arrive). The top tree's arrays (~38 bytes) and each
    // particle's group (4 bytes, from the top tree to the own groups) are gone by then.
    plan.parts.push_back({"domain update", n * (70 + 4 + 4 + 4 + 57), "domain update"});
  }
  plan.parts.push_back({"PM", in.pm_bytes, "PM"});
  plan.parts.push_back({"PM tables", in.pm_held_bytes, ""});
  if (in.pm_slab_bytes > 0 || in.pm_bytes_per_particle > 0) {
    // Taken from the pool by each PM step and given back (gpu/pm_cuda_ranks.hpp); a rank's own
    // and routed counts are both near its share when the domains are nearly x slabs.
    plan.parts.push_back({"PM slabs", in.pm_slab_bytes, "PM"});
    plan.parts.push_back({"PM routed particles", padded(n * in.pm_bytes_per_particle), "PM"});
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
