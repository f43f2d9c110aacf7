// The homogeneous background and linear growth (SWIFT's cosmology.h plays this role).
//   E(a)^2 = omega_m a^-3 + omega_k a^-2 + omega_lambda a^(-3(1+w0)),  omega_k = 1 - omega_m - omega_lambda
//   H(a) = 100 E(a) km/s/(Mpc/h)
// Growth D1(a) and the second-order D2(a) come from integrating their ODEs in ln a (GSL,
// relative tolerance 1e-12) from a = 1e-6 in the matter era; both are tabulated and splined.
// D1(1) = 1; D2 is scaled with D1, so D2 -> -3/7 D1^2 at early times (2LPT convention).
// Radiation is neglected, as GADGET-4 does.
#pragma once
#include <memory>
#include <vector>

namespace orbis {

class Params;

struct CosmologyParams {
  double omega_m = 0.3144;
  double omega_lambda = 0.6856;
  double w0 = -1.0;
};

// The background in force: [cosmology] omega_m, w0, and omega_lambda (1 - omega_m, flat,
// when the file does not set it).
CosmologyParams cosmology_params(const Params& params);

class Cosmology {
 public:
  explicit Cosmology(const CosmologyParams& p);
  static Cosmology from_params(const Params& params);
  ~Cosmology();
  Cosmology(const Cosmology&);
  Cosmology& operator=(const Cosmology&);

  const CosmologyParams& params() const { return p_; }
  double omega_k() const { return 1.0 - p_.omega_m - p_.omega_lambda; }

  double E(double a) const;                 // H(a)/H0
  double hubble(double a) const;            // H(a), km/s/(Mpc/h)
  double omega_m_of_a(double a) const;      // omega_m a^-3 / E^2
  double growth(double a) const;            // D1(a), D1(1) = 1
  double growth_rate(double a) const;       // f1 = dln D1 / dln a
  double growth2(double a) const;           // D2(a), -> -3/7 D1^2 early
  double growth_rate2(double a) const;      // f2 = dln D2 / dln a

  // Exact KDK factors: drift = int da/(a^3 H), kick = int da/(a^2 H), in the
  // internal time unit (Mpc/h)/(km/s). x += p * drift; p += g * kick.
  double drift_factor(double a1, double a2) const;
  double kick_factor(double a1, double a2) const;
  // int D(a)/D(a_force) da/(a^2 H): the kick of a force computed at a_force that grows as the
  // linear growth D(a) across the kick (FastPM's kick, Feng et al. 2016).
  double growth_weighted_kick_factor(double a1, double a2, double a_force) const;
  // int G(a)/G(a_momentum) da/(a^3 H) = (D(a2) - D(a1)) / G(a_momentum), G = a^3 H dD/da: the
  // drift of a momentum p taken at a_momentum that grows as the linear mode's, p = G(a) psi,
  // across the drift (FastPM's drift, Feng et al. 2016).
  double growth_weighted_drift_factor(double a1, double a2, double a_momentum) const;
  // Cosmic time between a1 and a2: int da/(a H).
  double time_between(double a1, double a2) const;

  static constexpr double a_min = 1e-6, a_max = 4.0;   // range of the growth tables

 private:
  struct Tables;
  CosmologyParams p_;
  std::unique_ptr<Tables> tables_;
};

}  // namespace orbis
