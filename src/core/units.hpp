// Internal units (GADGET convention, docs/design.md): length comoving Mpc/h, mass 1e10 Msun/h,
// velocity km/s, so time is (Mpc/h)/(km/s) = 977.8 Gyr/h and H0 = 100 in these units.
#pragma once

namespace orbis::units {

inline constexpr double G = 43.0071;          // (Mpc/h) (km/s)^2 / (1e10 Msun/h)
inline constexpr double H0 = 100.0;           // (km/s) / (Mpc/h)
inline constexpr double pi = 3.14159265358979323846;
// Critical density today, 3 H0^2 / (8 pi G), in (1e10 Msun/h) / (Mpc/h)^3 (= 27.754).
inline constexpr double rho_crit0 = 3.0 * H0 * H0 / (8.0 * pi * G);

}  // namespace orbis::units
