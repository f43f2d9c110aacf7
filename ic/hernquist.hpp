// The Hernquist (1990) sphere in equilibrium:
//   rho(r) = M a / (2 pi r (r + a)^3),  M(r) = M r^2 / (r + a)^2,  Phi(r) = -G M / (r + a),
// with its isotropic distribution function (Hernquist 1990, eq. 17), in q = sqrt(-E a / G M):
//   f(E) = M / (8 sqrt(2) pi^3 a^3 v_g^3) (1 - q^2)^(-5/2)
//          [3 asin q + q sqrt(1 - q^2) (1 - 2 q^2) (8 q^4 - 8 q^2 - 3)],  v_g = sqrt(G M / a).
// Positions by inverting M(r) (r = a sqrt(X) / (1 - sqrt(X))), velocities by rejection from
// v^2 f(Phi(r) + v^2/2) on [0, v_esc(r)], its bound found per radius. Returned in the
// centre-of-mass frame (SphereSettings::centre_of_mass_frame). Units: ic/isolated_system.hpp.
#pragma once
#include "ic/isolated_system.hpp"

namespace orbis {

// The default truncation (SphereSettings::r_max = 0): 100 a, which holds 98.0% of the mass.
inline constexpr double kHernquistDefaultRmaxOverA = 100.0;

IsolatedSystem make_hernquist(const SphereSettings& settings);

// The radius holding the mass fraction f (0 < f < 1) of the model: a truncation radius
// given as a mass fraction (SphereSettings::r_max).
double hernquist_radius_of_mass_fraction(double f, double a);

double hernquist_enclosed_mass(double r, double mass, double a);
double hernquist_potential(double r, double mass, double a, double g);
// The isotropic 1D velocity dispersion, the Jeans solution (Hernquist 1990, eq. 10).
double hernquist_dispersion2(double r, double mass, double a, double g);
// The distribution function's shape F(q) = f / (its constant prefactor), 0 <= q < 1:
// increasing, F ~ 128 q^5 / 5 for small q (a series there: the closed form cancels).
double hernquist_df_shape(double q);

}  // namespace orbis
