// The device far field (gpu/fmm_cuda) against the host operators on the same tree and the
// same M2L task sets: multipoles (P2M + M2M) against Multipoles::compute, and the far-field
// accelerations (M2L, L2L, L2P) against FmmOperators applied node by node as the host
// short-range solver does, with the default M2L chunks and with every node's tasks in chunks.
// Returns 77 without a usable GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "fmm/expansions.hpp"
#include "fmm/walk.hpp"
#include "gpu/device_buffer.cuh"
#include "gpu/fmm_cuda.cuh"
#include "gpu/orb_tree_cuda.cuh"
#include "gpu/walk_cuda.cuh"
#include "support/clustered_particles.hpp"
#include "support/gpu_skip.hpp"
#include "tree/multipoles.hpp"
#include "tree/orb_tree.hpp"

using namespace orbis;

namespace {

// The host far field of fmm/short_range.cpp: M2L per target in list order, L2L top down,
// L2P at every particle of a leaf with an expansion (tree order), times g_mass.
std::vector<Vec3d> host_far_field(const OrbTree& tree, const Multipoles& mp, const TaskLists& lists,
                                  const std::vector<std::size_t>& offsets, int p, double r_s, double box,
                                  double g_mass) {
  const FmmOperators ops(p, r_s);
  FmmOperators::Scratch scratch(ops);
  const auto& nodes = tree.nodes();
  const int nl = ops.local_size();
  std::vector<double> local(nodes.size() * nl, 0.0);
  std::vector<char> active(nodes.size(), 0);
  for (std::size_t t = 0; t < nodes.size(); ++t)
    for (std::size_t q = offsets[t]; q < offsets[t + 1]; ++q) {
      const InteractionTask& task = lists.m2l[q];
      const Vec3d shift{task.image[0] * box, task.image[1] * box, task.image[2] * box};
      ops.m2l(mp.of(static_cast<int>(task.source)), (nodes[t].centre - nodes[task.source].centre) - shift,
              local.data() + t * nl, scratch);
      active[t] = 1;
    }
  for (std::size_t lev = 1; lev < tree.levels().size(); ++lev)
    for (const std::int32_t c : tree.levels()[lev]) {
      const auto parent = static_cast<std::size_t>(nodes[c].parent);
      if (!active[parent]) continue;
      ops.l2l(local.data() + parent * nl, nodes[c].centre - nodes[parent].centre, local.data() + c * nl);
      active[c] = 1;
    }
  std::vector<Vec3d> far(tree.size());
  for (const std::int32_t n : tree.leaf_node())
    for (std::uint32_t t = nodes[n].first; t < nodes[n].first + nodes[n].count; ++t)
      far[t] = active[n] ? g_mass * ops.l2p(local.data() + n * nl, tree.positions()[t] - nodes[n].centre) : Vec3d{};
  return far;
}

}  // namespace

