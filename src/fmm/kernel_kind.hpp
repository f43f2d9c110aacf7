// Which pair potential the FMM sums. Every operator that depends on it (the radial
// derivatives of M2L, fmm/kernel_derivatives.hpp; the pair factor of P2P, fmm/p2p_kernel.hpp)
// takes it as its one switch; the tree, the multipoles, L2L and L2P do not depend on it.
//   truncated  psi(r) = erfc(r/2r_s)/r: the short-range part of the periodic TreePM split;
//   newtonian  psi(r) = 1/r: the whole force of an isolated system (vacuum boundaries), the
//              truncated kernel's limit r_s -> infinity (T(x) = 1, no cut).
#pragma once

namespace orbis {

enum class KernelKind : int { truncated, newtonian };

}  // namespace orbis
