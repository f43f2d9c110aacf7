// Eisenstein & Hu (1998, ApJ 496, 605; "EH98") fitting formulae for the matter transfer
// function of CDM + baryons: the full form with baryon acoustic oscillations (eqs. 16-24)
// and the "no-wiggle" shape (eqs. 26-31). Equation numbers below are the paper's.
//
// EH98 work in Mpc (not Mpc/h): every *_mpc / *_per_mpc member is in those units, while
// transfer() and transfer_nowiggle() take k in h/Mpc, the unit of the rest of orbis.
// Following Eisenstein's reference code (tf_fit.c), z_eq of eq. (2) is used as 1 + z_eq.
#pragma once

namespace orbis {

class EisensteinHu {
 public:
  // omega_m, omega_b: density parameters today (CDM + baryons, baryons); h = H0/100;
  // t_cmb_k: CMB temperature (2.7255 K, Fixsen 2009).
  EisensteinHu(double omega_m, double omega_b, double h, double t_cmb_k = 2.7255);

  double transfer(double k_h_mpc) const;            // eq. (16): f_b T_b + f_c T_c
  double transfer_nowiggle(double k_h_mpc) const;   // eqs. (29)-(31)

  double z_equality() const { return z_eq_; }               // eq. (2), used as 1 + z_eq
  double k_equality_per_mpc() const { return k_eq_; }       // eq. (3)
  double z_drag() const { return z_d_; }                    // eq. (4)
  double sound_horizon_mpc() const { return s_; }           // eq. (6), exact in the model
  double sound_horizon_fit_mpc() const { return s_fit_; }   // eq. (26), the approximation
  double k_silk_per_mpc() const { return k_silk_; }         // eq. (7)
  double baryon_fraction() const { return f_b_; }
  double omega_m_h2() const { return om_h2_; }
  double omega_b_h2() const { return ob_h2_; }
  double theta_cmb() const { return theta_; }               // T_CMB / 2.7 K

 private:
  double h_, om_h2_, ob_h2_, f_b_, f_c_, theta_;
  double omega_m_;
  double z_eq_, k_eq_, z_d_, r_eq_, r_d_, s_, s_fit_, k_silk_;
  double alpha_c_, beta_c_, alpha_b_, beta_b_, beta_node_, alpha_gamma_;
};

}  // namespace orbis
