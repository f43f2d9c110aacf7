// Counting sort by target: stable by construction and linear in the number of tasks.
#include "fmm/p2p_grouping.hpp"

#include "core/error.hpp"

namespace orbis {

GroupedTasks group_tasks_by_target(const std::vector<InteractionTask>& tasks,
                                   std::size_t n_leaves) {
  if (tasks.size() >= (std::size_t{1} << 32))
    fail("P2P grouping: {} tasks exceed the 32-bit task index", tasks.size());
  std::vector<std::uint32_t> start(n_leaves + 1, 0);   // counts, then exclusive prefix sums
  for (const InteractionTask& t : tasks) {
    if (t.target >= n_leaves || t.source >= n_leaves)
      fail("P2P grouping: task ({}, {}) refers to a leaf beyond the {} leaves", t.target,
           t.source, n_leaves);
    ++start[t.target + 1];
  }
  GroupedTasks out;
  for (std::size_t l = 0; l < n_leaves; ++l) {
    const std::uint32_t count = start[l + 1];
    start[l + 1] = start[l] + count;
    if (count > 0) out.groups.push_back({static_cast<std::uint32_t>(l), start[l], count});
  }
  out.tasks.resize(tasks.size());
  std::vector<std::uint32_t> next(start.begin(), start.end() - 1);
  for (const InteractionTask& t : tasks) out.tasks[next[t.target]++] = t;   // stable
  return out;
}

}  // namespace orbis
