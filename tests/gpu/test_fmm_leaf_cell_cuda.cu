// The device far field with the vacuum walk's leaf-cell pairs (gpu/fmm_cuda: M2L, P2L, L2L,
// L2P, M2P) on Plummer spheres, every target done whole and with its tasks in chunks (the
// path of an isolated system's core, which receives ~1e4 leaves: DeviceFmm's chunk hook
// makes a few thousand particles take it), against
//   - the host operators (FmmOperators m2l, p2l, l2l, l2p, m2p, applied task by task as the
//     host solver does, in double): another code in another summation order, whose M2L, P2L
//     and M2P are in float (as the P2P's pairs), so they agree to float rounding (kFloatPairs);
//     one task lost or counted twice moves the busiest targets' forces by 1e-4 .. 1e-2 of
//     their size (measured on the host by dropping one);
//   - the exact direct sum: the far field plus the walk's P2P pairs summed exactly (double,
//     unsoftened) against every pair summed exactly, which leaves the expansions' truncation;
//   - itself: the chunked and the whole sums agree to float rounding (the pairs sum in float
//     within a chunk), and each is bitwise the same run after run;
// and with individual masses (weights m_i / m: P2M and P2L weigh their particles) on a halo
// and bulge of masses 10:1, against the same host operators on weighted multipoles and P2L,
// and against the weighted direct sum; weights of exactly 1 give the unweighted bits.
// Returns 77 without a usable GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "fmm/expansions.hpp"
#include "fmm/walk.hpp"
#include "gpu/device_buffer.cuh"
#include "gpu/fmm_cuda.cuh"
#include "gpu/orb_tree_cuda.cuh"
#include "gpu/walk_cuda.cuh"
#include "support/gpu_skip.hpp"
#include "support/vacuum_scenes.hpp"
#include "tree/multi_index.hpp"
#include "tree/multipoles.hpp"
#include "tree/orb_tree.hpp"

using namespace orbis;

