// The device short-range step on a rank's forest (issue #17): DeviceOrbTree::assemble_forest
// and DeviceShortRange::compute_forest against the host and against the one-rank device step.
// On a clustered set the serial tree's depth-d nodes are split into 2 and 3 "ranks"
// (contiguous runs of nodes, plus every other depth-d node within r_cut of one of them, as
// tests/physics/test_forest_forces does; groups in increasing global order, an empty group
// among them), and a small rank whose forest's top is shallower than d (an empty level).
// Checked, for a new forest and after a refit to jittered positions:
//  (a) the device forest (shape, boxes, centres, radii, leaf records, tree-order positions,
//      walk records) equals the host OrbTree::assemble_forest bit for bit;
//  (b) the own particles' forces equal those of DeviceShortRange::compute on the whole set
//      (the same task sets in another order: max |diff| / rms below 1e-12 with double P2P,
//      1e-6 with float) and those of the host ShortRangeSolver on the same forest (CPU P2P)
//      to the one-rank CUDA-vs-CPU difference on this set plus that bound (measured on an
//      H100: 1e-14 in double; in float the CUDA-vs-CPU difference is ~2e-6, the forest's own
//      ~2e-7);
//  (c) the ghosts' out entries are untouched;
//  (d) a mask of some own particles: their forces bitwise those of the all-own mask, every
//      other out entry untouched.
// A forest of very uneven groups (a top deeper than its leaf count says) is checked the
// same way against the host. Returns 77 without a usable GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/hostdevice.hpp"
#include "fmm/p2p_cpu.hpp"
#include "fmm/short_range.hpp"
#include "fmm/walk_pair.hpp"
#include "gpu/device_buffer.cuh"
#include "gpu/short_range_cuda.cuh"
#include "support/clustered_particles.hpp"
#include "support/gpu_skip.hpp"
#include "support/whole_leaf_targets.hpp"
#include "tree/orb_tree.hpp"

using namespace orbis;

