// The device subtree order (gpu/subtree_order_cuda.cuh) against the host's
// OrbTree::subtree_order_by_group on the same positions and groups (run on the device
// machine): the same permutation, index for index, and the same group offsets. Positions are
// never exactly equal within a group: only there is the host's order not a function of the
// positions. Without a usable GPU every test prints "SKIPPED: no CUDA device" and the program
// returns 77 (CTest: skipped).
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "gpu/device_buffer.cuh"
#include "gpu/subtree_order_cuda.cuh"
#include "support/clustered_particles.hpp"
#include "support/gpu_skip.hpp"
#include "tree/orb_tree.hpp"

using namespace orbis;

namespace {

template <typename T>
void upload_to(gpu::DeviceArray<T>& dev, const std::vector<T>& host) {
  dev.ensure(std::max<std::size_t>(host.size(), 1));
  if (!host.empty())
    ORBIS_CUDA_CHECK(cudaMemcpy(dev.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
}

// The device order of these positions and groups (x | y | z arrays uploaded apart).
std::vector<std::uint32_t> device_order(const std::vector<Vec3d>& pos, const std::vector<std::int32_t>& group_of,
                                        std::int32_t n_groups, int max_leaf, std::vector<std::uint32_t>& offsets,
                                        std::size_t max_cub_items = gpu::kCubMaxItems) {
  const std::size_t n = pos.size();
  std::vector<double> h[3];
  for (int d = 0; d < 3; ++d) {
    h[d].resize(n);
    for (std::size_t i = 0; i < n; ++i) h[d][i] = pos[i][d];
  }
  gpu::DeviceArray<double> x, y, z;
  gpu::DeviceArray<std::int32_t> g;
  gpu::DeviceArray<std::uint32_t> order;
  upload_to(x, h[0]);
  upload_to(y, h[1]);
  upload_to(z, h[2]);
  upload_to(g, group_of);
  order.ensure(std::max<std::size_t>(n, 1));
  gpu::subtree_order_by_group_cuda(x.data(), y.data(), z.data(), g.data(), n, n_groups, max_leaf, order.data(),
                                   offsets, nullptr, max_cub_items);
  std::vector<std::uint32_t> out(n);
  if (n > 0) ORBIS_CUDA_CHECK(cudaMemcpy(out.data(), order.data(), n * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
  return out;
}

// Both orders; mismatches counted, so a broken order reports a number, not 10^5 lines.
void compare_with_host(const std::vector<Vec3d>& pos, const std::vector<std::int32_t>& group_of,
                       std::int32_t n_groups, int max_leaf, std::size_t max_cub_items = gpu::kCubMaxItems) {
  CAPTURE(pos.size());
  CAPTURE(n_groups);
  CAPTURE(max_leaf);
  CAPTURE(max_cub_items);
  std::vector<std::uint32_t> host_offsets, dev_offsets;
  const auto host = OrbTree::subtree_order_by_group(pos, group_of, n_groups, max_leaf, host_offsets);
  const auto dev = device_order(pos, group_of, n_groups, max_leaf, dev_offsets, max_cub_items);
  CHECK(dev_offsets == host_offsets);
  REQUIRE(dev.size() == host.size());
  std::size_t bad = 0;
  for (std::size_t k = 0; k < host.size(); ++k) bad += dev[k] != host[k];
  CHECK(bad == 0);
}

// Group sizes that take every path (empty, one particle, a leaf, one over a leaf, several
// levels), then random sizes, for about n particles; group_of in a shuffled order.
std::vector<std::int32_t> varied_groups(std::size_t n, int max_leaf, std::uint64_t seed, std::int32_t& n_groups) {
  std::vector<std::size_t> sizes = {0, 1, static_cast<std::size_t>(max_leaf), static_cast<std::size_t>(max_leaf) + 1,
                                    0, 2, 3000, 4099, 1, 0};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> size(0, 300);
  std::size_t total = std::accumulate(sizes.begin(), sizes.end(), std::size_t{0});
  while (total < n) {
    sizes.push_back(std::min(size(rng), n - total));
    total += sizes.back();
  }
  std::vector<std::int32_t> group_of;
  for (std::size_t g = 0; g < sizes.size(); ++g) group_of.insert(group_of.end(), sizes[g], static_cast<std::int32_t>(g));
  group_of.resize(n);   // the first sizes may hold more than n
  std::shuffle(group_of.begin(), group_of.end(), rng);
  n_groups = static_cast<std::int32_t>(sizes.size()) + 3;   // and empty groups at the end
  return group_of;
}

// Groups as cells of a coarse grid (compact, of very uneven sizes in a clustered field, as
// the top tree's groups are), numbered in a scrambled order.
std::vector<std::int32_t> cell_groups(const std::vector<Vec3d>& pos, double box, int cells, std::int32_t& n_groups) {
  n_groups = cells * cells * cells;
  std::vector<std::int32_t> label(static_cast<std::size_t>(n_groups));
  std::iota(label.begin(), label.end(), 0);
  std::shuffle(label.begin(), label.end(), std::mt19937_64(11));
  std::vector<std::int32_t> group_of(pos.size());
  for (std::size_t i = 0; i < pos.size(); ++i) {
    int c[3];
    for (int d = 0; d < 3; ++d) c[d] = std::min(cells - 1, static_cast<int>(pos[i][d] / box * cells));
    group_of[i] = label[static_cast<std::size_t>((c[0] * cells + c[1]) * cells + c[2])];
  }
  return group_of;
}

}  // namespace

TEST_CASE("device subtree order equals the host's: uniform positions, groups of varied sizes") {
  test::require_gpu_or_skip();
  const auto pos = test::uniform_particles(60011, 100.0, 31);
  for (int max_leaf : {32, 7, 1}) {
    std::int32_t n_groups = 0;
    const auto group_of = varied_groups(pos.size(), max_leaf, 5 + static_cast<std::uint64_t>(max_leaf), n_groups);
    compare_with_host(pos, group_of, n_groups, max_leaf);
  }
}

TEST_CASE("device subtree order equals OrbTree::build of each group alone") {
  test::require_gpu_or_skip();
  // The independent check of what the host order means: group g's places hold the order a
  // tree of g's particles alone gives (top_levels 0).
  const auto pos = test::uniform_particles(20011, 100.0, 32);
  const int max_leaf = 16;
  std::int32_t n_groups = 0;
  const auto group_of = varied_groups(pos.size(), max_leaf, 6, n_groups);
  std::vector<std::uint32_t> offsets;
  const auto dev = device_order(pos, group_of, n_groups, max_leaf, offsets);
  REQUIRE(offsets.size() == static_cast<std::size_t>(n_groups) + 1);
  std::vector<std::vector<std::uint32_t>> members(static_cast<std::size_t>(n_groups));
  for (std::size_t i = 0; i < pos.size(); ++i) members[static_cast<std::size_t>(group_of[i])].push_back(static_cast<std::uint32_t>(i));
  std::size_t bad = 0;
  for (std::size_t g = 0; g < members.size(); ++g) {
    const std::vector<std::uint32_t>& m = members[g];
    CHECK(offsets[g + 1] - offsets[g] == m.size());
    if (m.empty()) continue;
    std::vector<Vec3d> alone(m.size());
    for (std::size_t k = 0; k < m.size(); ++k) alone[k] = pos[m[k]];
    OrbTree tree;
    tree.build(alone, max_leaf);
    for (std::size_t k = 0; k < m.size(); ++k) bad += dev[offsets[g] + k] != m[tree.order()[k]];
  }
  CHECK(bad == 0);
}

TEST_CASE("device subtree order equals the host's: clustered positions in compact groups") {
  test::require_gpu_or_skip();
  const double box = 100.0;
  const auto pos = test::clustered_particles(40, box, 3);
  std::int32_t n_groups = 0;
  const auto group_of = cell_groups(pos, box, 12, n_groups);
  compare_with_host(pos, group_of, n_groups, 32);
  compare_with_host(pos, group_of, n_groups, 5);
}

TEST_CASE("device subtree order equals the host's: coordinates with ties") {
  test::require_gpu_or_skip();
  const std::vector<Vec3d> grid = test::shuffled_tie_grid(4);
  std::int32_t n_groups = 0;
  {
    const auto groups = cell_groups(grid, 20.5, 5, n_groups);   // sets n_groups: before the call reads it
    compare_with_host(grid, groups, n_groups, 8);
  }
  {
    const auto groups = varied_groups(grid.size(), 8, 9, n_groups);   // sets n_groups: before the call reads it
    compare_with_host(grid, groups, n_groups, 8);
  }
  // Ties on x alone (y and z random): the lexicographic sorts on one axis only.
  auto ties_x = test::uniform_particles(30000, 100.0, 33);
  for (std::size_t i = 0; i < ties_x.size(); ++i) ties_x[i].x = static_cast<double>(i % 97);
  {
    const auto groups = varied_groups(ties_x.size(), 16, 10, n_groups);   // sets n_groups: before the call reads it
    compare_with_host(ties_x, groups, n_groups, 16);
  }
  // -0.0 and +0.0 on one axis: equal to the host's comparisons.
  auto zeros = test::uniform_particles(5000, 10.0, 34);
  for (std::size_t i = 0; i < zeros.size(); i += 3) zeros[i].z = i % 2 ? -0.0 : 0.0;
  {
    const auto groups = varied_groups(zeros.size(), 4, 11, n_groups);   // sets n_groups: before the call reads it
    compare_with_host(zeros, groups, n_groups, 4);
  }
}

TEST_CASE("device subtree order with CUB calls limited to 1000 items (the path beyond 2^31 items)") {
  test::require_gpu_or_skip();
  const auto pos = test::clustered_particles(24, 100.0, 5);
  std::int32_t n_groups = 0;
  const auto group_of = cell_groups(pos, 100.0, 6, n_groups);
  compare_with_host(pos, group_of, n_groups, 7, 1000);
}

TEST_CASE("device subtree order: no particles, one group, a group index out of range") {
  test::require_gpu_or_skip();
  std::vector<std::uint32_t> offsets;
  CHECK(device_order({}, {}, 4, 8, offsets).empty());
  CHECK(offsets == std::vector<std::uint32_t>(5, 0));
  CHECK(device_order({}, {}, 0, 8, offsets).empty());
  CHECK(offsets == std::vector<std::uint32_t>{0});

  const auto pos = test::uniform_particles(4097, 10.0, 35);
  compare_with_host(pos, std::vector<std::int32_t>(pos.size(), 0), 1, 32);
  compare_with_host(pos, std::vector<std::int32_t>(pos.size(), 2), 3, 4100);   // one leaf

  std::vector<std::int32_t> group_of(pos.size(), 1);
  group_of[17] = 5;
  CHECK_THROWS_AS(device_order(pos, group_of, 5, 8, offsets), Error);
  CHECK_THROWS_AS(device_order(pos, std::vector<std::int32_t>(pos.size(), 0), 1, 0, offsets), Error);
}
