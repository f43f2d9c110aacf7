// The short-range pairs' share of the potential energy diagnostic (integrate/energy.hpp):
//   sum over pairs i < j closer than the cut (minimal image) of psi(r_ij),
//   psi = erfc(s / 2r_s) / s, s^2 = r^2 + eps^2,
// the potential of the P2P force (p2p_pair_potential: same cut, same softening), so that the
// pairs' energy is -G m^2 times the sum. Every pair within the cut is summed directly (no
// multipoles), over a chaining mesh: cells of side >= cut / reach, so that a particle's
// partners lie within `reach` cells of its own. Each pair is taken once, by the particle
// whose cell comes first in the half stencil (or, in one cell, the lower index); each
// particle's sum is formed in a fixed order and the particles' sums are added in cell order
// (on the GPU in fixed blocks of it), so the result does not depend on the thread count.
// P2PEvaluator::pair_potential_sum runs it on the CPU (this file) or the GPU
// (gpu/pair_energy_cuda.cuh, which also builds the mesh on the device from device positions).
//
// Over several ranks (CPU and GPU alike) a rank sums the pairs of its own particles with each other
// and with its ghosts, the other ranks' particles within the cut (the last `ghosts`
// positions); a ghost's pairs with other ghosts belong to other ranks. A pair of particles on
// two ranks is seen by both, and exactly one takes it: the rank whose particle comes first in
// (x, y, z) order (ghost_pair_weight; the same bits on both ranks, so both decide alike), half
// each on the measure-zero tie of equal positions. Summed over the ranks, every pair within
// the cut counts once, as on one rank.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/hostdevice.hpp"
#include "core/vec3.hpp"

namespace orbis {

struct PairPotentialInput {
  const std::vector<Vec3d>* positions = nullptr;   // Mpc/h, in [0, box)
  double box = 0;
  double r_s = 0;
  double cut = 0;         // pairs at r >= cut contribute nothing; cut < box / 2
  double softening = 0;   // Plummer-equivalent eps, Mpc/h
  std::size_t ghosts = 0; // the last `ghosts` positions are other ranks' particles
  // The shifted cut's a (1/(Mpc/h)^2, fmm/short_range.hpp cut_shift_of; 0: a sharp cut): the
  // pair potential of the shifted force, psi + a s - (psi + a s at the cut), zero at the cut.
  double cut_shift = 0;
};

// The shifted cut's per-pair terms: a s - offset, offset = erfc(s_c / 2r_s) / s_c + a s_c at
// s_c = sqrt(cut^2 + eps^2) (0 for a sharp cut), so that the pair potential vanishes where
// the force does.
struct CutShiftTerms {
  double a = 0, offset = 0;
};
CutShiftTerms cut_shift_terms(const PairPotentialInput& in);

// The share of the pair of this rank's particle at `own` and another rank's at `ghost` that
// this rank takes: 1 when `own` comes first in (x, y, z) order, 0 when `ghost` does, 1/2 for
// equal positions. The other rank, asking with the roles swapped, takes the rest.
ORBIS_HD double ghost_pair_weight(const Vec3d& own, const Vec3d& ghost) {
  if (own.x != ghost.x) return own.x < ghost.x ? 1.0 : 0.0;
  if (own.y != ghost.y) return own.y < ghost.y ? 1.0 : 0.0;
  if (own.z != ghost.z) return own.z < ghost.z ? 1.0 : 0.0;
  return 0.5;
}

// The chaining mesh: reach 2 if the box holds at least 5 cells of side >= cut / 2, else
// reach 1 if it holds 3 of side >= cut (fewer would visit a cell twice), else one cell holds
// everything and every pair is tried with the minimal image.
struct ChainingShape {
  int side = 1, reach = 0;
};
// That shape for a box and a cut (an Error unless 0 < cut < box / 2): the host's mesh below
// and the device's (gpu/pair_energy_cuda.cuh) are made alike.
ChainingShape chaining_mesh_shape(double box, double cut);

struct ChainingMesh {
  int side = 1, reach = 0;
  std::vector<std::uint32_t> start;   // cell c holds order[start[c] .. start[c + 1])
  std::vector<std::uint32_t> order;   // particle indices, cell by cell, ascending in each

  ChainingMesh(const std::vector<Vec3d>& pos, double box, double cut);
};

// A coordinate's cell along one axis (host and device).
ORBIS_HD int chaining_cell(double x, double box, int side) {
  const int c = static_cast<int>(x / box * side);
  return c < 0 ? 0 : (c >= side ? side - 1 : c);
}
// A neighbouring cell's index along one axis, and the shift that brings its particles next
// to the particle's own cell (their periodic image within the cut).
ORBIS_HD int chaining_neighbour(int c, int side, double box, double& shift) {
  shift = c < 0 ? -box : (c >= side ? box : 0.0);
  return c < 0 ? c + side : (c >= side ? c - side : c);
}
// True for the offsets of the half stencil (the other half takes the pair).
ORBIS_HD bool chaining_forward(int di, int dj, int dk) {
  return di > 0 || (di == 0 && (dj > 0 || (dj == 0 && dk > 0)));
}

// The sum on the CPU (OpenMP): this rank's share of it, with ghosts.
double pair_potential_sum_cpu(const PairPotentialInput& in);

}  // namespace orbis
