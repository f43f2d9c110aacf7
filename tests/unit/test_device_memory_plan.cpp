// The GPU step's memory plan (gpu/device_memory_plan.hpp) is plain arithmetic, checked here
// without a GPU: the tree's leaf count matches OrbTree::shape, the plan grows with the
// particles and the settings that should raise it, and a plan beyond the usable memory fails
// with what was needed, what was available, the limit and the settings that lower the need.
// The file is built only with CUDA (the plan lives in the GPU library); without it the test
// says so and is skipped.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#if defined(ORBIS_HAVE_CUDA)
#include "core/error.hpp"
#include "gpu/device_memory_plan.hpp"
#include "tree/orb_tree.hpp"

using namespace orbis;

namespace {
// A box of 512^3 particles with a 1024^3 mesh's split (r_s = 2 cells, r_cut = 5.5 r_s).
ShortRangeSettings settings(int max_leaf, int order) {
  ShortRangeSettings s;
  s.box_mpc_h = 100;
  s.mean_spacing = 100.0 / 512;
  s.r_s = 0.2;
  s.r_cut = 1.1;
  s.max_leaf = max_leaf;
  s.multipole_order = order;
  return s;
}
}  // namespace

TEST_CASE("the ORB tree's leaves are counted without building it") {
  for (std::size_t n : {1u, 31u, 32u, 33u, 1000u, 4097u, 100000u})
    for (int max_leaf : {1, 8, 32, 100}) {
      std::size_t leaves = 0;
      for (const TreeNode& node : OrbTree::shape(n, max_leaf)) leaves += node.is_leaf();
      CAPTURE(n);
      CAPTURE(max_leaf);
      CHECK(orb_tree_leaves(n, max_leaf) == leaves);
    }
}

TEST_CASE("the memory plan grows with what should raise it") {
  DeviceMemoryInput in;
  in.particles = std::size_t{1} << 24;
  in.settings = settings(32, 4);
  in.pm_bytes = std::size_t{1} << 30;
  const DeviceMemoryPlan base = plan_device_memory(in);
  CHECK(base.total() > in.pm_bytes + 100 * in.particles);
  CHECK(base.describe().find("bytes per particle") != std::string::npos);
  DeviceMemoryInput more = in;
  more.particles *= 2;
  CHECK(plan_device_memory(more).total() > base.total());
  more = in;
  more.settings = settings(64, 4);   // larger leaves: fewer nodes and tasks
  CHECK(plan_device_memory(more).total() < base.total());
  // A higher order: larger expansions, every node's in vacuum (a box keeps its few M2L
  // tasks' nodes' alone, which the other arrays of its short-range step outweigh).
  more = in;
  more.settings = settings(32, 6);
  CHECK(plan_device_memory(more).total() >= base.total());
  DeviceMemoryInput isolated = in;
  isolated.settings.boundary = Boundary::vacuum;
  more = isolated;
  more.settings.multipole_order = 6;
  CHECK(plan_device_memory(more).total() > plan_device_memory(isolated).total());
  more = in;
  more.short_range = false;   // PM only
  CHECK(plan_device_memory(more).total() < base.total());
}

TEST_CASE("a box's walk is planned from its cut in interparticle spacings, holding the measured lists") {
  // The largest counts of the full steps of 256^3 in 1 Gpc/h at z = 0.05 (max_leaf 32, theta
  // 0.5) with the cut at 4.8, 7.2 and 14.4 spacings (PM meshes 3N, 2N, N): P2P entries a leaf,
  // widest frontier a leaf and M2L tasks a node, of one tree and of a rank's forest (2 ranks).
  struct Measured {
    double r, entries, frontier, m2l, forest_entries, forest_frontier, forest_m2l;
  };
  const Measured runs[] = {{4.8, 47.3, 30.5, 0.0026, 39.0, 21.9, 0.0021},
                           {7.2, 97.4, 72.4, 0.038, 80.7, 50.4, 0.032},
                           {14.4, 408.4, 398.7, 12.44, 288.0, 258.0, 8.77}};
  ShortRangeSettings s = settings(32, 4);
  s.mean_spacing = 1000.0 / 256;
  double last_entries = 0, last_m2l = 0;
  for (const Measured& run : runs) {
    CAPTURE(run.r);
    s.r_cut = run.r * s.mean_spacing;
    const PlannedWalk one = planned_walk(s, 1 << 19), forest = planned_walk(s, 1 << 18, true);
    CHECK(one.entries_per_leaf >= run.entries);
    CHECK(one.entries_per_leaf < 1.2 * run.entries);
    CHECK(one.frontier_per_leaf >= run.frontier);
    CHECK(forest.entries_per_leaf >= run.forest_entries);
    CHECK(forest.frontier_per_leaf >= run.forest_frontier);
    CHECK(forest.frontier_per_leaf < 1.5 * run.forest_frontier);
    CHECK(forest.m2l_per_node >= run.forest_m2l / 2);   // M2L tasks are few bytes below ~1 a node
    if (run.m2l > 1) CHECK(one.m2l_per_node >= run.m2l);
    CHECK(one.entries_per_leaf > last_entries);
    CHECK(one.m2l_per_node > last_m2l);
    last_entries = one.entries_per_leaf;
    last_m2l = one.m2l_per_node;
  }
  // Far beyond the cuts measured the M2L tasks stay at most an isolated system's whole walk's.
  s.r_cut = 100 * s.mean_spacing;
  ShortRangeSettings isolated = s;
  isolated.boundary = Boundary::vacuum;
  CHECK(planned_walk(s, 1 << 19).m2l_per_node <= planned_walk(isolated, 1 << 19).m2l_per_node);
  // Without the spacing (settings made by hand) the reference lists of the 2N mesh.
  s.mean_spacing = 0;
  CHECK(planned_walk(s, 1 << 19).entries_per_leaf == kPlannedP2PEntriesPerLeaf);
}