namespace {

constexpr double kBox = 100.0;   // Mpc/h
constexpr int kSide = 32;        // 32^3 clustered particles
constexpr int kNodeParticles = 64;
constexpr float kMarker = -12345.0f;

ShortRangeSettings settings_with(int top_levels, bool p2p_double) {
  ShortRangeSettings s;
  s.box_mpc_h = kBox;
  s.r_s = 0.6 * kBox / kSide;   // 1.9 Mpc/h
  s.r_cut = 5.5 * s.r_s;        // 10.3 Mpc/h
  s.theta = 0.5;
  s.multipole_order = 4;
  s.max_leaf = 16;
  s.softening = 0.02;
  s.g_mass = 43.0071;
  s.taylor_order = 3;
  s.p2p_double = p2p_double;
  s.top_levels = top_levels;
  return s;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }
bool same_bits(const Vec3d& a, const Vec3d& b) { return std::memcmp(&a, &b, sizeof(Vec3d)) == 0; }

// x | y | z on the device.
struct DevicePositions {
  gpu::DeviceArray<double> soa;
  explicit DevicePositions(const std::vector<Vec3d>& pos) {
    const std::size_t n = pos.size();
    std::vector<double> h(3 * n);
    for (std::size_t i = 0; i < n; ++i)
      for (int d = 0; d < 3; ++d) h[d * n + i] = pos[i][d];
    soa.ensure(3 * n);
    ORBIS_CUDA_CHECK(cudaMemcpy(soa.data(), h.data(), 3 * n * sizeof(double), cudaMemcpyHostToDevice));
  }
};

template <typename T>
std::vector<T> download_array(const T* dev, std::size_t n) {
  std::vector<T> out(n);
  ORBIS_CUDA_CHECK(cudaMemcpy(out.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost));
  return out;
}

template <typename T>
void upload_array(const std::vector<T>& h, gpu::DeviceArray<T>& dev) {
  dev.ensure(h.size());
  ORBIS_CUDA_CHECK(cudaMemcpy(dev.data(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}

// Device forces (x | y | z blocks of Ga) as host vectors.
template <typename Ga>
std::vector<Vec3d> forces_of(const gpu::DeviceArray<Ga>& out, std::size_t n) {
  const std::vector<Ga> h = download_array(out.data(), 3 * n);
  std::vector<Vec3d> a(n);
  for (std::size_t i = 0; i < n; ++i) a[i] = Vec3d{h[i], h[n + i], h[2 * n + i]};
  return a;
}

// The device tree against the host one, everything the device tree exposes; mismatches are
// counted so that a broken forest reports a number, not 10^4 lines.
void compare_trees(const gpu::DeviceOrbTree& dev_tree, const OrbTree& host, const std::vector<Vec3d>& positions,
                   int top_levels) {
  REQUIRE(dev_tree.size() == positions.size());
  REQUIRE(dev_tree.n_nodes() == host.nodes().size());
  REQUIRE(dev_tree.n_leaves() == host.leaves().size());
  OrbTree got;
  dev_tree.download(got, positions, nullptr);
  std::size_t shape_bad = 0, box_bad = 0, centre_bad = 0, radius_bad = 0;
  for (std::size_t i = 0; i < host.nodes().size(); ++i) {
    const TreeNode& a = got.nodes()[i];
    const TreeNode& b = host.nodes()[i];
    shape_bad += a.first != b.first || a.count != b.count || a.left != b.left || a.right != b.right ||
                 a.parent != b.parent || a.leaf != b.leaf || a.depth != b.depth;
    box_bad += !same_bits(a.lo, b.lo) || !same_bits(a.hi, b.hi);
    centre_bad += !same_bits(a.centre, b.centre);
    radius_bad += !same_bits(a.radius, b.radius);
  }
  CHECK(shape_bad == 0);
  CHECK(box_bad == 0);
  CHECK(centre_bad == 0);
  CHECK(radius_bad == 0);
  std::vector<std::uint32_t> identity(positions.size());
  std::iota(identity.begin(), identity.end(), 0u);
  CHECK(got.order() == identity);
  CHECK(host.order() == identity);
  CHECK(got.leaf_node() == host.leaf_node());
  CHECK(got.levels() == host.levels());

  const std::size_t n = positions.size();
  const auto tx = download_array(dev_tree.tree_x(), n), ty = download_array(dev_tree.tree_y(), n),
             tz = download_array(dev_tree.tree_z(), n);
  std::size_t pos_bad = 0;
  for (std::size_t t = 0; t < n; ++t) pos_bad += !same_bits(Vec3d{tx[t], ty[t], tz[t]}, host.positions()[t]);
  CHECK(pos_bad == 0);
  const auto leaves = download_array(dev_tree.leaves(), dev_tree.n_leaves());
  std::size_t leaf_bad = 0;
  for (std::size_t l = 0; l < leaves.size(); ++l) {
    const Leaf& h = host.leaves()[l];
    leaf_bad += leaves[l].first != h.first || leaves[l].count != h.count ||
                !same_bits(Vec3d{leaves[l].cx, leaves[l].cy, leaves[l].cz}, h.centre);
  }
  CHECK(leaf_bad == 0);
  gpu::DeviceArray<WalkNode> walk;
  walk.ensure(dev_tree.n_nodes());
  dev_tree.walk_nodes(walk.data(), top_levels, nullptr);
  const auto w = download_array(walk.data(), dev_tree.n_nodes());
  std::size_t walk_bad = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    const TreeNode& b = host.nodes()[i];
    const WalkNode h = make_walk_node(b.lo, b.hi, b.centre, b.radius, b.left, b.right, b.leaf,
                                      is_top_node(b.depth, b.left, top_levels));
    walk_bad += std::memcmp(&w[i], &h, sizeof(WalkNode)) != 0;   // 96 bytes, no padding
  }
  CHECK(walk_bad == 0);
}

// walk_pair's drop test alone: whether anything comes out of two nodes flagged top (host
// and device code, as walk_pair is).
struct NotDropped {
  bool any = false;
  ORBIS_HD void m2l(const std::int8_t*) { any = true; }
  ORBIS_HD void p2p(const std::int8_t*) { any = true; }
  ORBIS_HD void p2l_m2p(bool) { any = true; }
  ORBIS_HD void child(std::int32_t, std::int32_t) { any = true; }
};
bool within_r_cut(const TreeNode& a, const TreeNode& b, const WalkPairParams& p) {
  const WalkNode x = make_walk_node(a.lo, a.hi, a.centre, a.radius, 1, 2, -1, true);
  const WalkNode y = make_walk_node(b.lo, b.hi, b.centre, b.radius, 3, 4, -1, true);
  NotDropped sink;
  walk_pair(0, 1, x, y, p, sink);
  return sink.any;
}

struct Rank {
  std::vector<Vec3d> positions, moved;   // forest order
  std::vector<std::uint32_t> offsets;    // group offsets (an empty group after the first)
  std::vector<std::size_t> caller;       // caller index per forest position
  std::vector<std::uint8_t> own;         // 1: own particle (a target)
  std::size_t own_groups = 0, imported = 0;
};

// The rank owning the serial tree's depth-d nodes [a, b) (`nodes`, tree order): its groups
// and every other depth-d node within r_cut of one of them in the tree of the input or the
// refitted one, in increasing global order, each gathered shuffled and put in subtree order.
Rank make_rank(const OrbTree& serial, const OrbTree& refitted, const std::vector<Vec3d>& input,
               const std::vector<Vec3d>& moved, const std::vector<std::int32_t>& nodes, std::size_t a, std::size_t b,
               const ShortRangeSettings& s, std::uint64_t seed) {
  const WalkPairParams params = walk_pair_params(WalkSettings{s.box_mpc_h, s.r_cut, s.theta, 0});
  const auto near = [&](const OrbTree& t, std::size_t g, std::size_t h) {
    return within_r_cut(t.nodes()[static_cast<std::size_t>(nodes[g])], t.nodes()[static_cast<std::size_t>(nodes[h])],
                        params);
  };
  Rank r;
  r.own_groups = b - a;
  r.offsets.push_back(0);
  std::vector<std::size_t> gathered;
  std::vector<std::uint8_t> own;
  std::mt19937_64 rng(seed);
  for (std::size_t g = 0; g < nodes.size(); ++g) {
    const bool mine = g >= a && g < b;
    bool wanted = mine;
    for (std::size_t h = a; h < b && !wanted; ++h) wanted = near(serial, h, g) || near(refitted, h, g);
    if (!wanted) continue;
    r.imported += !mine;
    const TreeNode& node = serial.nodes()[static_cast<std::size_t>(nodes[g])];
    std::vector<std::size_t> members(serial.order().begin() + node.first,
                                     serial.order().begin() + node.first + node.count);
    std::shuffle(members.begin(), members.end(), rng);
    gathered.insert(gathered.end(), members.begin(), members.end());
    own.insert(own.end(), members.size(), mine ? 1 : 0);
    r.offsets.push_back(static_cast<std::uint32_t>(gathered.size()));
    if (r.offsets.size() == 2) r.offsets.push_back(r.offsets.back());   // an empty group
  }
  std::vector<Vec3d> pos(gathered.size());
  for (std::size_t i = 0; i < gathered.size(); ++i) pos[i] = input[gathered[i]];
  const std::vector<std::uint32_t> perm = OrbTree::subtree_order(pos, r.offsets, s.max_leaf);
  for (std::uint32_t t : perm) {
    r.positions.push_back(pos[t]);
    r.moved.push_back(moved[gathered[t]]);
    r.caller.push_back(gathered[t]);
    r.own.push_back(own[t]);
  }
  return r;
}

// max |a - ref| / rms |ref| over the particles with flag[t] (ref indexed through caller, or
// directly when caller is null).
double max_over_rms(const std::vector<Vec3d>& a, const std::vector<Vec3d>& ref, const std::vector<std::uint8_t>& flag,
                    const std::vector<std::size_t>* caller) {
  double worst = 0, sum = 0;
  std::size_t count = 0;
  for (std::size_t t = 0; t < a.size(); ++t) {
    if (!flag[t]) continue;
    const Vec3d& r = ref[caller ? (*caller)[t] : t];
    worst = std::max(worst, norm(a[t] - r));
    sum += norm2(r);
    ++count;
  }
  return count == 0 ? 0.0 : worst / std::sqrt(sum / static_cast<double>(count));
}

// Entries of the particles without flag[t] that do not hold the marker any more.
template <typename Ga>
std::size_t touched(const gpu::DeviceArray<Ga>& out, const std::vector<std::uint8_t>& flag) {
  const std::size_t n = flag.size();
  const std::vector<Ga> h = download_array(out.data(), 3 * n);
  std::size_t bad = 0;
  for (std::size_t t = 0; t < n; ++t)
    if (!flag[t]) bad += h[t] != Ga(kMarker) || h[n + t] != Ga(kMarker) || h[2 * n + t] != Ga(kMarker);
  return bad;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

template <typename Ga>
void fill_marker(gpu::DeviceArray<Ga>& out, std::size_t n) {
  out.ensure(3 * n);
  upload_array(std::vector<Ga>(3 * n, Ga(kMarker)), out);
}

struct Setup {
  std::vector<Vec3d> input, moved;
  int d = 0;
  OrbTree tree, refitted;   // the serial tree (top_levels d) of the input, and refitted to `moved`
  std::vector<std::int32_t> nodes;   // its depth-d nodes, tree order
  Setup() : input(test::clustered_particles(kSide, kBox, 2024)) {
    const int max_leaf = settings_with(0, false).max_leaf;
    d = top_levels_for(static_cast<std::int64_t>(input.size()), kNodeParticles, max_leaf);
    tree.build(input, max_leaf, 1.0, OrbTree::kParallelMin, d);   // as the solvers build it
    moved = input;
    std::mt19937_64 rng(9);
    std::uniform_real_distribution<double> step(-0.2, 0.2);   // up to 0.2 Mpc/h a coordinate
    for (Vec3d& x : moved)
      for (int k = 0; k < 3; ++k) {
        x[k] += step(rng);
        x[k] = x[k] < 0 ? x[k] + kBox : (x[k] >= kBox ? x[k] - kBox : x[k]);
      }
    refitted = tree;
    refitted.refit(moved);
    for (std::size_t i = 0; i < tree.nodes().size(); ++i)
      if (tree.nodes()[i].depth == d) nodes.push_back(static_cast<std::int32_t>(i));
  }
};

// Levels of the device tree with no node (a forest's top shallower than d).
std::size_t empty_levels(const gpu::DeviceOrbTree& t) {
  std::size_t e = 0;
  for (std::size_t k = 0; k + 1 < t.level_offsets().size(); ++k) e += t.level_offsets()[k + 1] == t.level_offsets()[k];
  return e;
}

template <typename Ga>
void check_ranks(const Setup& in, bool p2p_double, std::size_t& empty_level_forests) {
  const ShortRangeSettings s = settings_with(in.d, p2p_double);
  const double device_bound = p2p_double ? 1e-12 : 1e-6;
  const std::size_t n_all = in.input.size();

  // The one-rank device step on the whole set: a new tree, then a refit to the moved positions.
  gpu::DeviceShortRange serial(s, 0);
  DevicePositions all(in.input), all_moved(in.moved);
  gpu::DeviceArray<Ga> out_all;
  out_all.ensure(3 * n_all);
  serial.compute(all.soa.data(), n_all, nullptr, 0, out_all.data(), nullptr);
  const std::vector<Vec3d> ref_new = forces_of(out_all, n_all);
  serial.compute(all_moved.soa.data(), n_all, nullptr, 0, out_all.data(), nullptr);
  REQUIRE(!serial.stats().rebuilt);
  const std::vector<Vec3d> ref_refit = forces_of(out_all, n_all);

  // The one-rank host solver (CPU P2P) likewise: on this set the CUDA-vs-CPU difference alone
  // (float P2P: close pairs at softening 0.02 make it ~2e-6, above test_short_range_cuda's
  // 2e-6 for its set). The host forest in increasing global order gives the host serial
  // forces bitwise (test_forest_forces), so device forest vs host forest may differ by that
  // difference plus the device forest's own summation order (device_bound), no more.
  CpuP2PEvaluator cpu;
  std::vector<Vec3d> host_serial_new, host_serial_refit;
  {
    ShortRangeSolver host_serial(s);
    host_serial.compute(in.input, cpu, host_serial_new);
    ShortRangeTargets refit;
    refit.refit_tree = true;
    host_serial.begin(in.moved, cpu, refit);
    host_serial.end(host_serial_refit);
  }
  const std::size_t g = in.nodes.size();
  struct Split {
    const char* name;
    std::vector<std::pair<std::size_t, std::size_t>> ranks;
  };
  const Split splits[] = {{"2 ranks", {{0, g * 2 / 5}, {g * 2 / 5, g}}},
                          {"3 ranks", {{0, g * 2 / 7}, {g * 2 / 7, g * 5 / 7 + 3}, {g * 5 / 7 + 3, g}}},
                          {"a small rank", {{0, g / 64}}}};   // 8 own + ~250 imported: top depth 8 < d
  for (const Split& split : splits) {
    for (std::size_t k = 0; k < split.ranks.size(); ++k) {
      const std::string name = split.name;
      CAPTURE(name);
      CAPTURE(k);
      const Rank r = make_rank(in.tree, in.refitted, in.input, in.moved, in.nodes, split.ranks[k].first,
                               split.ranks[k].second, s, 11 + k);
      const std::size_t n = r.positions.size();
      CHECK(r.imported > 0);
      CHECK(r.imported + r.own_groups < g);   // a real subset

      DevicePositions x(r.positions), x_moved(r.moved);
      gpu::DeviceArray<std::uint8_t> target;
      upload_array(r.own, target);
      gpu::DeviceShortRange sr(s, 0);
      gpu::DeviceArray<Ga> out;

      // A new forest.
      fill_marker(out, n);
      auto clock = std::chrono::steady_clock::now();
      sr.compute_forest(x.soa.data(), n, r.offsets, false, target.data(), out.data(), n, nullptr);
      const gpu::DeviceShortRangeStats st = sr.stats();
      const double wall_new = seconds_since(clock);
      CHECK(st.rebuilt);
      CHECK(!sr.has_tree(n));   // a forest is no tree compute() could refit
      OrbTree host_forest;
      host_forest.assemble_forest(r.positions, r.offsets, s.top_levels, s.max_leaf);
      compare_trees(sr.tree(), host_forest, r.positions, s.top_levels);
      empty_level_forests += empty_levels(sr.tree()) > 0;
      const std::vector<Vec3d> got_new = forces_of(out, n);
      CHECK(touched(out, r.own) == 0);

      ShortRangeSolver host(s);
      ShortRangeTargets targets;
      targets.bins = &r.own;
      targets.min_bin = 1;
      targets.forest_groups = &r.offsets;
      std::vector<Vec3d> host_new(n, Vec3d{0, 0, 0}), host_refit(n, Vec3d{0, 0, 0});
      host.begin(r.positions, cpu, targets);
      host.end(host_new);
      // The own particles' one-rank forces, forest order.
      const auto own_of = [&](const std::vector<Vec3d>& all_forces) {
        std::vector<Vec3d> v(n);
        for (std::size_t t = 0; t < n; ++t) v[t] = all_forces[r.caller[t]];
        return v;
      };
      const double e_dev = max_over_rms(got_new, ref_new, r.own, &r.caller);
      const double e_host = max_over_rms(got_new, host_new, r.own, nullptr);
      const double e_cpu = max_over_rms(own_of(ref_new), own_of(host_serial_new), r.own, nullptr);
      CHECK(e_dev < device_bound);
      CHECK(e_host < e_cpu + device_bound);

      // A refit of the same forest to the moved positions.
      fill_marker(out, n);
      clock = std::chrono::steady_clock::now();
      sr.compute_forest(x_moved.soa.data(), n, r.offsets, true, target.data(), out.data(), n, nullptr);
      const gpu::DeviceShortRangeStats sr_refit = sr.stats();
      const double wall_refit = seconds_since(clock);
      CHECK(!sr_refit.rebuilt);
      host_forest.refit(r.moved);
      compare_trees(sr.tree(), host_forest, r.moved, s.top_levels);
      const std::vector<Vec3d> got_refit = forces_of(out, n);
      CHECK(touched(out, r.own) == 0);
      targets.refit_tree = true;
      host.begin(r.moved, cpu, targets);
      host.end(host_refit);
      const double r_dev = max_over_rms(got_refit, ref_refit, r.own, &r.caller);
      const double r_host = max_over_rms(got_refit, host_refit, r.own, nullptr);
      const double r_cpu = max_over_rms(own_of(ref_refit), own_of(host_serial_refit), r.own, nullptr);
      CHECK(r_dev < device_bound);
      CHECK(r_host < r_cpu + device_bound);

      // Some own particles only (every third of the first half of the own particles, so the
      // leaves of the other half hold no target and their pairs go): the all-own forces (the
      // P2P packs each leaf's targets, so in another order: the float P2P's rounding; bitwise
      // in a leaf of one particle), every other entry untouched.
      std::size_t n_own = 0;
      for (std::size_t t = 0; t < n; ++t) n_own += r.own[t] ? 1 : 0;
      std::vector<std::uint8_t> some(n, 0);
      std::size_t n_some = 0, own_seen = 0;
      for (std::size_t t = 0; t < n; ++t) {
        if (!r.own[t]) continue;
        some[t] = t % 3 == 0 && own_seen < n_own / 2;
        ++own_seen;
        n_some += some[t];
      }
      gpu::DeviceArray<std::uint8_t> some_dev;
      upload_array(some, some_dev);
      fill_marker(out, n);
      sr.compute_forest(x_moved.soa.data(), n, r.offsets, true, some_dev.data(), out.data(), n, nullptr);
      const gpu::DeviceShortRangeStats ss = sr.stats();
      const std::vector<Vec3d> got_some = forces_of(out, n);
      const std::vector<std::uint8_t> whole = test::whole_leaf_targets(sr.tree(), some);
      std::size_t whole_bad = 0;
      for (std::size_t t = 0; t < n; ++t) whole_bad += whole[t] && !same_bits(got_some[t], got_refit[t]);
      CHECK(n_some > 0);
      CHECK(ss.active_particles == n_some);
      CHECK(whole_bad == 0);
      CHECK(max_over_rms(got_some, got_refit, some, nullptr) < r_cpu + device_bound);   // another order
      CHECK(touched(out, some) == 0);
      CHECK(ss.p2p_pairs < sr_refit.p2p_pairs);

      MESSAGE(name << ", rank " << k << " (" << std::string(p2p_double ? "double" : "float") << " P2P): " << r.own_groups
              << " own groups + " << r.imported << " imported, " << n << " particles, " << st.nodes << " nodes ("
              << empty_levels(sr.tree()) << " empty levels), " << st.p2p_tasks << " P2P tasks, " << st.m2l_tasks
              << " M2L; max |diff| / rms vs one-rank device " << e_dev << " (refit " << r_dev << "), vs host forest "
              << e_host << " (refit " << r_host << "; one-rank CUDA vs CPU " << e_cpu << ", refit " << r_cpu << "); "
              << n_some << " masked targets: " << ss.p2p_pairs << " of " << sr_refit.p2p_pairs << " pairs; ms (wall, with the host's shape / device tree / device total): new "
              << 1e3 * wall_new << " / " << 1e3 * st.tree << " / " << 1e3 * st.total << ", refit " << 1e3 * wall_refit
              << " / " << 1e3 * sr_refit.tree << " / " << 1e3 * sr_refit.total);

      // A refit needs the last forest's groups.
      std::vector<std::uint32_t> other = r.offsets;
      other[1] += 1;
      CHECK_THROWS_AS(sr.compute_forest(x_moved.soa.data(), n, other, true, target.data(), out.data(), n, nullptr),
                      Error);
    }
  }
}

}  // namespace

TEST_CASE("device forest on 2 and 3 ranks: the host forest bit for bit, the one-rank forces to rounding") {
  test::require_gpu_or_skip();
  const Setup in;
  REQUIRE(in.nodes.size() == (std::size_t{1} << in.d));
  std::size_t empty_level_forests = 0;
  SUBCASE("double P2P, double forces") { check_ranks<double>(in, true, empty_level_forests); }
  SUBCASE("float P2P, float forces") { check_ranks<float>(in, false, empty_level_forests); }
  CHECK(empty_level_forests > 0);   // the small rank's forest has levels with no node
}

TEST_CASE("device forest of very uneven groups (a top deeper than its leaves say) equals the host's") {
  test::require_gpu_or_skip();
  // x-slabs of very different sizes, one empty: a large group among tiny ones puts leaves
  // deeper than ceil(log2 leaves) + 1, which the walk must launch enough levels for.
  std::vector<Vec3d> pos = test::clustered_particles(24, kBox, 77);
  std::sort(pos.begin(), pos.end(), [](const Vec3d& a, const Vec3d& b) { return a.x < b.x; });
  const std::vector<std::uint32_t> sizes = {3, 1, 9000, 0, 2, 17, 1, 5, 40, 2};
  std::vector<std::uint32_t> offsets{0};
  for (std::uint32_t c : sizes) offsets.push_back(offsets.back() + c);
  offsets.back() = static_cast<std::uint32_t>(pos.size());   // the last group takes the rest
  const ShortRangeSettings s = settings_with(6, false);
  const std::vector<std::uint32_t> perm = OrbTree::subtree_order(pos, offsets, s.max_leaf);
  std::vector<Vec3d> forest(pos.size()), moved(pos.size());
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> step(-0.1, 0.1);
  for (std::size_t t = 0; t < perm.size(); ++t) {
    forest[t] = pos[perm[t]];
    for (int k = 0; k < 3; ++k) moved[t][k] = std::clamp(forest[t][k] + step(rng), 0.0, std::nextafter(kBox, 0.0));
  }
  const std::size_t n = forest.size();
  std::vector<std::uint8_t> all(n, 1);

  OrbTree host_forest;
  host_forest.assemble_forest(forest, offsets, s.top_levels, s.max_leaf);
  int path = 0;   // the longest root-to-leaf path
  for (std::int32_t leaf : host_forest.leaf_node()) {
    int p = 0;
    for (std::int32_t i = leaf; host_forest.nodes()[static_cast<std::size_t>(i)].parent >= 0;
         i = host_forest.nodes()[static_cast<std::size_t>(i)].parent)
      ++p;
    path = std::max(path, p);
  }
  int leaf_bits = 0;
  while ((std::size_t{1} << leaf_bits) < host_forest.leaves().size()) ++leaf_bits;
  MESSAGE("uneven forest: " << n << " particles, " << host_forest.leaves().size() << " leaves, longest path " << path
          << " (a built tree of as many leaves: <= " << leaf_bits + 1 << ")");
  CHECK(path > leaf_bits + 1);   // deeper than the walk's bound for a built tree of as many leaves

  DevicePositions x(forest), x_moved(moved);
  gpu::DeviceArray<std::uint8_t> target;
  upload_array(all, target);
  gpu::DeviceShortRange sr(s, 0);
  gpu::DeviceArray<float> out;
  out.ensure(3 * n);
  CpuP2PEvaluator cpu;
  ShortRangeSolver host(s);
  ShortRangeTargets targets;
  targets.bins = &all;
  targets.min_bin = 1;
  targets.forest_groups = &offsets;
  for (const bool refit : {false, true}) {
    CAPTURE(refit);
    const std::vector<Vec3d>& p = refit ? moved : forest;
    sr.compute_forest((refit ? x_moved : x).soa.data(), n, offsets, refit, target.data(), out.data(), n, nullptr);
    if (refit) host_forest.refit(moved);
    compare_trees(sr.tree(), host_forest, p, s.top_levels);
    targets.refit_tree = refit;
    std::vector<Vec3d> ref(n, Vec3d{0, 0, 0});
    host.begin(p, cpu, targets);
    host.end(ref);
    const double e = max_over_rms(forces_of(out, n), ref, all, nullptr);
    MESSAGE("uneven forest" << std::string(refit ? " (refit)" : "") << ": max |diff| / rms vs host " << e << "; "
            << sr.stats().walk_launches << " walk launches");
    CHECK(e < 2e-6);
  }
  // compute() after a forest builds a tree of its own: the host solver's forces on it.
  sr.compute(x.soa.data(), n, nullptr, 0, out.data(), nullptr);
  CHECK(sr.stats().rebuilt);
  std::vector<Vec3d> ref;
  ShortRangeSolver(s).compute(forest, cpu, ref);
  CHECK(max_over_rms(forces_of(out, n), ref, all, nullptr) < 2e-6);
}