namespace {

// The host far field of the vacuum solver (fmm/short_range.cpp) with the generic operators:
// per target node its M2L tasks, then its P2L leaves' particles; L2L top down; per leaf L2P
// plus the M2P of its source nodes; times g_mass. Tree order. moments(k): node k's multipoles;
// w: each particle's weight (tree order; individual masses), null: all 1.
template <typename Moments>
std::vector<Vec3d> host_far_field(const OrbTree& tree, const Moments& moments, const TaskLists& lists,
                                  const DualTreeWalk& walk, int p, double g_mass,
                                  const std::vector<double>* w = nullptr) {
  const FmmOperators ops(p, 0.0, KernelKind::newtonian);
  FmmOperators::Scratch scratch(ops);
  std::vector<double> unit(static_cast<std::size_t>(ops.local_size()));
  const auto& nodes = tree.nodes();
  const auto& pos = tree.positions();
  const int nl = ops.local_size();
  std::vector<double> local(nodes.size() * nl, 0.0);
  std::vector<char> active(nodes.size(), 0);
  const auto& m2l = walk.m2l_offsets();
  const auto& p2l = walk.p2l_offsets();
  const auto& m2p = walk.m2p_offsets();
  for (std::size_t t = 0; t < nodes.size(); ++t) {
    double* lt = local.data() + t * nl;
    for (std::size_t q = m2l[t]; q < m2l[t + 1]; ++q) {
      const auto s = lists.m2l[q].source;
      ops.m2l(moments(s), nodes[t].centre - nodes[s].centre, lt, scratch);
      active[t] = 1;
    }
    for (std::size_t q = p2l[t]; q < p2l[t + 1]; ++q) {
      const Leaf& leaf = tree.leaves()[lists.p2l[q].source];
      for (std::uint32_t j = leaf.first; j < leaf.first + leaf.count; ++j) {
        if (!w) {
          ops.p2l(nodes[t].centre - pos[j], lt, scratch);
          continue;
        }
        std::fill(unit.begin(), unit.end(), 0.0);   // a unit mass's D_k, then times the weight
        ops.p2l(nodes[t].centre - pos[j], unit.data(), scratch);
        for (int k = 0; k < nl; ++k) lt[k] += (*w)[j] * unit[static_cast<std::size_t>(k)];
      }
      active[t] = 1;
    }
  }
  for (std::size_t lev = 1; lev < tree.levels().size(); ++lev)
    for (const std::int32_t c : tree.levels()[lev]) {
      const auto parent = static_cast<std::size_t>(nodes[c].parent);
      if (!active[parent]) continue;
      ops.l2l(local.data() + parent * nl, nodes[c].centre - nodes[parent].centre, local.data() + c * nl);
      active[c] = 1;
    }
  std::vector<Vec3d> far(tree.size());
  const auto& leaf_node = tree.leaf_node();
  for (std::size_t l = 0; l < leaf_node.size(); ++l) {
    const auto n = static_cast<std::size_t>(leaf_node[l]);
    for (std::uint32_t t = nodes[n].first; t < nodes[n].first + nodes[n].count; ++t) {
      Vec3d g = active[n] ? ops.l2p(local.data() + n * nl, pos[t] - nodes[n].centre) : Vec3d{};
      for (std::size_t q = m2p[l]; q < m2p[l + 1]; ++q) {
        const auto c = lists.m2p[q].source;
        g += ops.m2p(moments(c), pos[t] - nodes[c].centre, scratch);
      }
      far[t] = g_mass * g;
    }
  }
  return far;
}

std::vector<Vec3d> host_far_field(const OrbTree& tree, const Multipoles& mp, const TaskLists& lists,
                                  const DualTreeWalk& walk, int p, double g_mass) {
  return host_far_field(tree, [&mp](std::size_t k) { return mp.of(static_cast<int>(k)); }, lists, walk, p, g_mass);
}

// Each node's multipoles about its centre with weighted particles (w: tree order), by
// tree/multipoles.cpp's P2M (each monomial times its particle's weight, the product rounded
// before the sum, as the device's) and M2M, for every node; node k's at [k nc, (k + 1) nc).
std::vector<double> weighted_multipoles(const OrbTree& tree, int p, const std::vector<double>& w) {
  const MultiIndexSet set(p);
  const auto nc = static_cast<std::size_t>(set.size());
  const std::vector<ShiftTerm> shift = shift_terms(set);
  const auto& nodes = tree.nodes();
  const auto& pos = tree.positions();
  std::vector<double> m(nodes.size() * nc, 0.0), mono(nc);
  for (const std::int32_t k : tree.leaf_node()) {
    const TreeNode& node = nodes[static_cast<std::size_t>(k)];
    double* mk = m.data() + static_cast<std::size_t>(k) * nc;
    for (std::uint32_t t = node.first; t < node.first + node.count; ++t) {
      const Vec3d s = pos[t] - node.centre;
      scaled_monomials(set, s.x, s.y, s.z, mono.data());
      for (std::size_t i = 0; i < nc; ++i) {
        const volatile double term = w[t] * mono[i];   // rounded: no FMA into the sum
        mk[i] += term;
      }
    }
  }
  for (std::size_t lev = tree.levels().size(); lev-- > 0;)
    for (const std::int32_t k : tree.levels()[lev]) {
      const TreeNode& node = nodes[static_cast<std::size_t>(k)];
      if (node.is_leaf()) continue;
      double* mk = m.data() + static_cast<std::size_t>(k) * nc;
      for (const int child : {node.left, node.right}) {
        const TreeNode& c = nodes[static_cast<std::size_t>(child)];
        const Vec3d d = c.centre - node.centre;
        scaled_monomials(set, d.x, d.y, d.z, mono.data());
        const double* mc = m.data() + static_cast<std::size_t>(child) * nc;
        for (const ShiftTerm& t : shift) mk[t.n] += mc[t.k] * mono[static_cast<std::size_t>(t.diff)];
      }
    }
  return m;
}

// The walk's P2P pairs (lists.p2p grouped by target leaf, each direction its own task)
// summed exactly: g_mass sum_j (x_j - x_i) / r^3 (times w_j with weights, tree order), j != i.
// Tree order.
std::vector<Vec3d> exact_near_field(const OrbTree& tree, const TaskLists& lists, const DualTreeWalk& walk,
                                    double g_mass, const std::vector<double>* w = nullptr) {
  const auto& pos = tree.positions();
  const auto& offsets = walk.p2p_offsets();
  std::vector<Vec3d> near(tree.size());
  for (std::size_t t = 0; t + 1 < offsets.size(); ++t) {
    const Leaf& lt = tree.leaves()[t];
    for (std::size_t q = offsets[t]; q < offsets[t + 1]; ++q) {
      const Leaf& ls = tree.leaves()[lists.p2p[q].source];
      for (std::uint32_t i = lt.first; i < lt.first + lt.count; ++i)
        for (std::uint32_t j = ls.first; j < ls.first + ls.count; ++j) {
          if (i == j) continue;
          const Vec3d d = pos[j] - pos[i];
          const double r2 = norm2(d);
          near[i] += (g_mass * (w ? (*w)[j] : 1.0) / (r2 * std::sqrt(r2))) * d;
        }
    }
  }
  return near;
}

struct Scene {
  std::size_t n;
  int max_leaf;
  // Bars on |far + near - exact| / |exact| (99th percentile, max): the host operators'
  // errors on this scene (measured: 7.7e-6 and 3.8e-5 at 4000/32; 1.2e-4 and 9.6e-4 at
  // 8000/8, whose leaves of 8 give more M2L at the opening-angle limit), with room; the
  // device's far field is the host's to float rounding (kFloatPairs).
  double bar99, bar_max;
};

// The device's M2L, P2L and M2P are in float: its far field differs from the host operators' and
// its chunked sums from its whole ones by up to ~7e-7 of the rms force (measured); a task lost
// or counted twice moves the busiest targets by 1e-4 or more.
constexpr double kFloatPairs = 5e-6;

}  // namespace