TEST_CASE("an isolated system's plan holds the lists its whole-tree walk makes") {
  DeviceMemoryInput in;
  in.particles = 1000000;
  in.settings = settings(32, 4);
  in.settings.boundary = Boundary::vacuum;
  in.settings.theta = 0.5;
  in.weights = true;
  const DeviceMemoryPlan vacuum = plan_device_memory(in);
  DeviceMemoryInput box = in;
  box.settings.boundary = Boundary::periodic;
  box.weights = false;
  // What the CUDA engine's walk made for 10^6 particles at theta 0.5, p 4 (bench_vacuum, an
  // H200, 2026-11-30): 8.0-8.8 M2L tasks a particle, 1.47e6 leaf-cell pairs, and 3920-4218 P2P
  // pairs a particle in ~30-particle leaves, ~2.3e6 mutual entries. The walk's outputs alone:
  // M2L sorted (12 bytes and a 4-byte key each), leaf-cell pairs twice (P2L and M2P, 12 each),
  // P2P entries (8 each).
  const double measured_outputs = 8.8e6 * 16 + 1.47e6 * 2 * 12 + 2.3e6 * 8;
  CHECK(static_cast<double>(vacuum.phase_bytes("short range")) > 2 * measured_outputs);
  CHECK(vacuum.phase_bytes("short range") > plan_device_memory(box).phase_bytes("short range"));
  CHECK(vacuum.phase_bytes("PM") == 0);
  // A smaller opening angle opens more nodes: more of every list.
  DeviceMemoryInput narrow = in;
  narrow.settings.theta = 0.3;
  CHECK(plan_device_memory(narrow).phase_bytes("short range") > 2 * vacuum.phase_bytes("short range"));
  // Without leaf-cell pairs the walk makes none of them.
  DeviceMemoryInput no_pairs = in;
  no_pairs.settings.leaf_cell = false;
  CHECK(plan_device_memory(no_pairs).phase_bytes("short range") < vacuum.phase_bytes("short range"));
  // Direct summation (theta 0): every pair of leaves, once.
  DeviceMemoryInput direct = in;
  direct.particles = 20000;
  direct.settings.theta = 0;
  const std::size_t leaves = orb_tree_leaves(direct.particles, 32);
  CHECK(plan_device_memory(direct).phase_bytes("short range") > leaves * leaves / 2 * 8);
}

