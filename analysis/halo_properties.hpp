// Properties of friends-of-friends groups (one HaloProperties per group, same order):
//
//   len, mass        members, and members x particle mass (1e10 Msun/h)
//   pos              the minimum-potential member's position (GADGET-4's GroupPos; potential of
//                    the group's own members, softened: halo_potential.hpp), comoving Mpc/h
//   min_pot_id       that member's particle ID
//   cm               centre of mass, comoving Mpc/h in [0, box): members unwrapped across the
//                    periodic boundary relative to the first member (smallest ID)
//   vel_pec          mean peculiar velocity v = p / a, km/s (Particles hold p = a^2 dx/dt)
//   vel_disp         1D peculiar velocity dispersion sqrt(sum |v - mean|^2 / (3 len)), km/s
//   m/r_crit200      spherical overdensity around pos (as GADGET-4) with all particles (not only
//   m/r_mean200      members): M(<R) = 200 rho_ref (4/3) pi R^3, with comoving references
//                    rho_crit,com(a) = rho_crit(a) a^3 = rho_crit0 E(a)^2 a^3 and
//                    rho_mean,com = omega_m rho_crit0. With the particles inside a search
//                    sphere sorted by radius r_1 <= r_2 <= ..., k the largest index whose
//                    enclosed density k m / ((4/3) pi r_k^3) reaches 200 rho_ref (the outermost
//                    crossing, immune to the Poisson noise of the first few particles):
//                    M = k m, R = (M / (200 rho_ref (4/3) pi))^(1/3), comoving Mpc/h. The
//                    search sphere is 1.25 x the radius holding the FoF mass at 200 rho_ref,
//                    doubled while the density at its edge is still above 200 rho_ref.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "analysis/fof.hpp"

namespace orbis {
class Cosmology;
}

namespace orbis::halo {

inline constexpr double kOverdensity = 200.0;

struct HaloProperties {
  std::uint32_t len = 0;
  double mass = 0;                  // 1e10 Msun/h
  Vec3d pos;                        // minimum-potential member, comoving Mpc/h
  std::uint64_t min_pot_id = 0;
  Vec3d cm;                         // centre of mass, comoving Mpc/h
  Vec3d vel_pec;                    // km/s
  double vel_disp = 0;              // km/s
  double m_crit200 = 0, r_crit200 = 0;   // 1e10 Msun/h, comoving Mpc/h
  double m_mean200 = 0, r_mean200 = 0;
};

// Comoving reference densities, (1e10 Msun/h) / (Mpc/h)^3.
double rho_crit_comoving(const Cosmology& cosmo, double a);
double rho_mean_comoving(const Cosmology& cosmo);

// Spherical overdensity mass and radius (outermost crossing, see above) from the squared
// distances to the centre of all particles within `search_radius` (sorted on return).
// Returns false when the enclosed density is still above `rho_threshold` at search_radius
// (a larger search is needed; mass and radius are then lower bounds).
bool spherical_overdensity(std::vector<double>& r2, double search_radius, double particle_mass,
                           double rho_threshold, double& mass, double& radius);

// Squared minimum-image distances from `centre` of every particle (pos, indexed by grid)
// within `radius`, appended to r2 after clearing it.
void sphere_distances(const fof::CellGrid& grid, const std::vector<Vec3d>& pos, const Vec3d& centre, double radius,
                      std::vector<double>& r2);

// The properties that need the members alone (len to vel_disp; the overdensity fields stay
// 0). softening_mpc_h: the Plummer-equivalent softening of the potential (halo_potential.hpp).
// Uses OpenMP threads over groups, and over members in groups above kPotentialDirectMax.
std::vector<HaloProperties> member_properties(const Particles& particles, const fof::FofGroups& groups,
                                              double box_mpc_h, double a, double softening_mpc_h);

// For each sphere (centres[k], radii[k]): r2[k] = the squared distances of every particle
// of the set within it, in any order.
using SphereQuery = std::function<void(const std::vector<Vec3d>& centres, const std::vector<double>& radii,
                                       std::vector<std::vector<double>>& r2)>;
// The overdensity fields (m/r_crit200, m/r_mean200) of each halo around its pos,
// asking `query` for the particles around the centres.
void overdensity_masses(std::vector<HaloProperties>& haloes, double box_mpc_h, double particle_mass,
                        const Cosmology& cosmo, double a, const SphereQuery& query);

// Both for one set of particles (grid over all of them).
// Uses OpenMP threads over groups; results do not depend on the thread count.
std::vector<HaloProperties> compute_properties(const fof::CellGrid& grid, const Particles& particles,
                                               const fof::FofGroups& groups, const Cosmology& cosmo,
                                               double a, double softening_mpc_h);

}  // namespace orbis::halo
