// Particles to the ranks holding their mesh slab and values back: the PM and the P(k)
// estimator on a distributed mesh (pm/fft_mesh.hpp) whatever the particles' own domains.
//
// Each particle goes to the owner of the first plane of its stencil (window, shift) on the
// n-mesh; with ghost planes for the rest of the stencil (window order planes: enough for the
// half-cell-shifted interlaced mesh too, whose first plane is at most one further) the owner
// assigns and interpolates it alone. Volume per step and particle: its position there and
// its force back, 48 bytes, against 8 mesh cells per particle (the default mesh of 2N cells
// per side) x 4 bytes x (density + 3 force components) = 128 bytes for reducing partial meshes
// over particle domains instead.
//
// On one rank nothing moves: route() copies the positions, send_back() the values.
#pragma once
#include <cstdint>
#include <vector>

#include "core/comm.hpp"
#include "core/vec3.hpp"
#include "pm/mass_assignment.hpp"

namespace orbis {

// The first x plane of the stencil of a particle at x (Mpc/h, wrapped here) on the unshifted
// n-mesh, cells_per_length = n / box: floor(u) (CIC) or floor(u + 1/2) - 1 (TSC), as
// sort_for_mesh puts it, wrapped into [0, n). route() sends a particle to the owner of this
// plane, and so does the PM over ranks on the GPUs (gpu/pm_cuda_ranks.hpp): host and device code.
ORBIS_HD int stencil_first_plane(double x, double box_mpc_h, double cells_per_length, Window window, int n) {
  const bool tsc = window == Window::tsc;
  return wrap_mesh_index(floor_to_int(cell_coordinate(x, box_mpc_h, cells_per_length, tsc ? 0.5 : 0.0)) + (tsc ? -1 : 0),
                         n);
}

class SlabRouting {
 public:
  // Sends pos[i] to the rank owning its stencil's first plane; `received` gets the positions
  // this rank owns, by source rank, each source's in its order. Collective over comm.
  void route(const std::vector<Vec3d>& pos, double box_mpc_h, int n, Window window, const Comm& comm,
             std::vector<Vec3d>& received);
  // values[q] of received particle q back to its sender: out[i] for the caller's pos[i].
  // Collective over the route()'s comm.
  void send_back(const std::vector<Vec3d>& values, std::vector<Vec3d>& out) const;

 private:
  Comm comm_;
  bool routed_ = false;
  std::vector<std::size_t> send_counts_, recv_counts_;
  std::vector<std::uint32_t> order_;   // send slot -> caller's index
  mutable std::vector<Vec3d> buffer_;
};

}  // namespace orbis
