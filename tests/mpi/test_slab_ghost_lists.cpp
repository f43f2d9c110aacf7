// The ghost-plane lists of pm/slab_ghost_lists.hpp (what the PM over ranks on the GPUs,
// gpu/pm_cuda_ranks.hpp, stages through pinned memory) against FftMesh's own ghost-plane
// exchange, on host arrays: adding the ghost planes into their owners and fetching the
// owners' values through the lists gives exactly FftMesh::add_ghost_planes' and
// fetch_ghost_planes' planes, for mesh sides that the ranks do not divide, slabs thinner
// than the ghost planes (planes owned twice) and ranks with no plane. And the routing rule
// with these ghost planes: every node of the stencil of a particle routed to the owner of
// stencil_first_plane (pm/slab_routing.hpp), on the meshes shifted by 1/8, 1/4 and 5/8 cell
// (pm/pm_modes.hpp's long_range_mesh_shift), lies in its owner's slab or ghost planes.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <vector>

#include "core/comm.hpp"
#include "pm/fft_mesh.hpp"
#include "pm/mass_assignment.hpp"
#include "pm/pm_modes.hpp"
#include "pm/slab_ghost_lists.hpp"
#include "pm/slab_routing.hpp"

using orbis::Comm;

TEST_CASE("ghost-plane lists move the planes FftMesh's exchange moves, in its order") {
  const Comm world = Comm::world();
  for (int n : {4, 6, 8, 20, 32})
    for (int wanted : {2, 3}) {
      INFO("n = " << n << ", " << wanted << " ghost planes, " << world.size() << " ranks");
      orbis::FftMesh<double> mesh(n, world, orbis::FftPlan::reproducible, 1, wanted);
      const orbis::SlabGhostLists lists = orbis::slab_ghost_lists(n, world.size(), world.rank(), wanted);
      const int nx = mesh.local_nx(), held = mesh.held_planes();
      CHECK(lists.ghost_planes.size() == static_cast<std::size_t>(mesh.ghost_planes()));
      const std::size_t plane = static_cast<std::size_t>(n) * mesh.nz_padded();
      double* data = mesh.real_data();
      // Distinct integers in every held plane (exact in any order of addition).
      for (int p = 0; p < held; ++p)
        for (std::size_t e = 0; e < plane; ++e)
          data[p * plane + e] = static_cast<double>(1000000 * world.rank() + 1000 * p + static_cast<int>(e % 997));
      std::vector<double> copy(data, data + static_cast<std::size_t>(held) * plane);

      // Add: ghost planes to their owners through the lists.
      mesh.add_ghost_planes();
      std::vector<double> send;
      for (int p : lists.ghost_planes) send.insert(send.end(), copy.begin() + p * plane, copy.begin() + (p + 1) * plane);
      std::vector<std::size_t> counts(lists.ghost_counts);
      for (std::size_t& c : counts) c *= plane;
      const std::vector<double> got = world.alltoallv(send, counts);
      CHECK(got.size() == lists.owned_planes.size() * plane);
      for (std::size_t k = 0; k < lists.owned_planes.size(); ++k)
        for (std::size_t e = 0; e < plane; ++e) copy[lists.owned_planes[k] * plane + e] += got[k * plane + e];
      bool same = true;
      for (std::size_t e = 0; e < static_cast<std::size_t>(nx) * plane; ++e) same = same && copy[e] == data[e];
      CHECK(world.all(same));

      // Fetch: the owners' planes into the ghost planes through the lists.
      mesh.fetch_ghost_planes();
      send.clear();
      for (int p : lists.owned_planes) send.insert(send.end(), copy.begin() + p * plane, copy.begin() + (p + 1) * plane);
      counts = lists.owned_counts;
      for (std::size_t& c : counts) c *= plane;
      const std::vector<double> back = world.alltoallv(send, counts);
      CHECK(back.size() == lists.ghost_planes.size() * plane);
      for (std::size_t k = 0; k < lists.ghost_planes.size(); ++k)
        for (std::size_t e = 0; e < plane; ++e) copy[lists.ghost_planes[k] * plane + e] = back[k * plane + e];
      same = true;
      for (std::size_t e = 0; e < static_cast<std::size_t>(held) * plane; ++e) same = same && copy[e] == data[e];
      CHECK(world.all(same));
    }
}

TEST_CASE("a routed particle's stencil on every shifted mesh lies in its owner's slab and ghost planes") {
  const double box = 10.0;
  for (int ranks = 1; ranks <= 5; ++ranks)
    for (int n : {4, 6, 8, 16})
      for (orbis::Window window : {orbis::Window::cic, orbis::Window::tsc}) {
        INFO(ranks << " ranks, n = " << n << ", " << orbis::window_name(window));
        const int order = orbis::window_order(window);
        const double cells_per_length = n / box;
        int outside = 0;
        for (int k = -3; k <= 40 * n + 3; ++k) {
          // Coordinates at and around every plane and half plane, and just outside the box.
          const double x = (k / 40.0) * box / n + (k % 3 == 0 ? 1e-12 : 0.0) - (k % 5 == 0 ? 1e-12 : 0.0);
          const int first = orbis::stencil_first_plane(x, box, cells_per_length, window, n);
          const int owner = orbis::slab_owner(first, n, ranks);
          const orbis::SlabPlanes slab = orbis::slab_planes(n, ranks, owner);
          const int held = slab.count + orbis::ghost_plane_count(n, slab, order);
          for (double shift : {orbis::long_range_mesh_shift(false, 0), orbis::long_range_mesh_shift(true, 0),
                               orbis::long_range_mesh_shift(true, 1)}) {
            int base = 0;
            double w[3];
            orbis::window_weights(window, orbis::cell_coordinate(x, box, cells_per_length, shift), base, w);
            for (int a = 0; a < order; ++a) {
              int local = orbis::wrap_mesh_index(orbis::wrap_mesh_index(base + a, n), n) - slab.first;
              if (local < 0) local += n;
              if (local >= held) ++outside;
            }
          }
        }
        CHECK(outside == 0);
      }
}
