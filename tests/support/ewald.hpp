// Test-only exact periodic gravity (Ewald summation; Hernquist, Bouchet & Suto 1991), the
// independent reference for PM, FMM and TreePM forces. G = 1 and masses as given: multiply
// by G for physical units. The uniform neutralising background is included (the k = 0 mode
// is dropped), exactly as in a PM code with the mean density removed.
//
// The split parameter alpha is chosen so that the real-space sum needs only the minimal
// image (erfc(alpha L/2) ~ 1e-10) and the k-space sum runs to |h| <= 15; a target's
// acceleration costs O(N + N_k) once the structure factors are built (O(N N_k)), so a few
// thousand sampled targets of a 64^3 set take seconds. Relative accuracy ~1e-9.
#pragma once
#include <complex>
#include <vector>

#include "core/vec3.hpp"

namespace orbis::test {

class EwaldSum {
 public:
  EwaldSum(const std::vector<Vec3d>& positions, const std::vector<double>& masses, double box);

  // Periodic acceleration at x due to every source (a source at distance 0 is skipped, so a
  // particle's own position gives the force from all the others).
  Vec3d acceleration(const Vec3d& x) const;
  // Periodic potential at x (G = 1, so negative) of every source with the neutralising
  // background, a source at distance 0 excluded (its images included): a particle's own
  // position gives its potential in the field of all the others.
  double potential(const Vec3d& x) const;

 private:
  std::vector<Vec3d> pos_;
  std::vector<double> mass_;
  double box_, alpha_;
  std::vector<Vec3d> kvec_;                      // half of k-space (the other half is conjugate)
  std::vector<double> kfactor_;                  // 2 * 4 pi / L^3 exp(-k^2/4alpha^2) / k^2
  std::vector<std::complex<double>> structure_;  // S(k) = sum_j m_j exp(i k.x_j)
};

// Acceleration at the origin due to a unit mass at dx (G = 1), all periodic images.
Vec3d ewald_acceleration(const Vec3d& dx, double box);

// The periodic potential energy (1/2) sum_i m phi(x_i) of equal masses with the neutralising
// background, G included ((km/s)^2 times 1e10 Msun/h for masses in 1e10 Msun/h).
double ewald_potential_energy(const std::vector<Vec3d>& positions, double mass, double box);

// Every stride-th particle of a set of equal masses and its exact acceleration (G included,
// (km/s)^2/(Mpc/h) for masses in 1e10 Msun/h): the reference the TreePM tests compare with.
struct EwaldSample {
  std::vector<std::size_t> index;
  std::vector<Vec3d> acc;
};
EwaldSample ewald_sample(const std::vector<Vec3d>& positions, double mass, double box, std::size_t stride);

// Median, 99th percentile and max over the sample of |acc[i] - ref| / |ref|.
struct ForceErrors {
  double median, p99, max;
};
ForceErrors relative_force_errors(const std::vector<Vec3d>& acc, const EwaldSample& reference);

}  // namespace orbis::test
