// The Plummer sphere in equilibrium (Plummer 1911; Aarseth, Henon & Wielen 1974):
//   rho(r) = 3 M / (4 pi a^3) (1 + r^2/a^2)^(-5/2),  M(r) = M r^3 / (r^2 + a^2)^(3/2),
//   Phi(r) = -G M / sqrt(r^2 + a^2),  isotropic f(E) proportional to (-E)^(7/2).
// Positions by inverting M(r) (r = a / sqrt(X^(-2/3) - 1), X uniform), velocities by
// rejection from f: with q = v / v_esc(r), P(q) is proportional to q^2 (1 - q^2)^(7/2).
// Returned in the centre-of-mass frame (SphereSettings::centre_of_mass_frame). Units:
// ic/isolated_system.hpp.
#pragma once
#include "ic/isolated_system.hpp"

namespace orbis {

// SphereSettings::r_max = 0: no truncation (the largest radius of N particles is then
// about a N^(1/3); 1e-6 of the mass lies beyond 100 a).
IsolatedSystem make_plummer(const SphereSettings& settings);

// The model's enclosed mass, potential and isotropic 1D velocity dispersion (the Jeans
// solution sigma^2 = G M / (6 sqrt(r^2 + a^2))).
double plummer_enclosed_mass(double r, double mass, double a);
double plummer_potential(double r, double mass, double a, double g);
double plummer_dispersion2(double r, double mass, double a, double g);

}  // namespace orbis
