// The global ORB top tree (domain/global_top_tree) against a serial OrbTree built on the
// gathered set: clustered particles split among the ranks in several ways (round robin,
// contiguous, all on rank 0, the last rank empty, shuffled), a count no rank count divides;
// every node of levels 0..d (index, parent, range, count, box bitwise, axis) and each
// particle's depth-d node (by its global index) must equal the serial tree's, for d = 0, 1,
// 3, 6 and a depth beyond the tree's. Also a set with many equal coordinates and equal
// positions: the nodes still equal (which equal particle goes where is not promised); a set
// of several blocks of the build's parallel passes per rank on 1, 2 and 3 threads (the
// build promises the same tree for any thread count). Bad input throws on every rank.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "domain/global_top_tree.hpp"
#include "support/clustered_particles.hpp"
#include "support/rank_shares.hpp"
#include "tree/orb_tree.hpp"

using orbis::Comm;
using orbis::GlobalTopNode;
using orbis::GlobalTopTree;
using orbis::OrbTree;
using orbis::TreeNode;
using orbis::Vec3d;

namespace {

bool bitwise(const Vec3d& a, const Vec3d& b) { return std::memcmp(&a, &b, sizeof(Vec3d)) == 0; }

// The split rule written out again (tree/split_axis.hpp): above the top depth the lowest
// axis whose side is at least 98% of the longest, at and below it the longest, ties low.
int plain_split_axis(const Vec3d& lo, const Vec3d& hi, int depth, int top_levels) {
  const double w[3] = {hi.x - lo.x, hi.y - lo.y, hi.z - lo.z};
  if (depth < top_levels) {
    const double longest = std::max({w[0], w[1], w[2]});
    return w[0] >= 0.98 * longest ? 0 : (w[1] >= 0.98 * longest ? 1 : 2);
  }
  return w[1] > w[0] ? (w[2] > w[1] ? 2 : 1) : (w[2] > w[0] ? 2 : 0);
}

// Checks the collective tree of the set `all` (shared by `how`) against a serial tree.
void check(const std::vector<Vec3d>& all, const std::string& how, int max_leaf, int depth, bool check_particles,
           const Comm& world) {
  INFO(how << ", N = " << all.size() << ", max_leaf " << max_leaf << ", depth " << depth << ", " << world.size()
           << " ranks");
  const std::vector<std::size_t> ids = orbis::test::share_of(how, all.size(), world.size(), world.rank());
  std::vector<Vec3d> mine;
  for (std::size_t i : ids) mine.push_back(all[i]);
  const GlobalTopTree top = GlobalTopTree::build(mine, max_leaf, depth, world);

  OrbTree serial;   // the walk's top depth = the top tree's: the same rule above it
  serial.build(all, max_leaf, 1.0, OrbTree::kParallelMin, depth);
  const std::vector<TreeNode>& sn = serial.nodes();
  std::vector<std::int32_t> expected;   // serial nodes of depth <= d, by level then index
  for (const auto& level : serial.levels())
    for (std::int32_t k : level)
      if (sn[static_cast<std::size_t>(k)].depth <= depth) expected.push_back(k);
  CHECK(top.n_total() == static_cast<std::int64_t>(all.size()));
  REQUIRE(top.nodes().size() == expected.size());
  int wrong = 0;
  for (std::size_t q = 0; q < expected.size(); ++q) {
    const GlobalTopNode& g = top.nodes()[q];
    const TreeNode& s = sn[static_cast<std::size_t>(expected[q])];
    const bool split = s.depth < depth && !s.is_leaf();
    const bool ok = g.index == expected[q] && g.parent == s.parent && g.depth == s.depth && g.first == s.first &&
                    g.count == s.count && bitwise(g.lo, s.lo) && bitwise(g.hi, s.hi) &&
                    g.axis == plain_split_axis(s.lo, s.hi, s.depth, depth) && g.split == split;
    // The axis also separates the serial children: the left one's members lie below.
    const bool separates = s.is_leaf() || sn[static_cast<std::size_t>(s.left)].hi[g.axis] <=
                                              sn[static_cast<std::size_t>(s.right)].lo[g.axis];
    if (!ok || !separates) ++wrong;
  }
  CHECK(wrong == 0);

  // Each particle's node at depth d (or its leaf above it), by global index.
  std::vector<std::int32_t> node_of(all.size(), -1);
  for (std::int32_t k : expected) {
    const TreeNode& s = sn[static_cast<std::size_t>(k)];
    if (s.depth == depth || s.is_leaf())
      for (std::uint32_t t = s.first; t < s.first + s.count; ++t) node_of[serial.order()[t]] = k;
  }
  REQUIRE(top.particle_node().size() == ids.size());
  if (check_particles) {
    int misplaced = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) misplaced += top.particle_node()[i] != node_of[ids[i]];
    CHECK(misplaced == 0);
  }
  // Every way: the particles placed in each final node add up to its count over the ranks.
  std::map<std::int32_t, std::size_t> slot;
  std::vector<std::int64_t> placed;
  for (const GlobalTopNode& g : top.nodes())
    if (!g.split) slot[g.index] = placed.size(), placed.push_back(0);
  int unknown = 0;
  for (std::int32_t k : top.particle_node()) {
    const auto it = slot.find(k);
    if (it == slot.end()) ++unknown;
    else ++placed[it->second];
  }
  CHECK(unknown == 0);
  world.reduce(placed, Comm::Op::sum);
  int miscounted = 0;
  for (const GlobalTopNode& g : top.nodes())
    if (!g.split) miscounted += placed[slot[g.index]] != static_cast<std::int64_t>(g.count);
  CHECK(miscounted == 0);
}

