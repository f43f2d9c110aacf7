// The device ORB tree against OrbTree::build on the same positions (run on the device
// machine): the same nodes, bit for bit (box, centre, radius), the same order, the same
// leaf records and walk records. Without a usable GPU every test prints "SKIPPED: no CUDA
// device" and the program returns 77 (CTest: skipped).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gpu/orb_tree_cuda.cuh"
#include "support/clustered_particles.hpp"
#include "support/gpu_skip.hpp"

using namespace orbis;

namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }
bool same_bits(const Vec3d& a, const Vec3d& b) { return std::memcmp(&a, &b, sizeof(Vec3d)) == 0; }

// Positions in structure-of-arrays form on the device.
struct DevicePositions {
  gpu::DeviceArray<double> x, y, z;
  explicit DevicePositions(const std::vector<Vec3d>& pos) {
    const std::size_t n = pos.size();
    std::vector<double> h[3];
    for (auto& v : h) v.resize(n);
    for (std::size_t i = 0; i < n; ++i)
      for (int d = 0; d < 3; ++d) h[d][i] = pos[i][d];
    gpu::DeviceArray<double>* dev[3] = {&x, &y, &z};
    for (int d = 0; d < 3; ++d) {
      dev[d]->ensure(n);
      ORBIS_CUDA_CHECK(cudaMemcpy(dev[d]->data(), h[d].data(), n * sizeof(double), cudaMemcpyHostToDevice));
    }
  }
};

template <typename T>
std::vector<T> download_array(const T* dev, std::size_t n) {
  std::vector<T> out(n);
  ORBIS_CUDA_CHECK(cudaMemcpy(out.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost));
  return out;
}

// Builds both trees and compares everything the device tree exposes; mismatches are
// counted (not CHECKed one by one) so a broken build reports a number, not 10^5 lines.
// max_cub_items: the most items per CUB call (gpu/cub_counts.cuh; lowered, the build takes
// the 64-bit-count path of a tree of more than 2^31 / 3 particles).
// top_levels: the walk's top depth both builds split above with the stable rule (split_axis).
// moved (not null): both trees are then refitted to these positions of the same particles.
void compare_with_host(const std::vector<Vec3d>& built_from, int max_leaf, double particle_mass = 1.5,
                       std::size_t max_cub_items = gpu::kCubMaxItems, int top_levels = 0,
                       const std::vector<Vec3d>* moved = nullptr) {
  CAPTURE(built_from.size());
  CAPTURE(max_leaf);
  CAPTURE(max_cub_items);
  CAPTURE(top_levels);
  CAPTURE(moved != nullptr);
  OrbTree host;
  host.build(built_from, max_leaf, particle_mass, OrbTree::kParallelMin, top_levels);

  DevicePositions dp(built_from);
  gpu::DeviceOrbTree dev;
  dev.set_max_cub_items(max_cub_items);
  dev.build(dp.x.data(), dp.y.data(), dp.z.data(), built_from.size(), max_leaf, particle_mass, nullptr, top_levels);
  const std::vector<Vec3d>& pos = moved ? *moved : built_from;
  if (moved) {
    host.refit(pos);
    DevicePositions dm(pos);
    dev.refit(dm.x.data(), dm.y.data(), dm.z.data(), nullptr);
    ORBIS_CUDA_CHECK(cudaDeviceSynchronize());   // dm's arrays go at the end of this scope
  }
  OrbTree got;
  dev.download(got, pos, nullptr);
  REQUIRE(dev.size() == pos.size());
  REQUIRE(dev.n_nodes() == host.nodes().size());
  REQUIRE(dev.n_leaves() == host.leaves().size());
  REQUIRE(got.nodes().size() == host.nodes().size());

  std::size_t shape_bad = 0, box_bad = 0, centre_bad = 0, radius_bad = 0, mass_bad = 0;
  for (std::size_t i = 0; i < host.nodes().size(); ++i) {
    const TreeNode& a = got.nodes()[i];
    const TreeNode& b = host.nodes()[i];
    shape_bad += a.first != b.first || a.count != b.count || a.left != b.left || a.right != b.right ||
                 a.parent != b.parent || a.leaf != b.leaf || a.depth != b.depth;
    box_bad += !same_bits(a.lo, b.lo) || !same_bits(a.hi, b.hi);
    centre_bad += !same_bits(a.centre, b.centre);
    radius_bad += !same_bits(a.radius, b.radius);
    mass_bad += !same_bits(a.mass, b.mass);
  }
  CHECK(shape_bad == 0);
  CHECK(box_bad == 0);
  CHECK(centre_bad == 0);
  CHECK(radius_bad == 0);
  CHECK(mass_bad == 0);

  std::size_t order_bad = 0;
  for (std::size_t t = 0; t < pos.size(); ++t) order_bad += got.order()[t] != host.order()[t];
  CHECK(order_bad == 0);
  CHECK(std::memcmp(got.positions().data(), host.positions().data(), pos.size() * sizeof(Vec3d)) == 0);
  CHECK(got.leaf_node() == host.leaf_node());
  CHECK(got.levels() == host.levels());

  // The device arrays themselves: tree-order positions, leaf records, walk records.
  const auto tx = download_array(dev.tree_x(), pos.size());
  const auto ty = download_array(dev.tree_y(), pos.size());
  const auto tz = download_array(dev.tree_z(), pos.size());
  std::size_t tree_pos_bad = 0;
  for (std::size_t t = 0; t < pos.size(); ++t)
    tree_pos_bad += !same_bits(Vec3d{tx[t], ty[t], tz[t]}, host.positions()[t]);
  CHECK(tree_pos_bad == 0);

  const auto leaves = download_array(dev.leaves(), dev.n_leaves());
  std::size_t leaf_bad = 0;
  for (std::size_t l = 0; l < leaves.size(); ++l) {
    const Leaf& h = host.leaves()[l];
    leaf_bad += leaves[l].first != h.first || leaves[l].count != h.count ||
                !same_bits(Vec3d{leaves[l].cx, leaves[l].cy, leaves[l].cz}, h.centre);
  }
  CHECK(leaf_bad == 0);

  gpu::DeviceArray<WalkNode> walk;
  walk.ensure(dev.n_nodes());
  dev.walk_nodes(walk.data(), 3, nullptr);   // the top flag above depth 3 too
  const auto w = download_array(walk.data(), dev.n_nodes());
  std::size_t walk_bad = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    const TreeNode& b = host.nodes()[i];
    const Vec3d bc = b.box_centre(), hw = b.half_width();
    walk_bad += !same_bits(Vec3d{w[i].box_centre[0], w[i].box_centre[1], w[i].box_centre[2]}, bc) ||
                !same_bits(Vec3d{w[i].half_width[0], w[i].half_width[1], w[i].half_width[2]}, hw) ||
                !same_bits(Vec3d{w[i].centre[0], w[i].centre[1], w[i].centre[2]}, b.centre) ||
                !same_bits(w[i].radius, b.radius) || w[i].left != b.left || w[i].right != b.right ||
                w[i].leaf != b.leaf || w[i].top != (is_top_node(b.depth, b.left, 3) ? 1 : 0);
  }
  CHECK(walk_bad == 0);
}

