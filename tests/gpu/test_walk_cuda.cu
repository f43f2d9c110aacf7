// The device dual-tree walk against the CPU one (DualTreeWalk::run in half-span mode) on
// the same tree: the same P2P entries (target, source, image, mutual) and M2L tasks per
// target as multisets, the same M2L offsets; and the same arrays, bit for bit, run after run.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "fmm/walk.hpp"
#include "gpu/device_buffer.cuh"
#include "gpu/walk_cuda.cuh"
#include "support/clustered_particles.hpp"
#include "support/gpu_skip.hpp"
#include "tree/orb_tree.hpp"

using namespace orbis;

namespace {

// Settings as a run's (params/README.md): r_s = 1.2 L / N_side (2.4 cells of the 2 N_side
// PM mesh), r_cut = 5.5 r_s, theta 0.5.
WalkSettings run_settings(double box, int n_side) {
  const double r_s = 1.2 * box / n_side;
  return WalkSettings{box, std::min(5.5 * r_s, 6 * r_s), 0.5};
}

std::uint64_t entry_key(std::uint32_t target, std::uint32_t source) {
  return (static_cast<std::uint64_t>(target) << 32) | source;
}

auto m2l_key(const InteractionTask& t) {
  return std::make_tuple(t.target, t.source, t.image[0], t.image[1], t.image[2], t.flags);
}

struct DeviceResult {
  std::vector<std::uint32_t> p2p_t, p2p_s;
  std::vector<InteractionTask> m2l;
  std::vector<std::size_t> m2l_offsets;
  std::size_t p2p_tasks = 0;
};

DeviceResult device_walk(gpu::DeviceWalk& walk, const OrbTree& tree, const WalkSettings& st) {
  std::vector<WalkNode> host;
  walk_nodes_of(tree, st.top_levels, host);
  gpu::DeviceArray<WalkNode> nodes;
  nodes.ensure(host.size());
  ORBIS_CUDA_CHECK(cudaMemcpy(nodes.data(), host.data(), host.size() * sizeof(host[0]), cudaMemcpyHostToDevice));
  walk.run(nodes.data(), host.size(), tree.leaves().size(), st, nullptr);
  DeviceResult r;
  walk.download_p2p(r.p2p_t, r.p2p_s, nullptr);
  walk.download_m2l(r.m2l, r.m2l_offsets, nullptr);
  r.p2p_tasks = walk.p2p_tasks();
  return r;
}

struct Compared {
  std::size_t p2p_entries = 0, multi_image = 0, m2l = 0;
};

// Checks the device walk against the CPU walk on `tree`; what was compared.
Compared compare_with_cpu(const OrbTree& tree, const WalkSettings& st) {
  DualTreeWalk cpu;
  TaskLists lists;
  cpu.run(tree, st, lists, DualTreeWalk::P2POutput::kHalfSpans);
  std::vector<std::uint64_t> want;
  for (const TaskSpan& span : cpu.p2p_spans())
    for (std::size_t i = 0; i < span.size; ++i) {
      const InteractionTask& t = span.data[i];
      want.push_back(entry_key(t.target | ((t.flags & kMutualTask) ? kMutualBit : 0u), pack_source(t.source, t.image)));
    }

  gpu::DeviceWalk walk;
  const DeviceResult got = device_walk(walk, tree, st);
  std::vector<std::uint64_t> have;
  for (std::size_t i = 0; i < got.p2p_t.size(); ++i) have.push_back(entry_key(got.p2p_t[i], got.p2p_s[i]));
  std::sort(want.begin(), want.end());
  std::sort(have.begin(), have.end());
  CHECK(have.size() == want.size());
  CHECK(have == want);
  CHECK(got.p2p_tasks == cpu.p2p_count());

  // Leaf pairs with more than one image.
  Compared c;
  std::vector<std::uint64_t> leaf_pairs;
  for (std::size_t i = 0; i < got.p2p_t.size(); ++i)
    leaf_pairs.push_back(entry_key(got.p2p_t[i] & ~kMutualBit, packed_leaf(got.p2p_s[i])));
  std::sort(leaf_pairs.begin(), leaf_pairs.end());
  c.multi_image = leaf_pairs.size() - static_cast<std::size_t>(std::unique(leaf_pairs.begin(), leaf_pairs.end()) -
                                                               leaf_pairs.begin());
  c.p2p_entries = have.size();

  REQUIRE(got.m2l_offsets == cpu.m2l_offsets());
  REQUIRE(got.m2l.size() == lists.m2l.size());
  std::size_t mismatched = 0;
  for (std::size_t node = 0; node + 1 < got.m2l_offsets.size(); ++node) {
    auto a = std::vector<InteractionTask>(got.m2l.begin() + got.m2l_offsets[node],
                                          got.m2l.begin() + got.m2l_offsets[node + 1]);
    auto b = std::vector<InteractionTask>(lists.m2l.begin() + cpu.m2l_offsets()[node],
                                          lists.m2l.begin() + cpu.m2l_offsets()[node + 1]);
    auto less = [](const InteractionTask& x, const InteractionTask& y) { return m2l_key(x) < m2l_key(y); };
    std::sort(a.begin(), a.end(), less);
    std::sort(b.begin(), b.end(), less);
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a[i].target != node) ++mismatched;
      if (m2l_key(a[i]) != m2l_key(b[i])) ++mismatched;
    }
  }
  CHECK(mismatched == 0);
  c.m2l = got.m2l.size();
  MESSAGE("nodes " << tree.nodes().size() << ", P2P entries " << c.p2p_entries << " (" << got.p2p_tasks
                   << " tasks, " << c.multi_image << " extra images), M2L " << c.m2l << ", levels " << walk.levels()
                   << ", pairs " << walk.pairs_tested());
  return c;
}

}  // namespace

