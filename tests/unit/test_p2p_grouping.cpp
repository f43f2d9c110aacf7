// The host grouping of P2P tasks by target leaf (the reference the Thrust grouping must
// equal): invariants checked on random, shuffled task lists with repeats.
#include <doctest/doctest.h>

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "fmm/p2p_grouping.hpp"

using namespace orbis;

namespace {
std::vector<InteractionTask> random_tasks(std::size_t n, std::uint32_t n_leaves, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<InteractionTask> tasks(n);
  for (std::size_t k = 0; k < n; ++k) {
    // targets concentrated on few leaves (clustered walks), sources anywhere; the image
    // encodes the original position so that stability is visible.
    tasks[k].target = static_cast<std::uint32_t>(rng() % (1 + rng() % n_leaves));
    tasks[k].source = static_cast<std::uint32_t>(rng() % n_leaves);
    tasks[k].image[0] = static_cast<std::int8_t>(k % 3 - 1);
    tasks[k].image[1] = static_cast<std::int8_t>((k / 3) % 3 - 1);
    tasks[k].image[2] = static_cast<std::int8_t>((k / 9) % 3 - 1);
  }
  return tasks;
}
bool same(const InteractionTask& a, const InteractionTask& b) {
  return a.target == b.target && a.source == b.source && a.image[0] == b.image[0] &&
         a.image[1] == b.image[1] && a.image[2] == b.image[2];
}
}  // namespace

TEST_CASE("grouping invariants on random task lists") {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const std::uint32_t n_leaves = 500;
    const auto tasks = random_tasks(20000, n_leaves, seed);
    const GroupedTasks g = group_tasks_by_target(tasks, n_leaves);
    REQUIRE(g.tasks.size() == tasks.size());
    std::size_t covered = 0;
    for (std::size_t k = 0; k < g.groups.size(); ++k) {
      const GroupIdx& grp = g.groups[k];
      REQUIRE(grp.count >= 1);
      if (k > 0) {
        CHECK(grp.i_leaf > g.groups[k - 1].i_leaf);                          // increasing targets
        CHECK(grp.start == g.groups[k - 1].start + g.groups[k - 1].count);   // contiguous
      } else {
        CHECK(grp.start == 0);
      }
      covered += grp.count;
      // The group holds exactly this target's tasks, in their original order (stable).
      std::vector<InteractionTask> expected;
      for (const auto& t : tasks)
        if (t.target == grp.i_leaf) expected.push_back(t);
      REQUIRE(expected.size() == grp.count);
      for (std::uint32_t q = 0; q < grp.count; ++q) CHECK(same(g.tasks[grp.start + q], expected[q]));
    }
    CHECK(covered == tasks.size());
    // Every target that occurs has a group, and no other.
    std::vector<char> seen(n_leaves, 0);
    for (const auto& t : tasks) seen[t.target] = 1;
    CHECK(static_cast<std::size_t>(std::count(seen.begin(), seen.end(), 1)) == g.groups.size());
  }
}

TEST_CASE("grouping edge cases") {
  CHECK(group_tasks_by_target({}, 10).groups.empty());
  std::vector<InteractionTask> one(1);
  one[0].target = 9;
  one[0].source = 0;
  const auto g = group_tasks_by_target(one, 10);
  REQUIRE(g.groups.size() == 1);
  CHECK(g.groups[0].i_leaf == 9);
  CHECK(g.groups[0].count == 1);
  CHECK_THROWS_AS(group_tasks_by_target(one, 9), Error);   // target beyond the leaves
  one[0].target = 0;
  one[0].source = 10;
  CHECK_THROWS_AS(group_tasks_by_target(one, 10), Error);  // source beyond the leaves
}