// Coordinates on a coarse lattice (many equal x, y or z), duplicates of whole positions
// removed: two particles at one position are interchangeable, and no order between them
// is defined on either side.
std::vector<Vec3d> quantised(std::size_t n, double box, int cells, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> cell(0, cells - 1);
  const double h = box / cells;
  std::vector<Vec3d> pos(n);
  for (auto& p : pos) p = Vec3d{cell(rng) * h, cell(rng) * h, cell(rng) * h};
  auto less = [](const Vec3d& a, const Vec3d& b) {
    return a.x != b.x ? a.x < b.x : (a.y != b.y ? a.y < b.y : a.z < b.z);
  };
  auto equal = [](const Vec3d& a, const Vec3d& b) { return a.x == b.x && a.y == b.y && a.z == b.z; };
  std::sort(pos.begin(), pos.end(), less);
  pos.erase(std::unique(pos.begin(), pos.end(), equal), pos.end());
  std::shuffle(pos.begin(), pos.end(), rng);
  return pos;
}

}  // namespace

TEST_CASE("device ORB tree equals the host tree: uniform positions") {
  test::require_gpu_or_skip();
  const auto pos = test::uniform_particles(100003, 100.0, 21);
  compare_with_host(pos, 32);
  compare_with_host(pos, 7);
}

TEST_CASE("device ORB tree with CUB calls limited to 1000 items (the path beyond 2^31 items) equals the host tree") {
  test::require_gpu_or_skip();
  compare_with_host(test::uniform_particles(100003, 100.0, 22), 32, 1.5, 1000);
  compare_with_host(test::clustered_particles(32, 100.0, 5), 7, 1.5, 1000);
}

TEST_CASE("device ORB tree equals the host tree: clustered positions") {
  test::require_gpu_or_skip();
  compare_with_host(test::clustered_particles(48, 100.0, 3), 32);
}