TEST_CASE("device walk equals the CPU walk: uniform points") {
  test::require_gpu_or_skip();
  const double box = 100;
  const int side = 40;
  OrbTree tree;
  tree.build(test::uniform_particles(static_cast<std::size_t>(side) * side * side, box, 11), 32);
  // No M2L here: a 32-particle leaf's radius is ~2.8 mean spacings, so the opening test
  // needs a separation beyond r_cut (6.6 spacings) at every level.
  const Compared c = compare_with_cpu(tree, run_settings(box, side));
  CHECK(c.p2p_entries > 0);
}

TEST_CASE("device walk equals the CPU walk: clustered set") {
  test::require_gpu_or_skip();
  const double box = 100;
  const int side = 48;
  OrbTree tree;
  tree.build(test::clustered_particles(side, box, 42), 32);
  const Compared c = compare_with_cpu(tree, run_settings(box, side));
  CHECK(c.p2p_entries > 0);
  CHECK(c.m2l > 0);
  // The walk from the pairs of depth-d nodes (top nodes only split): the same on both.
  WalkSettings top = run_settings(box, side);
  top.top_levels = top_levels_for(static_cast<std::int64_t>(tree.size()), 256, 32);
  REQUIRE(top.top_levels >= 6);
  const Compared t = compare_with_cpu(tree, top);
  CHECK(t.m2l > 0);
}

TEST_CASE("device walk equals the CPU walk: multi-image P2P in a small box") {
  test::require_gpu_or_skip();
  // r_cut = 0.45 L with leaves of ~L/4: the boxes of a leaf pair come within r_cut in
  // several images.
  const double box = 10;
  OrbTree tree;
  tree.build(test::uniform_particles(3000, box, 5), 32);
  for (double r : {0.45, 0.4}) {
    const Compared c = compare_with_cpu(tree, WalkSettings{box, r * box, 0.5});
    CHECK(c.multi_image > 0);
  }
}

TEST_CASE("device walk is deterministic") {
  test::require_gpu_or_skip();
  const double box = 100;
  const int side = 48;
  OrbTree tree;
  tree.build(test::clustered_particles(side, box, 7), 32);
  const WalkSettings st = run_settings(box, side);
  gpu::DeviceWalk walk;
  const DeviceResult a = device_walk(walk, tree, st);
  const DeviceResult b = device_walk(walk, tree, st);   // reused buffers
  gpu::DeviceWalk other;
  const DeviceResult c = device_walk(other, tree, st);   // fresh buffers
  gpu::DeviceWalk limited;   // the M2L sort on CUB's path beyond 2^31 items
  limited.set_max_cub_items(100);
  const DeviceResult d = device_walk(limited, tree, st);
  REQUIRE(a.m2l.size() > 100);
  for (const DeviceResult* r : {&b, &c, &d}) {
    CHECK(r->p2p_t == a.p2p_t);
    CHECK(r->p2p_s == a.p2p_s);
    CHECK(r->m2l_offsets == a.m2l_offsets);
    REQUIRE(r->m2l.size() == a.m2l.size());
    CHECK(std::equal(a.m2l.begin(), a.m2l.end(), r->m2l.begin(), [](const InteractionTask& x, const InteractionTask& y) {
      return m2l_key(x) == m2l_key(y);
    }));
  }
}

