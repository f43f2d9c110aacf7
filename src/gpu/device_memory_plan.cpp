#include "gpu/device_memory_plan.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/error.hpp"
#include "tree/multi_index.hpp"

namespace orbis {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Grow-only device arrays take 1/8 more than asked (gpu/device_buffer.cuh).
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

std::size_t DeviceMemoryPlan::total() const {
  std::size_t t = 0;
  for (const Part& p : parts) t += p.bytes;
  return t;
}

std::string DeviceMemoryPlan::describe() const {
  std::string out;
  for (const Part& p : parts) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {:.2f} GiB", p.name, p.bytes / kGiB);
  }
  return fmt::format("{}; {:.2f} GiB in all ({:.0f} bytes per particle)", out, total() / kGiB,
                     particles > 0 ? static_cast<double>(total()) / particles : 0.0);
}

DeviceMemoryPlan plan_device_memory(const DeviceMemoryInput& in) {
  DeviceMemoryPlan plan;
  const std::size_t n = in.particles;
  plan.particles = n;
  // Positions, momenta, ids, time bins, long-range (double) and short-range accelerations;
  // PM only: the transfers' staging (TreePM borrows the short-range step's).
  plan.parts.push_back(
      {"state", padded(n * (24 + 24 + 8 + 1 + 24 + (in.short_acc_double ? 24 : 12) + (in.short_range ? 0 : 24)))});
  if (in.short_range) {
    const ShortRangeSettings& s = in.settings;
    const std::size_t nl = orb_tree_leaves(n, s.max_leaf), nn = 2 * nl - 1;
    // Device ORB tree: three sorted index lists twice, their scan, the sort's keys and values,
    // order, node of each particle, flags, tree-order positions; per node the shape, level
    // lists, axis, radius, geometry; per leaf its record and node; the sorts' temporaries.
    const std::size_t tree = padded(n * (24 + 12 + 8 + 16 + 4 + 4 + 1 + 24 + 8) + nn * (24 + 4 + 1 + 8 + 80) + nl * 36);
    plan.parts.push_back({"tree", tree});
    const auto entries = static_cast<std::size_t>(kPlannedP2PEntriesPerLeaf * static_cast<double>(nl));
    const std::size_t tasks = 2 * entries;
    const auto m2l = static_cast<std::size_t>(kM2LPerNode * static_cast<double>(nn));
    const auto frontier = static_cast<std::size_t>(kFrontierPerLeaf * static_cast<double>(nl));
    // Walk: entries, M2L tasks (raw, sorted, keys), two frontiers; its node records.
    plan.parts.push_back({"walk", padded(entries * 8 + m2l * 32 + frontier * 16 + nn * (96 + 8))});
    // The tasks of one chunk of target leaves, selected, expanded and sorted by target: per
    // entry its position, per task keys and values twice and the sort's temporaries, per leaf
    // the groups (gpu/p2p_cuda_chunks.cuh). A step takes them in as few chunks as memory
    // allows; the plan reserves a quarter of them (four chunks).
    plan.parts.push_back({"P2P tasks", padded(entries * 4 + tasks / 4 * 20 + nl * 24)});
    // Leaf-relative positions, tree-order accelerations, active flags and their scan.
    plan.parts.push_back({"P2P", padded(n * (3 * (s.p2p_double ? 8 : 4) + 24 + 4) + nn + nl)});
    const std::size_t per_node =
        (MultiIndexSet::count(s.multipole_order) + MultiIndexSet::count(s.multipole_order + 1)) * sizeof(double) + 1;
    plan.parts.push_back({"far field", padded(nn * per_node)});
  }
  plan.parts.push_back({"PM", in.pm_bytes});
  plan.parts.push_back({"CUDA and CUB reserve", std::size_t{256} << 20});
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
