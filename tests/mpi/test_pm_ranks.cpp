// The PM across ranks: particles spread over the ranks with no regard to the slabs (so every
// one travels to its slab's owner and its force back), against the one-rank solver on all of
// them (computed by each rank alone). Long range (TSC, CIC) and PM-only (two interlaced
// meshes), float and double meshes, mesh sides that the rank count does not divide, slabs
// thinner than the stencil (ghost planes across two ranks), a rank with no plane, and a rank
// with no particle. The forces must be BITWISE the one-rank solver's (fixed-point assignment,
// reproducible transforms: pm_solver.hpp, "Determinism").
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/comm.hpp"
#include "pm/pm_solver.hpp"
#include "support/clustered_particles.hpp"

using orbis::Comm;
using orbis::Vec3d;

namespace {

// Local particles whose force is not bitwise the reference's, over all ranks.
std::uint64_t bitwise_differences(const std::vector<Vec3d>& a, const std::vector<Vec3d>& ref,
                                  const std::vector<std::size_t>& index, const Comm& comm) {
  std::uint64_t differ = 0;
  for (std::size_t q = 0; q < index.size(); ++q)
    if (std::memcmp(&a[q], &ref[index[q]], sizeof(Vec3d)) != 0) ++differ;
  return comm.sum(differ);
}

struct Case {
  int mesh;
  orbis::Window window;
  bool pm_only;
  bool double_mesh;
  bool empty_last_rank;   // the last rank holds no particle
};

}  // namespace

TEST_CASE("distributed PM forces are bitwise the one-rank PM's") {
  const Comm world = Comm::world();
  const double box = 50.0;
  const std::vector<Vec3d> all = orbis::test::clustered_particles(12, box, 31);
  const Case cases[] = {
      {20, orbis::Window::tsc, false, true, false},   // 20 planes on 3 ranks: 7, 7, 6
      {24, orbis::Window::cic, false, true, true},
      {16, orbis::Window::tsc, true, true, false},    // PM-only, two meshes
      {6, orbis::Window::tsc, false, true, false},    // 2 planes per rank, 3 ghost planes
      {4, orbis::Window::tsc, true, true, false},     // 3 ranks: 2, 2 and 0 planes
      {20, orbis::Window::tsc, false, false, false},  // float mesh
      {24, orbis::Window::cic, false, false, true},   // float, CIC, a rank without particles
      {18, orbis::Window::cic, true, false, false},   // PM-only, float, CIC
      {4, orbis::Window::tsc, true, false, false},    // PM-only, float, a rank with no plane
      {4, orbis::Window::cic, false, false, false},   // long range, float, a rank with no plane
  };
  for (const Case& c : cases) {
    const std::string label = "mesh " + std::to_string(c.mesh) + " " + orbis::window_name(c.window) +
                              (c.pm_only ? " pm-only " : " long range ") + (c.double_mesh ? "double" : "float") + ", " +
                              std::to_string(world.size()) + " ranks";
    INFO(label);
    orbis::PmSettings s;
    s.box_mpc_h = box;
    s.grid_side = c.mesh;
    s.window = c.window;
    s.r_s_mpc_h = c.pm_only ? 0.0 : 1.25 * box / c.mesh;
    s.double_mesh = c.double_mesh;
    // Particle i lives on rank (7 i) mod P: every rank holds particles from all over the box.
    const int ranks = c.empty_last_rank && world.size() > 1 ? world.size() - 1 : world.size();
    std::vector<Vec3d> mine;
    std::vector<std::size_t> index;
    for (std::size_t i = 0; i < all.size(); ++i)
      if (static_cast<int>((7 * i) % ranks) == world.rank()) mine.push_back(all[i]), index.push_back(i);
    std::vector<Vec3d> ref, acc;
    orbis::PmSolver(s, Comm::self()).accelerations(all, 0.7, ref);
    orbis::PmSolver distributed(s, world);
    distributed.accelerations(mine, 0.7, acc);
    CHECK(acc.size() == mine.size());
    CHECK(bitwise_differences(acc, ref, index, world) == 0);
    // A second step on the same solver (buffers reused) with the particles moved.
    for (Vec3d& x : mine) x.x = std::fmod(x.x + 3.3, box);
    std::vector<Vec3d> moved = all;
    for (Vec3d& x : moved) x.x = std::fmod(x.x + 3.3, box);
    orbis::PmSolver(s, Comm::self()).accelerations(moved, 0.7, ref);
    distributed.accelerations(mine, 0.7, acc);
    CHECK(bitwise_differences(acc, ref, index, world) == 0);
  }
}