TEST_CASE("device multipoles and far field equal the host operators") {
  test::require_gpu_or_skip();
  const double box = 100;
  const int side = 40;
  const std::vector<Vec3d> pos = test::clustered_particles(side, box, 17);
  const std::size_t n = pos.size();
  const double r_s = 1.2 * box / side, g_mass = 43.0071;
  const WalkSettings ws{box, 5.5 * r_s, 0.5};

  OrbTree tree;
  tree.build(pos, 32);
  DualTreeWalk cpu_walk;
  TaskLists lists;
  cpu_walk.run(tree, ws, lists, DualTreeWalk::P2POutput::kHalfSpans);
  REQUIRE(!lists.m2l.empty());

  // The device tree of the same positions is the host tree bit for bit (test_orb_tree_cuda).
  std::vector<double> soa(3 * n);
  for (std::size_t i = 0; i < n; ++i)
    for (int d = 0; d < 3; ++d) soa[d * n + i] = pos[i][d];
  gpu::DeviceArray<double> dpos;
  dpos.ensure(3 * n);
  ORBIS_CUDA_CHECK(cudaMemcpy(dpos.data(), soa.data(), 3 * n * sizeof(double), cudaMemcpyHostToDevice));
  gpu::DeviceOrbTree dtree;
  dtree.build(dpos.data(), dpos.data() + n, dpos.data() + 2 * n, n, 32, 1.0, nullptr);
  gpu::DeviceArray<WalkNode> wnodes;
  wnodes.ensure(dtree.n_nodes());
  dtree.walk_nodes(wnodes.data(), ws.top_levels, nullptr);
  gpu::DeviceWalk dwalk;
  dwalk.run(wnodes.data(), dtree.n_nodes(), dtree.n_leaves(), ws, nullptr);
  REQUIRE(dwalk.m2l_count() == lists.m2l.size());

  const gpu::FmmTreeView view = gpu::fmm_tree_view(dtree);

  for (int p : {1, 2, 3, 4, 5, 6}) {   // every order: the per-thread operators are a template each
    CAPTURE(p);
    gpu::DeviceFmm fmm(p, r_s);
    gpu::DeviceArray<double> acc;
    acc.ensure(3 * n);
    ORBIS_CUDA_CHECK(cudaMemset(acc.data(), 0, 3 * n * sizeof(double)));
    fmm.compute(view, dwalk.m2l_tasks(), dwalk.m2l_offsets(), dwalk.m2l_count(), box, g_mass, acc.data(), nullptr);
    ORBIS_CUDA_CHECK(cudaDeviceSynchronize());

    Multipoles mp;
    mp.compute(tree, p);
    const int nm = fmm.multipole_size();
    const std::vector<double> dm = fmm.node_multipoles(tree.nodes().size());
    // The nodes whose moments the far field needs: M2L sources and their subtrees (a box's
    // few M2L tasks are flagged; an isolated system's many make every node's moments).
    REQUIRE(!gpu::DeviceFmm::every_node_wanted(lists.m2l.size(), tree.nodes().size()));
    CHECK(fmm.compact());   // then only the flagged nodes' expansions are kept: the bits below read those
    std::vector<std::uint8_t> wanted(tree.nodes().size()), expected(tree.nodes().size(), 0);
    ORBIS_CUDA_CHECK(cudaMemcpy(wanted.data(), fmm.wanted(), wanted.size(), cudaMemcpyDeviceToHost));
    for (const InteractionTask& task : lists.m2l) expected[task.source] = 1;
    for (const auto& level : tree.levels())
      for (const std::int32_t k : level)
        if (tree.nodes()[k].parent >= 0 && expected[tree.nodes()[k].parent]) expected[k] = 1;
    CHECK(wanted == expected);
    std::size_t bitwise = 0, compared = 0;
    double worst = 0;
    const MultiIndexSet set(p);
    for (std::size_t k = 0; k < tree.nodes().size(); ++k) {
      if (!expected[k]) continue;
      ++compared;
      const TreeNode& node = tree.nodes()[k];
      for (int i = 0; i < nm; ++i) {
        const double h = mp.of(static_cast<int>(k))[i], d = dm[k * nm + i];
        bitwise += h == d;
        // Scale of the moment: count * radius^|n| (what the expansion multiplies).
        const double scale = node.count * std::pow(std::max(node.radius, 1e-12), set.degree(i)) + 1e-300;
        worst = std::max(worst, std::fabs(h - d) / scale);
      }
    }
    MESSAGE("p = " << p << ": multipoles of " << compared << " of " << tree.nodes().size() << " nodes; bitwise equal "
                   << bitwise << " of " << compared * nm << ", worst |diff|/scale " << worst);
    CHECK(compared > 0);
    CHECK(worst < 1e-13);

    const std::vector<Vec3d> ref = host_far_field(tree, mp, lists, cpu_walk.m2l_offsets(), p, r_s, box, g_mass);
    // The default chunks (16 tasks), then chunks of one task (every node with two M2L tasks
    // or more in chunks: the path of a node with thousands).
    for (const std::uint64_t min_chunk : {std::uint64_t{0}, std::uint64_t{1}}) {
      CAPTURE(min_chunk);
      if (min_chunk > 0) {
        fmm.set_min_chunk_tasks(min_chunk);
        ORBIS_CUDA_CHECK(cudaMemset(acc.data(), 0, 3 * n * sizeof(double)));
        fmm.compute(view, dwalk.m2l_tasks(), dwalk.m2l_offsets(), dwalk.m2l_count(), box, g_mass, acc.data(),
                    nullptr);
        ORBIS_CUDA_CHECK(cudaDeviceSynchronize());
        CHECK(fmm.last_chunk_counts().m2l > 0);
      }
      std::vector<double> dacc(3 * n);
      ORBIS_CUDA_CHECK(cudaMemcpy(dacc.data(), acc.data(), 3 * n * sizeof(double), cudaMemcpyDeviceToHost));
      double rms = 0, diff = 0;
      std::size_t with_far = 0;
      for (std::size_t t = 0; t < n; ++t) {
        const Vec3d d{dacc[3 * t], dacc[3 * t + 1], dacc[3 * t + 2]};
        rms += norm2(ref[t]);
        diff = std::max(diff, std::sqrt(norm2(d - ref[t])));
        with_far += norm2(ref[t]) > 0;
      }
      rms = std::sqrt(rms / static_cast<double>(n));
      MESSAGE("p = " << p << ", min chunk " << min_chunk << ": far field at " << with_far << " of " << n
                     << " particles, max |device - host| / rms " << diff / rms);
      CHECK(with_far > 0);
      CHECK(diff / rms < 1e-11);
    }
  }
}