TEST_CASE("device ORB tree equals the host tree: exact ties") {
  test::require_gpu_or_skip();
  const std::vector<Vec3d> grid = test::shuffled_tie_grid(4);
  compare_with_host(grid, 32);
  compare_with_host(grid, 5);
  compare_with_host(quantised(60000, 50.0, 64, 8), 16);
}

TEST_CASE("device ORB tree equals the host tree above the walk's top depth (near-equal sides, top_levels > 0)") {
  test::require_gpu_or_skip();
  // Sides 99.5 : 100 : 98.9 (x, y, z): the longest side is y, the stable rule (the lowest
  // axis within 2%) takes x at the root, and the near-cubic nodes below it choose between
  // near-equal sides too. The host trees with and without top_levels must differ, or the
  // case would not test the rule.
  std::vector<Vec3d> pos = test::uniform_particles(100003, 100.0, 23);
  for (Vec3d& x : pos) x = Vec3d{x.x * 0.995, x.y, x.z * 0.989};
  OrbTree plain, stable;
  plain.build(pos, 32);
  stable.build(pos, 32, 1.0, OrbTree::kParallelMin, 6);
  REQUIRE(plain.order() != stable.order());
  compare_with_host(pos, 32, 1.5, gpu::kCubMaxItems, 6);
  compare_with_host(pos, 7, 1.5, gpu::kCubMaxItems, 9);
  compare_with_host(test::clustered_particles(48, 100.0, 3), 32, 1.5, gpu::kCubMaxItems, 9);
  compare_with_host(quantised(60000, 50.0, 64, 8), 16, 1.5, 1000, 5);   // ties, and the split CUB path
  compare_with_host(test::uniform_particles(1000, 10.0, 4), 8, 1.5, gpu::kCubMaxItems, 30);   // d past the leaves
}

// Every particle moved by up to a tenth of its box's mean spacing (some out of the box: a
// refit does not wrap), and a few by much more: nodes then overlap.
std::vector<Vec3d> jittered(const std::vector<Vec3d>& pos, double box, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double step = 0.1 * box / std::cbrt(static_cast<double>(pos.size()));
  std::uniform_real_distribution<double> u(-step, step);
  std::vector<Vec3d> out = pos;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double f = i % 97 == 0 ? 30.0 : 1.0;
    out[i] += f * Vec3d{u(rng), u(rng), u(rng)};
  }
  return out;
}

TEST_CASE("device ORB tree refitted to moved positions equals the host tree refitted to them") {
  test::require_gpu_or_skip();
  const auto uniform = test::uniform_particles(100003, 100.0, 24);
  const auto moved_uniform = jittered(uniform, 100.0, 1);
  compare_with_host(uniform, 32, 1.5, gpu::kCubMaxItems, 0, &moved_uniform);
  compare_with_host(uniform, 7, 1.5, gpu::kCubMaxItems, 4, &moved_uniform);
  const auto clustered = test::clustered_particles(48, 100.0, 3);
  const auto moved_clustered = jittered(clustered, 100.0, 2);
  compare_with_host(clustered, 32, 1.5, gpu::kCubMaxItems, 0, &moved_clustered);
  // Leaves of more than a warp's 32 particles (the geometry pass takes them in chunks of 32).
  compare_with_host(clustered, 64, 1.5, gpu::kCubMaxItems, 0, &moved_clustered);
  compare_with_host(uniform, 200, 1.5, gpu::kCubMaxItems, 0, &moved_uniform);
  // Unmoved: a refit gives back the build's tree bit for bit.
  compare_with_host(clustered, 32, 1.5, gpu::kCubMaxItems, 0, &clustered);
  const auto small = test::uniform_particles(33, 10.0, 5);
  const auto moved_small = jittered(small, 10.0, 3);
  compare_with_host(small, 8, 1.5, gpu::kCubMaxItems, 0, &moved_small);
}

TEST_CASE("device ORB tree: small trees and reuse across sizes") {
  test::require_gpu_or_skip();
  gpu::DeviceOrbTree reused;
  for (const std::size_t n : {std::size_t{1}, std::size_t{5}, std::size_t{33}, std::size_t{4097}, std::size_t{1000}}) {
    CAPTURE(n);
    compare_with_host(test::uniform_particles(n, 10.0, n), 8);
    const auto pos = test::uniform_particles(n, 10.0, n + 1);
    DevicePositions dp(pos);
    reused.build(dp.x.data(), dp.y.data(), dp.z.data(), n, 8, 1.0, nullptr);
    OrbTree got, host;
    reused.download(got, pos, nullptr);
    host.build(pos, 8);
    CHECK(got.order() == host.order());
  }
}