TEST_CASE("over ranks the plan holds the rank's forest (own particles and ghosts) beside its own state") {
  DeviceMemoryInput in;
  in.particles = std::size_t{1} << 22;
  in.settings = settings(32, 4);
  in.pm_bytes = std::size_t{1} << 28;
  const DeviceMemoryPlan one = plan_device_memory(in);
  // A forest of the own particles alone: the one-rank plan's held parts plus its positions
  // and mask (24 + 1 bytes each) less the tree's own tree-order positions (24 bytes: a
  // forest's are its sources'); its targets' forces go into the state's arrays. A phase of
  // its own for the domain updates (139 bytes a particle at their peak, less the forest's
  // positions, given back before them), none for a sorted build (a forest is assembled from
  // the groups' subtree order).
  DeviceMemoryInput ranks = in;
  ranks.sources = in.particles;
  const DeviceMemoryPlan alone = plan_device_memory(ranks);
  CHECK(alone.held() == one.held() + in.particles * 1);
  CHECK(alone.describe().find("forest sources") != std::string::npos);
  CHECK(one.phase_bytes("domain update") == 0);
  CHECK(alone.phase_bytes("domain update") == in.particles * (139 - 24));
  CHECK(one.phase_bytes("tree build") > 0);
  CHECK(alone.phase_bytes("tree build") == 0);
  CHECK(alone.total() >= alone.held() + alone.phase_bytes("domain update"));
  // Ghosts as many again: the tree, walk and P2P parts grow, the state does not.
  ranks.sources = 2 * in.particles;
  const DeviceMemoryPlan ghosts = plan_device_memory(ranks);
  CHECK(ghosts.total() > alone.total() + in.particles * (24 + 1));
  const auto part = [](const DeviceMemoryPlan& p, const std::string& name) {
    for (const auto& q : p.parts)
      if (q.name == name) return q.bytes;
    return std::size_t{0};
  };
  CHECK(part(ghosts, "state") == part(one, "state"));
  CHECK(part(ghosts, "tree") > part(alone, "tree"));
  // The forest's leaves, when its groups are known, instead of those of one tree of all its
  // particles: fewer leaves, less tree, walk and P2P.
  DeviceMemoryInput grouped = ranks;
  grouped.forest_leaves = orb_tree_leaves(ranks.sources, 32) / 2;
  const DeviceMemoryPlan fewer = plan_device_memory(grouped);
  CHECK(part(fewer, "tree") < part(ghosts, "tree"));
  CHECK(fewer.phase_bytes("short range") < ghosts.phase_bytes("short range"));
  CHECK(part(fewer, "state") == part(ghosts, "state"));
  // Double short-range accelerations: in the state alone, as on one rank.
  ranks.short_acc_double = true;
  ranks.sources = in.particles;
  DeviceMemoryInput one_double = in;
  one_double.short_acc_double = true;
  CHECK(plan_device_memory(ranks).held() == plan_device_memory(one_double).held() + in.particles * 1);
}

TEST_CASE("the plan holds the persistent parts plus the largest phase, not every phase at once") {
  DeviceMemoryInput in;
  in.particles = std::size_t{1} << 27;   // 512^3
  in.settings = settings(32, 4);
  in.pm_bytes = std::size_t{1024} * 1024 * 1026 * 4 * 2;   // a 1024^3 float mesh and its work mesh
  in.pm_held_bytes = 1 << 20;
  const DeviceMemoryPlan plan = plan_device_memory(in);
  std::size_t all = 0;
  for (const auto& part : plan.parts) all += part.bytes;
  const std::string largest = plan.largest_phase();
  CHECK(!largest.empty());
  CHECK(plan.total() == plan.held() + plan.phase_bytes(largest));
  for (const char* phase : {"PM", "tree build", "short range"}) {
    CAPTURE(phase);
    CHECK(plan.phase_bytes(phase) > 0);
    CHECK(plan.phase_bytes(phase) <= plan.phase_bytes(largest));
  }
  CHECK(plan.total() < all);   // the phases share their memory
  CHECK(plan.phase_bytes("PM") == in.pm_bytes);
  MESSAGE(plan.describe());
  CHECK(plan.describe().find("phases, one at a time") != std::string::npos);
  // The bar at 512^3 with the 1024^3 mesh: at most 250 bytes per particle planned.
  CHECK(static_cast<double>(plan.total()) / static_cast<double>(in.particles) <= 250.0);
  // A larger mesh raises the plan only once the PM is the largest phase.
  DeviceMemoryInput bigger = in;
  bigger.pm_bytes = plan.phase_bytes(largest) + (std::size_t{1} << 30);
  CHECK(plan_device_memory(bigger).largest_phase() == "PM");
  CHECK(plan_device_memory(bigger).total() == plan.held() + bigger.pm_bytes);
}

TEST_CASE("over ranks the plan takes the PM's slabs and its routed particles' buffers as the PM's phase") {
  DeviceMemoryInput in;
  in.particles = std::size_t{1} << 20;
  in.sources = 2 * in.particles;
  in.settings = settings(32, 4);
  const DeviceMemoryPlan without = plan_device_memory(in);
  in.pm_slab_bytes = std::size_t{300} << 20;
  in.pm_routing_bytes = std::size_t{120} << 20;
  const DeviceMemoryPlan with = plan_device_memory(in);
  // Both a phase of their own (taken from the pool by each PM step and given back): not held,
  // and the total grows only where the PM's phase is the largest.
  CHECK(with.held() == without.held());
  CHECK(with.phase_bytes("PM") >= in.pm_slab_bytes + in.pm_routing_bytes);
  CHECK(with.total() == std::max(without.total(), with.held() + with.phase_bytes("PM")));
  CHECK(with.describe().find("PM slabs") != std::string::npos);
  CHECK(with.describe().find("PM routed particles") != std::string::npos);
}