const char* const kWays[] = {"round robin", "contiguous", "all on rank 0", "last rank empty", "shuffled"};

}  // namespace

TEST_CASE("The global top tree equals the serial ORB tree's top levels, for any sharing among the ranks") {
  const Comm world = Comm::world();
  std::vector<Vec3d> all = orbis::test::clustered_particles(20, 50.0, 5);
  all.resize(7001);   // 2 and 3 do not divide it
  for (const char* how : kWays)
    for (int depth : {0, 1, 3, 6, 40}) check(all, how, 16, depth, true, world);
  // Leaves above the requested depth stop there; tiny sets; one particle.
  for (const char* how : {"round robin", "last rank empty"}) {
    check(all, how, 1000, 6, true, world);
    check(std::vector<Vec3d>(all.begin(), all.begin() + 37), how, 3, 40, true, world);
    check(std::vector<Vec3d>(all.begin(), all.begin() + 1), how, 1, 3, true, world);
  }
}

TEST_CASE("The global top tree with equal coordinates and equal positions") {
  const Comm world = Comm::world();
  // Snapped to a grid of 8 per side (ties on every axis, many exact duplicates; the
  // selection runs through all 192 bits), with negative and zero coordinates too.
  std::vector<Vec3d> all = orbis::test::uniform_particles(3001, 8.0, 11);
  for (Vec3d& x : all) x = Vec3d{std::floor(x.x) - 3.0, std::floor(x.y), std::floor(x.z) * 0.5};
  for (const char* how : kWays)
    for (int depth : {1, 3, 6, 40}) check(all, how, 4, depth, false, world);
  // Distinct positions with shared coordinates: each particle's node is promised again.
  for (std::size_t i = 0; i < all.size(); ++i) all[i].z += 1e-3 * static_cast<double>(i);
  for (const char* how : kWays) check(all, how, 4, 6, true, world);
}

TEST_CASE("The global top tree is the same for any thread count, over several blocks of members") {
  // The other cases hold fewer members per rank than one block of the build's parallel
  // passes (2^15) and the MPI tests run one thread per rank: here up to 4 blocks a rank, on
  // 1, 2 and 3 threads (per-thread histograms and boxes, lists concatenated in block order),
  // against the serial tree every time.
  const Comm world = Comm::world();
  const std::vector<Vec3d> all = orbis::test::clustered_particles(48, 50.0, 9);   // 110592
  const int saved_threads = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    INFO(threads << " threads");
    for (const char* how : {"all on rank 0", "shuffled"}) check(all, how, 16, 9, true, world);
  }
  omp_set_num_threads(saved_threads);
}

TEST_CASE("The global top tree refuses bad input on every rank") {
  const Comm world = Comm::world();
  const std::vector<Vec3d> one{Vec3d{1, 2, 3}};
  CHECK_THROWS_WITH_AS(GlobalTopTree::build(one, 0, 3, world), doctest::Contains("max_leaf"), orbis::Error);
  CHECK_THROWS_WITH_AS(GlobalTopTree::build(one, 4, -1, world), doctest::Contains("depth"), orbis::Error);
  CHECK_THROWS_WITH_AS(GlobalTopTree::build({}, 4, 3, world), doctest::Contains("no particles"), orbis::Error);
}

// The cost at scale (not run by default: --no-skip, or -tc="*cost*"): 128^3 clustered,
// contiguous shares, depth 9, against one serial build on rank 0.
TEST_CASE("The global top tree's cost at 128^3" * doctest::skip()) {
  const Comm world = Comm::world();
  const std::vector<Vec3d> all = orbis::test::clustered_particles(128, 1000.0, 5);
  const std::vector<std::size_t> ids = orbis::test::share_of("contiguous", all.size(), world.size(), world.rank());
  std::vector<Vec3d> mine;
  for (std::size_t i : ids) mine.push_back(all[i]);
  for (int depth : {3, 6, 9}) {
    world.barrier();
    orbis::Stopwatch watch;
    const GlobalTopTree top = GlobalTopTree::build(mine, 16, depth, world);
    world.barrier();
    const double t = watch.seconds();
    if (world.is_root())
      MESSAGE("collective top tree, depth " << depth << ": " << t << " s, " << top.rounds() << " rounds, "
                                            << top.nodes().size() << " nodes, " << world.size() << " ranks");
  }
  if (world.is_root()) {
    OrbTree serial;
    orbis::Stopwatch watch;
    serial.build(all, 16, 1.0, OrbTree::kParallelMin, 9);
    MESSAGE("serial OrbTree build (all levels) " << watch.seconds() << " s, of which top levels "
                                                 << serial.build_times().top << " s");
  }
}
