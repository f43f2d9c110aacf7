// The short-range step's counts that stay 32-bit are checked before any work
// (check_short_range_counts, fmm/short_range.hpp): arithmetic on the particle count and
// max_leaf alone, so the limits of runs of 10^9 particles and more are tested here without
// allocating anything. Each refusal names the count, its limit and the parameter that lowers
// it; each accepted size is one the GPU formats hold.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "fmm/short_range.hpp"
#include "fmm/tasks.hpp"
#include "tree/orb_tree.hpp"

using namespace orbis;

namespace {

std::string refusal(std::size_t particles, int max_leaf, ShortRangeGpu gpu) {
  try {
    check_short_range_counts(particles, max_leaf, gpu);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::size_t cube(std::size_t side) { return side * side * side; }

}  // namespace

TEST_CASE("the ORB tree's 32-bit particle indices: at most 2^31 - 1 particles, on any backend") {
  CHECK(refusal(cube(1290), 64, ShortRangeGpu::none).empty());   // 2.147e9 < 2^31
  for (ShortRangeGpu gpu : {ShortRangeGpu::none, ShortRangeGpu::p2p, ShortRangeGpu::walk_and_p2p}) {
    const std::string m = refusal(cube(1291), 4096, gpu);
    CAPTURE(m);
    CHECK(m.find("2151685171 particles") != std::string::npos);
    CHECK(m.find("2147483647") != std::string::npos);
    CHECK(m.find("particles_per_side") != std::string::npos);
  }
  CHECK(!refusal(static_cast<std::size_t>(OrbTree::kMaxParticles) + 1, 32, ShortRangeGpu::none).empty());
  CHECK(refusal(static_cast<std::size_t>(OrbTree::kMaxParticles), 32, ShortRangeGpu::none).empty());
}

TEST_CASE("the GPU's packed P2P leaf index: at most 2^26 leaves, naming the max_leaf that would do") {
  // 2^31 - 1 particles in leaves of <= 32: 2^26 leaves exactly, the most the format holds.
  const auto n = static_cast<std::size_t>(OrbTree::kMaxParticles);
  REQUIRE(OrbTree::subtree_leaves(static_cast<std::int64_t>(n), 32) == static_cast<std::int64_t>(kMaxPackedLeaves));
  CHECK(refusal(n, 32, ShortRangeGpu::p2p).empty());
  // Leaves of <= 31: 2^27 - 1 leaves.
  const std::string m = refusal(n, 31, ShortRangeGpu::p2p);
  CAPTURE(m);
  CHECK(m.find("134217727 tree leaves") != std::string::npos);
  CHECK(m.find("at most 67108864 leaves") != std::string::npos);
  CHECK(m.find("[gravity] max_leaf (62 would do)") != std::string::npos);
  CHECK(refusal(n, 62, ShortRangeGpu::p2p).empty());
  // All on the CPU: no packed format, no limit on leaves.
  CHECK(refusal(n, 1, ShortRangeGpu::none).empty());
}

TEST_CASE("the GPU walk's 32-bit offsets: planned P2P entries within one launch's limit") {
  // 1024^3 particles at the default max_leaf = 32: 2^25 leaves, 96 entries each = 3.2e9 < 2^32.
  const std::size_t n = cube(1024);
  CHECK(OrbTree::subtree_leaves(static_cast<std::int64_t>(n), 32) == std::int64_t{1} << 25);
  CHECK(refusal(n, 32, ShortRangeGpu::walk_and_p2p).empty());
  // 1280^3 at max_leaf = 32: 2^26 leaves fit the packed format (host walk, GPU P2P), but
  // 6.4e9 planned entries exceed what one launch of the device walk places.
  const std::size_t big = cube(1280);
  CHECK(refusal(big, 32, ShortRangeGpu::p2p).empty());
  const std::string m = refusal(big, 32, ShortRangeGpu::walk_and_p2p);
  CAPTURE(m);
  CHECK(m.find("67108864 tree leaves") != std::string::npos);
  CHECK(m.find("P2P entries for the GPU walk") != std::string::npos);
  CHECK(m.find("4294967295") != std::string::npos);
  CHECK(m.find("[gravity] max_leaf (64 would do)") != std::string::npos);
  CHECK(refusal(big, 64, ShortRangeGpu::walk_and_p2p).empty());
}
