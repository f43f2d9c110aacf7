#include "cosmology/linear_power_eh.hpp"

#include <cmath>

#include "core/error.hpp"

namespace orbis {
namespace {

// eq. (19): T0~(k, alpha_c, beta_c), q from eq. (10).
double t0_tilde(double q, double alpha_c, double beta_c) {
  const double l = std::log(M_E + 1.8 * beta_c * q);
  const double c = 14.2 / alpha_c + 386.0 / (1.0 + 69.9 * std::pow(q, 1.08));   // eq. (20)
  return l / (l + c * q * q);
}

}  // namespace

EisensteinHu::EisensteinHu(double omega_m, double omega_b, double h, double t_cmb_k) : h_(h) {
  if (!(omega_m > 0) || !(omega_b > 0) || !(omega_b < omega_m) || !(h > 0) || !(t_cmb_k > 0))
    fail("Eisenstein & Hu transfer function: needs 0 < omega_b < omega_m, h > 0, T_CMB > 0; "
         "got omega_m = {}, omega_b = {}, h = {}, T_CMB = {} K", omega_m, omega_b, h, t_cmb_k);
  omega_m_ = omega_m;
  om_h2_ = omega_m * h * h;
  ob_h2_ = omega_b * h * h;
  f_b_ = omega_b / omega_m;
  f_c_ = 1.0 - f_b_;
  theta_ = t_cmb_k / 2.7;
  const double t4 = std::pow(theta_, 4);

  z_eq_ = 2.50e4 * om_h2_ / t4;                          // eq. (2)
  k_eq_ = 7.46e-2 * om_h2_ / (theta_ * theta_);          // eq. (3), 1/Mpc
  const double b1 = 0.313 * std::pow(om_h2_, -0.419) * (1.0 + 0.607 * std::pow(om_h2_, 0.674));
  const double b2 = 0.238 * std::pow(om_h2_, 0.223);
  z_d_ = 1291.0 * std::pow(om_h2_, 0.251) / (1.0 + 0.659 * std::pow(om_h2_, 0.828)) *
         (1.0 + b1 * std::pow(ob_h2_, b2));              // eq. (4)
  // eq. (5): R = 31.5 omega_b theta^-4 (z / 1e3)^-1, the baryon-to-photon momentum ratio.
  r_d_ = 31.5 * ob_h2_ / t4 * (1000.0 / (1.0 + z_d_));
  r_eq_ = 31.5 * ob_h2_ / t4 * (1000.0 / z_eq_);
  s_ = 2.0 / (3.0 * k_eq_) * std::sqrt(6.0 / r_eq_) *
       std::log((std::sqrt(1.0 + r_d_) + std::sqrt(r_d_ + r_eq_)) / (1.0 + std::sqrt(r_eq_)));   // eq. (6)
  k_silk_ = 1.6 * std::pow(ob_h2_, 0.52) * std::pow(om_h2_, 0.73) *
            (1.0 + std::pow(10.4 * om_h2_, -0.95));       // eq. (7)

  const double a1 = std::pow(46.9 * om_h2_, 0.670) * (1.0 + std::pow(32.1 * om_h2_, -0.532));
  const double a2 = std::pow(12.0 * om_h2_, 0.424) * (1.0 + std::pow(45.0 * om_h2_, -0.582));
  alpha_c_ = std::pow(a1, -f_b_) * std::pow(a2, -f_b_ * f_b_ * f_b_);   // eq. (11)
  const double bb1 = 0.944 / (1.0 + std::pow(458.0 * om_h2_, -0.708));
  const double bb2 = std::pow(0.395 * om_h2_, -0.0266);
  beta_c_ = 1.0 / (1.0 + bb1 * (std::pow(f_c_, bb2) - 1.0));           // eq. (12)

  const double y = z_eq_ / (1.0 + z_d_);
  const double sy = std::sqrt(1.0 + y);
  const double g = y * (-6.0 * sy + (2.0 + 3.0 * y) * std::log((sy + 1.0) / (sy - 1.0)));   // eq. (15)
  alpha_b_ = 2.07 * k_eq_ * s_ * std::pow(1.0 + r_d_, -0.75) * g;      // eq. (14)
  beta_b_ = 0.5 + f_b_ + (3.0 - 2.0 * f_b_) * std::sqrt(std::pow(17.2 * om_h2_, 2) + 1.0);   // eq. (24)
  beta_node_ = 8.41 * std::pow(om_h2_, 0.435);                         // eq. (23)

  s_fit_ = 44.5 * std::log(9.83 / om_h2_) / std::sqrt(1.0 + 10.0 * std::pow(ob_h2_, 0.75));   // eq. (26)
  alpha_gamma_ = 1.0 - 0.328 * std::log(431.0 * om_h2_) * f_b_ +
                 0.38 * std::log(22.3 * om_h2_) * f_b_ * f_b_;         // eq. (31)
}

double EisensteinHu::transfer(double k_h_mpc) const {
  if (k_h_mpc <= 0) return 1.0;
  const double k = k_h_mpc * h_;          // 1/Mpc
  const double q = k / (13.41 * k_eq_);   // eq. (10)
  const double ks = k * s_;
  // CDM, eqs. (17)-(18).
  const double f = 1.0 / (1.0 + std::pow(ks / 5.4, 4));
  const double t_c = f * t0_tilde(q, 1.0, beta_c_) + (1.0 - f) * t0_tilde(q, alpha_c_, beta_c_);
  // Baryons, eqs. (21)-(22): the node shift s~ makes the first zeros of j0 match.
  const double s_tilde = s_ / std::cbrt(1.0 + std::pow(beta_node_ / ks, 3));
  const double x = k * s_tilde;
  const double j0 = std::sin(x) / x;
  const double t_b = (t0_tilde(q, 1.0, 1.0) / (1.0 + std::pow(ks / 5.2, 2)) +
                      alpha_b_ / (1.0 + std::pow(beta_b_ / ks, 3)) * std::exp(-std::pow(k / k_silk_, 1.4))) *
                     j0;
  return f_b_ * t_b + f_c_ * t_c;         // eq. (16)
}

double EisensteinHu::transfer_nowiggle(double k_h_mpc) const {
  if (k_h_mpc <= 0) return 1.0;
  const double k = k_h_mpc * h_;   // 1/Mpc
  // eq. (30): Gamma_eff in h/Mpc; q of eq. (28) takes k in h/Mpc.
  const double gamma_eff =
      omega_m_ * h_ * (alpha_gamma_ + (1.0 - alpha_gamma_) / (1.0 + std::pow(0.43 * k * s_fit_, 4)));
  const double q = k_h_mpc * theta_ * theta_ / gamma_eff;
  const double l0 = std::log(2.0 * M_E + 1.8 * q);   // eq. (29)
  const double c0 = 14.2 + 731.0 / (1.0 + 62.5 * q);
  return l0 / (l0 + c0 * q * q);
}

}  // namespace orbis
