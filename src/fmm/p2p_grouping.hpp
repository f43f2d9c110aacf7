// P2P tasks grouped by target leaf (PhotoNs-GPU §3.2): the task list is reordered by its
// target (a stable sort, so tasks of one target keep the walk's source order) into
// TaskGroup, and GroupIdx says where each target's run of tasks starts and how long it is.
// One GPU thread block / one OpenMP iteration then owns one target leaf and writes each of
// its particles once, with no atomics.
//
// This host version is the reference that the Thrust grouping (src/gpu) must equal
// element for element.
#pragma once
#include <cstdint>
#include <vector>

#include "fmm/tasks.hpp"

namespace orbis {

struct GroupIdx {
  std::uint32_t i_leaf = 0;   // the target leaf
  std::uint32_t start = 0;    // first task of this target in TaskGroup
  std::uint32_t count = 0;    // number of tasks (>= 1)
};
static_assert(sizeof(GroupIdx) == 12, "GroupIdx is copied to and from the GPU as is");

struct GroupedTasks {
  std::vector<InteractionTask> tasks;   // TaskGroup: stably sorted by target
  std::vector<GroupIdx> groups;         // one per distinct target, in increasing target order
};

// O(n + n_leaves) counting sort (parallel, group_spans_by_target). Fails on a target or
// source >= n_leaves.
GroupedTasks group_tasks_by_target(const std::vector<InteractionTask>& tasks,
                                   std::size_t n_leaves);

// The stable counting sort by target of the concatenation of `spans`: out[offsets[t] ..
// offsets[t + 1]) holds the tasks of target t in input order (offsets has n_targets + 1
// entries). OpenMP in three passes (count per piece and bucket of targets, scatter into
// buckets, sort each bucket), every position fixed by the input alone: the same result as
// the serial sort for any thread count. scratch is a reused buffer of the same size as out.
// Fails on a target >= n_targets, or a source >= source_limit when source_limit > 0.
//
// With `canonical`, each target's tasks are then sorted by (source rank, image) instead of
// kept in input order (source rank: source_rank[source], or the source index itself when
// source_rank is null; rank_source its inverse; image lexicographic). The order in which a
// target's contributions are summed is then a function of the set of its tasks and the
// ranks alone, not of the walk's traversal (see DualTreeWalk::run).
void group_spans_by_target(const std::vector<TaskSpan>& spans, std::size_t n_targets,
                           std::size_t source_limit, std::vector<std::size_t>& offsets,
                           std::vector<InteractionTask>& out, std::vector<InteractionTask>& scratch,
                           bool canonical = false, const std::uint32_t* source_rank = nullptr,
                           const std::uint32_t* rank_source = nullptr);

}  // namespace orbis
