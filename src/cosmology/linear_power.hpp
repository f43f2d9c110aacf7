// The z = 0 linear matter power spectrum P(k), (Mpc/h)^3 for k in h/Mpc, shared by the IC
// generator and the analysis (both sit above cosmology/, neither
// depends on the other). Sources:
//   eisenstein_hu           P = A k^n_s T_EH(k)^2, EH98 with baryon wiggles
//   eisenstein_hu_nowiggle  the same with the EH98 no-wiggle shape (eqs. 29-31)
//   camb_transfer           P = A k^n_s T(k)^2 from a CAMB transfer file (column 1 k/h in h/Mpc,
//                           total matter in column 7 when there are 7 or more, else column 2)
//   table                   (k [h/Mpc], P [(Mpc/h)^3]) rows, used as given or rescaled to sigma8
// Tabulated data are interpolated with a cubic spline in (ln k, ln value). Outside the table
// the value is extrapolated as a power law with the slope of the first (last) two rows: at
// low k this is the primordial slope of any sensible table, at high k it is a smooth
// continuation; make_initial_conditions warns when its grid reaches outside the table.
// sigma_r(R)^2 = 1/(2 pi^2) int k^3 P(k) W(kR)^2 dln k, W(x) = 3 (sin x - x cos x) / x^3,
// integrated with GSL's adaptive Gauss-Kronrod rule in ln k.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace orbis {

class Params;
class EisensteinHu;

enum class PowerSource { eisenstein_hu, eisenstein_hu_nowiggle, camb_transfer, table };

class LinearPower {
 public:
  // EH98 with (wiggles = true) or without baryon oscillations, normalised to sigma8.
  static LinearPower eisenstein_hu(double omega_m, double omega_b, double h, double n_s, double sigma8,
                                   bool wiggles, double t_cmb_k = 2.7255);
  // A CAMB transfer file, normalised to sigma8.
  static LinearPower camb_transfer(const std::string& path, double n_s, double sigma8);
  // A (k, P) table at z = 0; rescaled to sigma8 when one is given, else used as given.
  static LinearPower table(const std::string& path, std::optional<double> sigma8);
  // Tabulated points (k ascending): the same as table() without a file.
  static LinearPower from_points(const std::vector<double>& k_h_mpc, const std::vector<double>& p_mpc3_h3,
                                 std::optional<double> sigma8, const std::string& description = "points");
  // From ic.power_spectrum, ic.power_file (relative to the parameter file's folder),
  // ic.normalise_to_sigma8 and cosmology.{omega_m, omega_b, h, n_s, sigma8}.
  static LinearPower from_params(const Params& params);

  ~LinearPower();
  LinearPower(const LinearPower&);
  LinearPower& operator=(const LinearPower&);
  LinearPower(LinearPower&&) noexcept;
  LinearPower& operator=(LinearPower&&) noexcept;

  double operator()(double k_h_mpc) const { return power(k_h_mpc); }
  double power(double k_h_mpc) const;        // P(k, z = 0), (Mpc/h)^3; 0 at k <= 0
  double sigma_r(double r_mpc_h) const;      // rms of the top-hat filtered z = 0 field
  double sigma8() const { return sigma_r(8.0); }
  double amplitude() const { return amplitude_; }   // A in P = A * shape(k)

  PowerSource source() const { return source_; }
  // Where P(k) is given rather than extrapolated: (0, inf) for the EH98 forms.
  double k_min_h_mpc() const;
  double k_max_h_mpc() const;
  const std::string& description() const { return description_; }   // for the log
  // The EH98 object behind the eisenstein_hu sources, else nullptr.
  const EisensteinHu* eisenstein_hu_model() const { return eh_.get(); }

 private:
  LinearPower() = default;
  double shape(double k_h_mpc) const;        // P / amplitude
  void normalise(double sigma8);
  void set_table(const std::vector<double>& k, const std::vector<double>& value);

  struct Table;
  PowerSource source_ = PowerSource::eisenstein_hu;
  double n_s_ = 1.0, amplitude_ = 1.0;
  std::shared_ptr<const EisensteinHu> eh_;   // immutable, so copies may share it
  std::shared_ptr<const Table> table_;
  std::string description_;
};

// Columns of a whitespace-separated text table ('#' starts a comment line); every error
// names file, line and what was expected. Exposed for tests.
struct TextTable {
  std::vector<std::vector<double>> rows;
  std::vector<int> line_numbers;   // 1-based line of each row
};
TextTable read_text_table(const std::string& path, int min_columns);

}  // namespace orbis