TEST_CASE("a step's P2P chunk is a quarter of the planned tasks (a forest's an eighth), or all of a small step's") {
  const auto planned_tasks = [](std::size_t n) {
    return static_cast<std::size_t>(2 * kPlannedP2PEntriesPerLeaf * static_cast<double>(orb_tree_leaves(n, 32)));
  };
  const std::size_t n = std::size_t{1} << 27;
  REQUIRE(planned_tasks(n) / 4 > kMinPlannedP2PChunkTasks);
  CHECK(planned_p2p_chunk_tasks(orb_tree_leaves(n, 32)) == planned_tasks(n) / 4);
  CHECK(planned_p2p_chunk_tasks(orb_tree_leaves(n, 32), true) == planned_tasks(n) / 8);
  CHECK(planned_p2p_chunk_tasks(orb_tree_leaves(n, 64)) < planned_p2p_chunk_tasks(orb_tree_leaves(n, 32)));
  // 10^6 particles: every planned task in one chunk (a quarter would make three or four).
  const std::size_t small = 1000000;
  REQUIRE(planned_tasks(small) <= kMinPlannedP2PChunkTasks);
  CHECK(planned_p2p_chunk_tasks(orb_tree_leaves(small, 32)) == planned_tasks(small));
  // Between: at least the floor.
  const std::size_t mid = std::size_t{1} << 22;
  REQUIRE(planned_tasks(mid) > kMinPlannedP2PChunkTasks);
  REQUIRE(planned_tasks(mid) / 4 < kMinPlannedP2PChunkTasks);
  CHECK(planned_p2p_chunk_tasks(orb_tree_leaves(mid, 32)) == kMinPlannedP2PChunkTasks);
  CHECK(planned_p2p_chunk_tasks(orb_tree_leaves(mid, 32), true) == kMinPlannedP2PChunkTasks);
  CHECK(planned_p2p_chunk_tasks(orb_tree_leaves(1, 32)) >= 1);
}

TEST_CASE("a plan beyond the usable memory fails before any work, saying why") {
  CHECK(usable_device_memory(1000, 0) == 1000);
  CHECK(usable_device_memory(std::size_t{8} << 30, 1.0) == std::size_t{1} << 30);
  CHECK(usable_device_memory(std::size_t{1} << 30, 4.0) == std::size_t{1} << 30);

  DeviceMemoryInput in;
  in.particles = 1000000;
  in.settings = settings(32, 4);
  const DeviceMemoryPlan plan = plan_device_memory(in);
  CHECK_NOTHROW(check_device_memory(plan, plan.total(), plan.total(), 0, "test GPU"));
  std::string message;
  try {
    check_device_memory(plan, std::size_t{1} << 20, std::size_t{80} << 30, 0.001, "test GPU");
  } catch (const Error& e) {
    message = e.what();
  }
  MESSAGE(message);
  CHECK(message.find("1000000 particles") != std::string::npos);
  CHECK(message.find("needs") != std::string::npos);
  CHECK(message.find("0.00 GiB are available") != std::string::npos);
  CHECK(message.find("memory_limit_gib = 0.001") != std::string::npos);
  CHECK(message.find("max_leaf") != std::string::npos);
  CHECK(message.find("test GPU") != std::string::npos);
}

TEST_CASE("P2P chunks: what free memory holds, never more than one grouping's 32-bit task positions") {
  // 1000 bytes beside 200 fixed at 8 a task: 100 tasks; a request lowers it, never raises it.
  CHECK(p2p_chunk_tasks(1000, 200, 8, 0, 1000) == 100);
  CHECK(p2p_chunk_tasks(1000, 200, 8, 40, 1000) == 40);
  CHECK(p2p_chunk_tasks(1000, 200, 8, 500, 1000) == 100);
  // The ceiling (a small artificial one here) holds however much memory is free.
  CHECK(p2p_chunk_tasks(std::size_t{1} << 40, 0, 24, 0, 64) == 64);
  CHECK(p2p_chunk_tasks(std::size_t{1} << 40, 0, 24, 1000, 64) == 64);
  // Not one task fits: 0 (the caller's clear error).
  CHECK(p2p_chunk_tasks(100, 200, 8, 0, 1000) == 0);
  CHECK(p2p_chunk_tasks(200, 200, 8, 0, 1000) == 0);
  // The real ceiling: 141 GB free at 24 bytes a task would be ~6e9 tasks in one chunk.
  CHECK(kMaxP2PChunkTasks == 2147483647u);
  CHECK(p2p_chunk_tasks(std::size_t{141} << 30, std::size_t{1} << 30, 24, 0) == kMaxP2PChunkTasks);
}
#else
TEST_CASE("the GPU memory plan needs a CUDA build") {
  std::printf("SKIPPED: this build has no CUDA (configure with -DORBIS_CUDA=ON)\n");
  std::fflush(stdout);
  std::exit(77);
}
#endif