TEST_CASE("device far field with leaf-cell pairs (P2L, M2P), whole and in chunks, against the host operators and "
          "the direct sum") {
  test::require_gpu_or_skip();
  const int p = 6;
  const double theta = 0.5;
  // 4000 particles in leaves of 32: its busiest node receives 64 leaves (2048 particles),
  // 8 nodes more than the default chunk of 16 tasks; 8000 in leaves of 8: 1024 leaves, 555
  // nodes and 579 leaves above it, so the default chunks run too.
  for (const Scene& sc : {Scene{4000, 32, 2e-5, 1e-4}, Scene{8000, 8, 3e-4, 2e-3}}) {
    CAPTURE(sc.n);
    CAPTURE(sc.max_leaf);
    const test::VacuumScene scene = test::plummer_scene(sc.n, 3);
    const std::size_t n = scene.pos.size();
    const double g_mass = scene.particle_mass;
    WalkSettings ws{0.0, 0.0, theta, 0};
    ws.periodic = false;
    REQUIRE(ws.leaf_cell);

    OrbTree tree;
    tree.build(scene.pos, sc.max_leaf);
    DualTreeWalk cpu_walk;
    TaskLists lists;
    cpu_walk.run(tree, ws, lists, DualTreeWalk::P2POutput::kGrouped);
    REQUIRE(!lists.p2l.empty());
    std::size_t busiest = 0;
    for (std::size_t t = 0; t + 1 < cpu_walk.p2l_offsets().size(); ++t)
      busiest = std::max(busiest, cpu_walk.p2l_offsets()[t + 1] - cpu_walk.p2l_offsets()[t]);
    MESSAGE("N " << n << ", max_leaf " << sc.max_leaf << ": M2L " << lists.m2l.size() << ", leaf-cell pairs "
                 << lists.p2l.size() << ", the busiest node's P2L tasks " << busiest);

    // The device tree of the same positions is the host tree bit for bit (test_orb_tree_cuda),
    // and the device walk's lists are the host's as sets (test_walk_cuda).
    std::vector<double> soa(3 * n);
    for (std::size_t i = 0; i < n; ++i)
      for (int d = 0; d < 3; ++d) soa[d * n + i] = scene.pos[i][d];
    gpu::DeviceArray<double> dpos;
    dpos.ensure(3 * n);
    ORBIS_CUDA_CHECK(cudaMemcpy(dpos.data(), soa.data(), 3 * n * sizeof(double), cudaMemcpyHostToDevice));
    gpu::DeviceOrbTree dtree;
    dtree.build(dpos.data(), dpos.data() + n, dpos.data() + 2 * n, n, sc.max_leaf, 1.0, nullptr);
    REQUIRE(dtree.n_nodes() == tree.nodes().size());
    gpu::DeviceArray<WalkNode> wnodes;
    wnodes.ensure(dtree.n_nodes());
    dtree.walk_nodes(wnodes.data(), ws.top_levels, nullptr);
    gpu::DeviceWalk dwalk;
    dwalk.run(wnodes.data(), dtree.n_nodes(), dtree.n_leaves(), ws, nullptr);
    REQUIRE(dwalk.m2l_count() == lists.m2l.size());
    REQUIRE(dwalk.leaf_cell_count() == lists.p2l.size());
    gpu::LeafCellLists leaf_cell;
    leaf_cell.p2l = dwalk.p2l_tasks();
    leaf_cell.p2l_offsets = dwalk.p2l_offsets();
    leaf_cell.m2p = dwalk.m2p_tasks();
    leaf_cell.m2p_offsets = dwalk.m2p_offsets();
    leaf_cell.count = dwalk.leaf_cell_count();
    const gpu::FmmTreeView view = gpu::fmm_tree_view(dtree);

    Multipoles mp;
    mp.compute(tree, p);
    const std::vector<Vec3d> ref = host_far_field(tree, mp, lists, cpu_walk, p, g_mass);
    double rms = 0;
    for (const Vec3d& a : ref) rms += norm2(a);
    rms = std::sqrt(rms / static_cast<double>(n));
    const std::vector<Vec3d> near = exact_near_field(tree, lists, cpu_walk, g_mass);
    std::vector<std::size_t> all(n);
    for (std::size_t i = 0; i < n; ++i) all[i] = i;
    const std::vector<Vec3d> exact = test::direct_newtonian(tree.positions(), all, g_mass, 0.0);

    gpu::DeviceFmm fmm(p, 0.0, KernelKind::newtonian);
    gpu::DeviceArray<double> acc;
    acc.ensure(3 * n);
    const auto far_field = [&](std::uint64_t min_chunk) {
      fmm.set_min_chunk_tasks(min_chunk);
      ORBIS_CUDA_CHECK(cudaMemset(acc.data(), 0, 3 * n * sizeof(double)));
      fmm.compute(view, dwalk.m2l_tasks(), dwalk.m2l_offsets(), dwalk.m2l_count(), 0.0, g_mass, acc.data(), nullptr,
                  leaf_cell);
      ORBIS_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<double> out(3 * n);
      ORBIS_CUDA_CHECK(cudaMemcpy(out.data(), acc.data(), 3 * n * sizeof(double), cudaMemcpyDeviceToHost));
      return out;
    };
    const auto max_diff = [&](const std::vector<double>& a, const std::vector<double>& b) {
      double worst = 0;
      for (std::size_t i = 0; i < 3 * n; ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
      return worst / rms;
    };

    // Whole (no target has more than 2^40 tasks), the default chunks (16 tasks), chunks of 3
    // (a chunk boundary inside most lists) and of 1 (every task of a target with two or more).
    const std::vector<double> whole = far_field(std::uint64_t{1} << 40);
    const gpu::DeviceFmm::ChunkCounts none = fmm.last_chunk_counts();
    CHECK(none.m2l == 0);
    CHECK(none.p2l == 0);
    CHECK(none.m2p == 0);
    for (const std::uint64_t min_chunk : {std::uint64_t{1} << 40, std::uint64_t{0}, std::uint64_t{3}, std::uint64_t{1}}) {
      CAPTURE(min_chunk);
      const std::vector<double> got = far_field(min_chunk);
      const gpu::DeviceFmm::ChunkCounts chunks = fmm.last_chunk_counts();
      const std::vector<double> again = far_field(min_chunk);
      CHECK(std::memcmp(got.data(), again.data(), got.size() * sizeof(double)) == 0);   // bitwise, run after run
      if (min_chunk <= 3) {   // the default's 16 split the busiest targets of both scenes
        CHECK(chunks.p2l > 0);
        CHECK(chunks.m2p > 0);
      }
      if (min_chunk == 1) CHECK(chunks.m2l > 0);   // 12 and 1462 nodes have two M2L tasks or more
      // Against the whole sums: the same terms in another order.
      const double vs_whole = max_diff(got, whole);
      // Against the host operators.
      double vs_host = 0;
      std::vector<double> e;
      for (std::size_t i = 0; i < n; ++i) {
        const Vec3d g{got[3 * i], got[3 * i + 1], got[3 * i + 2]};
        vs_host = std::max(vs_host, norm(g - ref[i]) / rms);
        e.push_back(norm(g + near[i] - exact[i]) / norm(exact[i]));
      }
      std::sort(e.begin(), e.end());
      const double e99 = e[static_cast<std::size_t>(0.99 * static_cast<double>(n - 1))], emax = e.back();
      std::printf("N %zu, max_leaf %d, min chunk %llu: chunks M2L %u, P2L %u, M2P %u; max |diff| / rms vs whole "
                  "%.2e, vs host %.2e; vs exact median %.2e, 99%% %.2e, max %.2e\n",
                  n, sc.max_leaf, static_cast<unsigned long long>(min_chunk), chunks.m2l, chunks.p2l, chunks.m2p,
                  vs_whole, vs_host, e[n / 2], e99, emax);
      CHECK(vs_whole < kFloatPairs);
      CHECK(vs_host < kFloatPairs);
      CHECK(e99 < sc.bar99);
      CHECK(emax < sc.bar_max);
    }
  }
}

TEST_CASE("device far field with individual masses (weighted P2M and P2L): the host operators' weighted sums, the "
          "weighted direct sum, and weights of 1 = no weights bitwise") {
  test::require_gpu_or_skip();
  const int p = 6;
  const double theta = 0.5;
  // A Hernquist halo and a Plummer bulge ten times lighter a particle, whose centres differ:
  // nodes of both kinds of particles, whose count centres (the expansion centres) are not
  // their centres of mass, so the weighted moments' dipoles matter.
  // Bars: the host operators' errors on these scenes with the weights (measured: 99% 1.0e-5,
  // max 2.1e-4 at 6000/32; 4.8e-4 and 3.4e-3 at 8000/8, whose leaves of 8 give 9e4 M2L
  // tasks), with room; the device's far field is the host's to float rounding (kFloatPairs).
  for (const Scene& sc : {Scene{6000, 32, 3e-5, 6e-4}, Scene{8000, 8, 1.5e-3, 1e-2}}) {
    CAPTURE(sc.n);
    CAPTURE(sc.max_leaf);
    const test::VacuumScene scene = test::halo_bulge_scene(sc.n, 9);
    const std::size_t n = scene.pos.size();
    const double g_mass = scene.particle_mass;   // G = 1, the mean mass: G m_i = g_mass w_i
    WalkSettings ws{0.0, 0.0, theta, 0};
    ws.periodic = false;
    REQUIRE(ws.leaf_cell);

    OrbTree tree;
    tree.build(scene.pos, sc.max_leaf);
    DualTreeWalk cpu_walk;
    TaskLists lists;
    cpu_walk.run(tree, ws, lists, DualTreeWalk::P2POutput::kGrouped);
    REQUIRE(!lists.p2l.empty());
    REQUIRE(!lists.m2l.empty());
    std::vector<double> m_tree(n), w_tree(n);   // masses and weights in tree order
    for (std::size_t t = 0; t < n; ++t) {
      m_tree[t] = scene.masses[tree.order()[t]];
      w_tree[t] = m_tree[t] / g_mass;
    }

    std::vector<double> soa(3 * n);
    for (std::size_t i = 0; i < n; ++i)
      for (int d = 0; d < 3; ++d) soa[d * n + i] = scene.pos[i][d];
    gpu::DeviceArray<double> dpos, dw, dones;
    dpos.ensure(3 * n);
    ORBIS_CUDA_CHECK(cudaMemcpy(dpos.data(), soa.data(), 3 * n * sizeof(double), cudaMemcpyHostToDevice));
    gpu::DeviceOrbTree dtree;
    dtree.build(dpos.data(), dpos.data() + n, dpos.data() + 2 * n, n, sc.max_leaf, 1.0, nullptr);
    REQUIRE(dtree.n_nodes() == tree.nodes().size());
    // The device tree is the host's bit for bit (test_orb_tree_cuda): the same tree order.
    std::vector<std::uint32_t> dorder(n);
    ORBIS_CUDA_CHECK(cudaMemcpy(dorder.data(), dtree.order(), n * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
    REQUIRE(dorder == tree.order());
    dw.ensure(n);
    ORBIS_CUDA_CHECK(cudaMemcpy(dw.data(), w_tree.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    const std::vector<double> ones(n, 1.0);
    dones.ensure(n);
    ORBIS_CUDA_CHECK(cudaMemcpy(dones.data(), ones.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    gpu::DeviceArray<WalkNode> wnodes;
    wnodes.ensure(dtree.n_nodes());
    dtree.walk_nodes(wnodes.data(), ws.top_levels, nullptr);
    gpu::DeviceWalk dwalk;
    dwalk.run(wnodes.data(), dtree.n_nodes(), dtree.n_leaves(), ws, nullptr);
    REQUIRE(dwalk.m2l_count() == lists.m2l.size());
    REQUIRE(dwalk.leaf_cell_count() == lists.p2l.size());
    gpu::LeafCellLists leaf_cell;
    leaf_cell.p2l = dwalk.p2l_tasks();
    leaf_cell.p2l_offsets = dwalk.p2l_offsets();
    leaf_cell.m2p = dwalk.m2p_tasks();
    leaf_cell.m2p_offsets = dwalk.m2p_offsets();
    leaf_cell.count = dwalk.leaf_cell_count();
    const gpu::FmmTreeView plain = gpu::fmm_tree_view(dtree);
    gpu::FmmTreeView weighted = plain, unit = plain;
    weighted.w = dw.data();
    unit.w = dones.data();

    // The host's reference: weighted multipoles and P2L with the generic operators; the walk's
    // P2P pairs and every pair summed exactly with the masses.
    const int nm = MultiIndexSet::count(p);
    const std::vector<double> mw = weighted_multipoles(tree, p, w_tree);
    const auto moments = [&](std::size_t k) { return mw.data() + k * static_cast<std::size_t>(nm); };
    const std::vector<Vec3d> ref = host_far_field(tree, moments, lists, cpu_walk, p, g_mass, &w_tree);
    double rms = 0;
    for (const Vec3d& a : ref) rms += norm2(a);
    rms = std::sqrt(rms / static_cast<double>(n));
    const std::vector<Vec3d> near = exact_near_field(tree, lists, cpu_walk, g_mass, &w_tree);
    std::vector<std::size_t> all(n);
    for (std::size_t i = 0; i < n; ++i) all[i] = i;
    const std::vector<Vec3d> exact = test::direct_newtonian(tree.positions(), m_tree, all, 1.0, 0.0);

    gpu::DeviceFmm fmm(p, 0.0, KernelKind::newtonian);
    gpu::DeviceArray<double> acc;
    acc.ensure(3 * n);
    const auto far_field = [&](const gpu::FmmTreeView& view, std::uint64_t min_chunk) {
      fmm.set_min_chunk_tasks(min_chunk);
      ORBIS_CUDA_CHECK(cudaMemset(acc.data(), 0, 3 * n * sizeof(double)));
      fmm.compute(view, dwalk.m2l_tasks(), dwalk.m2l_offsets(), dwalk.m2l_count(), 0.0, g_mass, acc.data(), nullptr,
                  leaf_cell);
      ORBIS_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<double> out(3 * n);
      ORBIS_CUDA_CHECK(cudaMemcpy(out.data(), acc.data(), 3 * n * sizeof(double), cudaMemcpyDeviceToHost));
      return out;
    };

    // Weights of exactly 1: the unweighted far field bit for bit (the products by 1 are exact).
    {
      const std::vector<double> none = far_field(plain, 0), ones_field = far_field(unit, 0);
      CHECK(std::memcmp(none.data(), ones_field.data(), none.size() * sizeof(double)) == 0);
    }

    // Whole, the default chunks and chunks of one task (P2L's chunk kernel weighs too).
    const std::vector<double> unweighted = far_field(plain, 0);
    for (const std::uint64_t min_chunk : {std::uint64_t{1} << 40, std::uint64_t{0}, std::uint64_t{1}}) {
      CAPTURE(min_chunk);
      const std::vector<double> got = far_field(weighted, min_chunk);
      // The device's weighted multipoles (the M2L and M2P sources and their subtrees) against the
      // host's: the same sums, up to the host compiler's contractions in M2M.
      const std::vector<double> dm = fmm.node_multipoles(tree.nodes().size());
      std::vector<std::uint8_t> wanted(tree.nodes().size());
      ORBIS_CUDA_CHECK(cudaMemcpy(wanted.data(), fmm.wanted(), wanted.size(), cudaMemcpyDeviceToHost));
      const MultiIndexSet set(p);
      double worst_moment = 0;
      std::size_t compared = 0;
      for (std::size_t k = 0; k < tree.nodes().size(); ++k) {
        if (!wanted[k]) continue;
        ++compared;
        const TreeNode& node = tree.nodes()[k];
        double weight = 0;
        for (std::uint32_t t = node.first; t < node.first + node.count; ++t) weight += w_tree[t];
        for (int i = 0; i < nm; ++i) {
          const double scale = weight * std::pow(std::max(node.radius, 1e-12), set.degree(i)) + 1e-300;
          worst_moment = std::max(worst_moment, std::fabs(mw[k * nm + i] - dm[k * nm + i]) / scale);
        }
      }
      double vs_host = 0, vs_unweighted = 0;
      std::vector<double> e;
      for (std::size_t i = 0; i < n; ++i) {
        const Vec3d g{got[3 * i], got[3 * i + 1], got[3 * i + 2]};
        const Vec3d u{unweighted[3 * i], unweighted[3 * i + 1], unweighted[3 * i + 2]};
        vs_host = std::max(vs_host, norm(g - ref[i]) / rms);
        vs_unweighted = std::max(vs_unweighted, norm(g - u) / rms);
        e.push_back(norm(g + near[i] - exact[i]) / norm(exact[i]));
      }
      std::sort(e.begin(), e.end());
      const double e99 = e[static_cast<std::size_t>(0.99 * static_cast<double>(n - 1))], emax = e.back();
      std::printf("%s, N %zu, max_leaf %d, weights, min chunk %llu: multipoles of %zu nodes, worst |diff|/scale "
                  "%.2e; far field max |diff| / rms vs host %.2e (vs the unweighted %.2e); vs exact median %.2e, 99%% "
                  "%.2e, max %.2e\n",
                  scene.name, n, sc.max_leaf, static_cast<unsigned long long>(min_chunk), compared, worst_moment,
                  vs_host, vs_unweighted, e[n / 2], e99, emax);
      CHECK(compared > 0);
      CHECK(worst_moment < 1e-13);
      CHECK(vs_host < kFloatPairs);
      CHECK(vs_unweighted > 1e-2);   // the masses matter: a field without them is another field
      CHECK(e99 < sc.bar99);
      CHECK(emax < sc.bar_max);
    }
  }
}