TEST_CASE("parallel grouping of spans equals a serial stable sort, for any thread count") {
  // Many pieces (> 2^16 tasks in one span), buckets wider than one target (> 1024 targets),
  // empty spans, and targets that occur nowhere.
  const std::uint32_t n_targets = 5000;
  const auto a = random_tasks(150000, n_targets, 11);
  const auto b = random_tasks(3000, n_targets, 12);
  std::vector<InteractionTask> all(a);
  all.insert(all.end(), b.begin(), b.end());
  std::vector<InteractionTask> ref(all);
  std::stable_sort(ref.begin(), ref.end(),
                   [](const InteractionTask& x, const InteractionTask& y) { return x.target < y.target; });
  const std::vector<TaskSpan> spans{{a.data(), a.size()}, {nullptr, 0}, {b.data(), b.size()}};
  for (int threads : {1, 2, 3}) {
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<std::size_t> offsets;
    std::vector<InteractionTask> out, scratch;
    group_spans_by_target(spans, n_targets, n_targets, offsets, out, scratch);
    omp_set_num_threads(before);
    REQUIRE(out.size() == ref.size());
    bool equal = true;
    for (std::size_t q = 0; q < ref.size(); ++q) equal &= same(out[q], ref[q]);
    CHECK(equal);
    REQUIRE(offsets.size() == n_targets + 1);
    bool offsets_ok = offsets[n_targets] == ref.size();
    for (std::uint32_t t = 0; t < n_targets; ++t)
      for (std::size_t q = offsets[t]; q < offsets[t + 1]; ++q) offsets_ok &= out[q].target == t;
    CHECK(offsets_ok);
  }
  // An already grouped list (the walk's) takes a copy path: the same result.
  const GroupedTasks g1 = group_tasks_by_target(all, n_targets), g2 = group_tasks_by_target(ref, n_targets);
  REQUIRE(g1.tasks.size() == g2.tasks.size());
  REQUIRE(g1.groups.size() == g2.groups.size());
  CHECK(std::memcmp(g1.tasks.data(), g2.tasks.data(), g1.tasks.size() * sizeof(InteractionTask)) == 0);
  CHECK(std::memcmp(g1.groups.data(), g2.groups.data(), g1.groups.size() * sizeof(GroupIdx)) == 0);
  std::vector<std::size_t> offsets;
  std::vector<InteractionTask> out, scratch;
  CHECK_THROWS_AS(group_spans_by_target(spans, n_targets / 2, 0, offsets, out, scratch), Error);
  CHECK_THROWS_AS(group_spans_by_target(spans, n_targets, n_targets / 2, offsets, out, scratch), Error);
}

TEST_CASE("canonical grouping: each target's tasks by (source rank, image), whatever the input order") {
  const std::uint32_t n_targets = 3000;
  std::vector<InteractionTask> all = random_tasks(120000, n_targets, 21);
  // Sources given ranks in reverse index order (as a forest's keys may order them).
  std::vector<std::uint32_t> rank(n_targets), source_of(n_targets);
  for (std::uint32_t s = 0; s < n_targets; ++s) {
    rank[s] = n_targets - 1 - s;
    source_of[n_targets - 1 - s] = s;
  }
  for (const bool ranked : {false, true}) {
    CAPTURE(ranked);
    const auto key = [&](const InteractionTask& t) {
      return std::make_tuple(t.target, ranked ? rank[t.source] : t.source, t.image[0], t.image[1], t.image[2]);
    };
    std::vector<InteractionTask> ref(all);
    std::sort(ref.begin(), ref.end(), [&](const InteractionTask& x, const InteractionTask& y) { return key(x) < key(y); });
    std::vector<InteractionTask> shuffled(all);
    std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(5));
    for (int threads : {1, 2}) {
      for (const auto* input : {&all, &shuffled}) {
        const int before = omp_get_max_threads();
        omp_set_num_threads(threads);
        std::vector<std::size_t> offsets;
        std::vector<InteractionTask> out, scratch;
        const std::vector<TaskSpan> spans{{input->data(), 70000}, {input->data() + 70000, input->size() - 70000}};
        group_spans_by_target(spans, n_targets, n_targets, offsets, out, scratch, true,
                              ranked ? rank.data() : nullptr, ranked ? source_of.data() : nullptr);
        omp_set_num_threads(before);
        REQUIRE(out.size() == ref.size());
        bool equal = true;
        for (std::size_t q = 0; q < ref.size(); ++q) equal &= same(out[q], ref[q]) && out[q].flags == ref[q].flags;
        CHECK(equal);
        CHECK(offsets[n_targets] == ref.size());
      }
    }
  }
}