TEST_CASE("device walk: a launch beyond its 32-bit offsets stops with the parameters that lower it") {
  test::require_gpu_or_skip();
  const double box = 100;
  const int side = 32;
  OrbTree tree;
  tree.build(test::clustered_particles(side, box, 9), 32);
  gpu::DeviceWalk walk;
  walk.set_max_launch_outputs(50);   // an artificial limit: the real ones are 2^32 - 1 and 2^31 - 1
  std::string message;
  try {
    device_walk(walk, tree, run_settings(box, side));
  } catch (const Error& e) {
    message = e.what();
  }
  CAPTURE(message);
  CHECK(message.find("at most 50 entries or tasks and 50 pairs") != std::string::npos);
  CHECK(message.find("[gravity] max_leaf") != std::string::npos);
  CHECK(message.find("r_cut_over_rs") != std::string::npos);
}

namespace {

// Per target leaf, its P2P tasks (source word) in the order the grouping sees them: entries
// in array order, a mutual entry giving its reverse task right after it.
std::vector<std::vector<std::uint32_t>> p2p_by_target(const DeviceResult& r, std::size_t n_leaves) {
  std::vector<std::vector<std::uint32_t>> out(n_leaves);
  for (std::size_t e = 0; e < r.p2p_t.size(); ++e) {
    const std::uint32_t t = r.p2p_t[e] & ~kMutualBit, w = r.p2p_s[e];
    out[t].push_back(w);
    if (r.p2p_t[e] & kMutualBit) {
      const std::int8_t back[3] = {static_cast<std::int8_t>(-packed_image(w, 0)),
                                   static_cast<std::int8_t>(-packed_image(w, 1)),
                                   static_cast<std::int8_t>(-packed_image(w, 2))};
      out[packed_leaf(w)].push_back(pack_source(t, back));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("device walk with active nodes: every active target keeps the full walk's tasks, in order") {
  test::require_gpu_or_skip();
  const double box = 100;
  const int side = 48;
  OrbTree tree;
  tree.build(test::clustered_particles(side, box, 9), 32);
  const WalkSettings st = run_settings(box, side);
  const auto& nodes = tree.nodes();
  // A fifth of the leaves active (a fixed pseudo-random pick); a node is active when a leaf
  // below it is (deepest level first).
  std::vector<std::uint8_t> active(nodes.size(), 0);
  std::size_t n_active_leaves = 0;
  for (std::size_t k = 0; k < nodes.size(); ++k)
    if (nodes[k].is_leaf() && (static_cast<std::uint64_t>(nodes[k].leaf) * 2654435761u) % 5 == 0) {
      active[k] = 1;
      ++n_active_leaves;
    }
  for (std::size_t lev = tree.levels().size(); lev-- > 0;)
    for (const std::int32_t k : tree.levels()[lev])
      if (!nodes[k].is_leaf()) active[k] = active[nodes[k].left] | active[nodes[k].right];

  gpu::DeviceWalk walk;
  const DeviceResult full = device_walk(walk, tree, st);
  std::vector<WalkNode> host;
  walk_nodes_of(tree, st.top_levels, host);
  gpu::DeviceArray<WalkNode> dnodes;
  dnodes.ensure(host.size());
  ORBIS_CUDA_CHECK(cudaMemcpy(dnodes.data(), host.data(), host.size() * sizeof(host[0]), cudaMemcpyHostToDevice));
  gpu::DeviceArray<std::uint8_t> dactive;
  dactive.ensure(active.size());
  ORBIS_CUDA_CHECK(cudaMemcpy(dactive.data(), active.data(), active.size(), cudaMemcpyHostToDevice));
  gpu::DeviceWalk part_walk;
  part_walk.run(dnodes.data(), host.size(), tree.leaves().size(), st, nullptr, dactive.data());
  DeviceResult part;
  part_walk.download_p2p(part.p2p_t, part.p2p_s, nullptr);
  part_walk.download_m2l(part.m2l, part.m2l_offsets, nullptr);

  const auto a = p2p_by_target(full, tree.leaves().size());
  const auto b = p2p_by_target(part, tree.leaves().size());
  std::size_t compared = 0, differ = 0;
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    if (!active[k]) continue;
    if (nodes[k].is_leaf()) {
      ++compared;
      differ += a[static_cast<std::size_t>(nodes[k].leaf)] != b[static_cast<std::size_t>(nodes[k].leaf)];
    }
    const auto fa = full.m2l_offsets[k], fb = full.m2l_offsets[k + 1];
    const auto pa = part.m2l_offsets[k], pb = part.m2l_offsets[k + 1];
    bool same = fb - fa == pb - pa;
    for (std::size_t q = 0; same && q < fb - fa; ++q) same = m2l_key(full.m2l[fa + q]) == m2l_key(part.m2l[pa + q]);
    differ += !same;
  }
  MESSAGE("active leaves " << n_active_leaves << " of " << tree.leaves().size() << "; P2P entries " << part.p2p_t.size()
                           << " of " << full.p2p_t.size() << ", M2L " << part.m2l.size() << " of " << full.m2l.size()
                           << "; launches " << part_walk.levels() << ", reruns " << part_walk.reruns());
  CHECK(compared == n_active_leaves);
  CHECK(differ == 0);
  CHECK(part.p2p_t.size() < full.p2p_t.size());
}

namespace {
// Vacuum walk with leaf-cell pairs: the device's P2L and M2P lists (grouped by target, walk
// order) against the CPU's (grouped by target, by source): the same offsets and, per target,
// the same tasks as sets. Returns the leaf-cell pairs.
std::size_t compare_leaf_cell(const OrbTree& tree, const WalkSettings& st) {
  DualTreeWalk cpu;
  TaskLists lists;
  cpu.run(tree, st, lists, DualTreeWalk::P2POutput::kHalfSpans);
  gpu::DeviceWalk walk;
  device_walk(walk, tree, st);
  std::vector<InteractionTask> p2l, m2p;
  std::vector<std::size_t> p2l_offsets, m2p_offsets;
  walk.download_leaf_cell(p2l, p2l_offsets, m2p, m2p_offsets, nullptr);
  REQUIRE(walk.leaf_cell_count() == lists.p2l.size());
  REQUIRE(lists.m2p.size() == lists.p2l.size());
  if (lists.p2l.empty()) return 0;
  CHECK(p2l_offsets == cpu.p2l_offsets());
  CHECK(m2p_offsets == cpu.m2p_offsets());
  std::size_t mismatched = 0;
  const auto less = [](const InteractionTask& x, const InteractionTask& y) { return m2l_key(x) < m2l_key(y); };
  const auto same_sets = [&](const std::vector<InteractionTask>& got, const std::vector<std::size_t>& goff,
                             const std::vector<InteractionTask>& want, const std::vector<std::size_t>& woff) {
    for (std::size_t t = 0; t + 1 < goff.size() && t + 1 < woff.size(); ++t) {
      std::vector<InteractionTask> a(got.begin() + goff[t], got.begin() + goff[t + 1]);
      std::vector<InteractionTask> b(want.begin() + woff[t], want.begin() + woff[t + 1]);
      std::sort(a.begin(), a.end(), less);
      std::sort(b.begin(), b.end(), less);
      if (a.size() != b.size()) {
        ++mismatched;
        continue;
      }
      for (std::size_t i = 0; i < a.size(); ++i) mismatched += m2l_key(a[i]) != m2l_key(b[i]) || a[i].target != t;
    }
  };
  same_sets(p2l, p2l_offsets, lists.p2l, cpu.p2l_offsets());
  same_sets(m2p, m2p_offsets, lists.m2p, cpu.m2p_offsets());
  CHECK(mismatched == 0);
  // The rest of the walk as before (P2P entries, M2L per target).
  compare_with_cpu(tree, st);
  MESSAGE("vacuum: leaf-cell pairs " << lists.p2l.size() << ", M2L " << lists.m2l.size());
  return lists.p2l.size();
}
}  // namespace

TEST_CASE("device walk equals the CPU walk: vacuum boundaries with leaf-cell pairs (P2L/M2P)") {
  test::require_gpu_or_skip();
  // A Plummer-like clustered set far off the origin: no images, the opening angle alone.
  std::vector<Vec3d> pos = test::clustered_particles(40, 10.0, 3);
  for (Vec3d& x : pos) x += Vec3d{-30.0, 5.0, 0.5};
  OrbTree tree;
  tree.build(pos, 32);
  WalkSettings ws{0.0, 0.0, 0.5, 0};
  ws.periodic = false;
  CHECK(compare_leaf_cell(tree, ws) > 0);
  ws.leaf_cell = false;   // the walk of phase A: none on either side
  CHECK(compare_leaf_cell(tree, ws) == 0);
  ws.leaf_cell = true;
  ws.theta = 0.7;
  CHECK(compare_leaf_cell(tree, ws) > 0);
}
