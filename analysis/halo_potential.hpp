// The minimum-potential member of a group: the halo centre GADGET-4 writes as GroupPos.
//
// Potential of member i from the group's own members (all of equal mass m):
//   phi_i = -G m S_i,  S_i = sum_{j != i} K(r_ij),  K(r) = 1 / sqrt(r^2 + eps^2),
// r_ij the minimum-image separation and eps the run's Plummer-equivalent softening: the
// Plummer kernel is the one orbis's own short-range forces use (fmm/p2p_kernel.hpp), so the
// centre is the bottom of the potential well the run's particles move in. (GADGET-4 softens
// with its cubic spline of the same Plummer-equivalent length; the two differ only within
// ~2.8 eps, a fraction of one mean spacing.) The minimum of phi is the maximum of S; ties go
// to the smallest ID.
//
// Definition of the computed value (what "exact" means below): member positions are taken
// relative to the group's first member (smallest ID), y_j = minimum image of x_j - x_first;
// when the group spans less than half the box on every axis, r_ij = |y_j - y_i| (then the
// minimum image itself), otherwise the minimum image of y_j - y_i. S_i is summed over j in
// member order, in four interleaved partial sums (j mod 4) added as (s0 + s1) + (s2 + s3).
// So S_i depends on the members and their order only: the same for any thread or rank count.
//
// Cost: groups of up to `direct_max` members (and groups spanning half the box or more) are
// summed directly, O(n^2). Larger groups prune candidates with an octree over the members
// (leaves of <= 8): for the members of one leaf, a node far enough (b + b_leaf < theta d)
// enters as its monopole n K(|y_i - c|) about its centre of mass c, with the remainder
// bounded rigorously (Taylor to second order about c: the linear term vanishes about c, and
// the Hessian of K has norm <= 2 / (r^2 + eps^2)^(3/2)):
//   |sum_{j in node} K(r_ij) - n K(|y_i - c|)| <= Q / (r_min^2 + eps^2)^(3/2),
// Q = sum |y_j - c|^2, b = max |y_j - c|, r_min = d - b_leaf - b; near leaves are summed
// exactly. With that bound E_i (plus margins for rounding, relative (n + 64) 4 u) every
// member whose upper bound falls below the largest lower bound cannot be the maximum; the
// survivors are bounded again with half the opening angle (0.4, 0.2, 0.1, 0.05), and the
// last ones (<= 32, or all after theta = 0.05) get the exact S_i above. The result is
// therefore bitwise the direct method's. Measured (this VM, one core, busy): 1e5 members
// take ~6 s (NFW-like cusp) to ~9-14 s (cored Plummer), where the direct sums would take
// ~70 s (7 ns a pair); 6000 members ~0.1 s against 0.25 s. Threads share the leaves.
#pragma once
#include <cstdint>
#include <vector>

#include "core/vec3.hpp"

namespace orbis::halo {

// Groups up to this size are summed directly: the octree path is faster above ~1000-1500
// members (Plummer and NFW-like groups, one core).
inline constexpr std::uint32_t kPotentialDirectMax = 1024;

struct PotentialMinimum {
  std::uint32_t member = 0;   // index into the group's member list
  double sum = 0;             // S of that member, (Mpc/h)^-1: phi = -G m sum
};

// The member (of `members[0..len)`, indices into pos/id) with the largest S (see above).
// Uses OpenMP threads over members when the octree path runs: call it from outside a
// parallel region for large groups. softening_mpc_h >= 0.
PotentialMinimum potential_minimum(const std::vector<Vec3d>& pos, const std::vector<std::uint64_t>& id,
                                   const std::uint32_t* members, std::uint32_t len, double box_mpc_h,
                                   double softening_mpc_h, std::uint32_t direct_max = kPotentialDirectMax);

}  // namespace orbis::halo
