#include "cosmology/linear_power.hpp"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_integration.h>
#include <gsl/gsl_interp.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "cosmology/linear_power_eh.hpp"

namespace orbis {

// A cubic spline through (ln k, ln value), with power-law continuation past both ends.
struct LinearPower::Table {
  std::vector<double> ln_k, ln_v;
  gsl_interp* interp = nullptr;

  Table(std::vector<double> x, std::vector<double> y) : ln_k(std::move(x)), ln_v(std::move(y)) {
    interp = gsl_interp_alloc(gsl_interp_cspline, ln_k.size());
    gsl_interp_init(interp, ln_k.data(), ln_v.data(), ln_k.size());
  }
  ~Table() { gsl_interp_free(interp); }
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;

  double eval(double ln_k_value) const {
    const std::size_t n = ln_k.size();
    if (ln_k_value <= ln_k[0]) {
      const double slope = (ln_v[1] - ln_v[0]) / (ln_k[1] - ln_k[0]);
      return ln_v[0] + slope * (ln_k_value - ln_k[0]);
    }
    if (ln_k_value >= ln_k[n - 1]) {
      const double slope = (ln_v[n - 1] - ln_v[n - 2]) / (ln_k[n - 1] - ln_k[n - 2]);
      return ln_v[n - 1] + slope * (ln_k_value - ln_k[n - 1]);
    }
    // No accelerator: it is a cache, and this is called from many threads.
    return gsl_interp_eval(interp, ln_k.data(), ln_v.data(), ln_k_value, nullptr);
  }
};

TextTable read_text_table(const std::string& path, int min_columns) {
  std::ifstream in(path);
  if (!in) fail("{}: cannot open the file (expected a text table with at least {} columns)", path, min_columns);
  TextTable table;
  std::string line;
  int line_number = 0;
  std::size_t columns = 0;
  while (std::getline(in, line)) {
    ++line_number;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    std::istringstream fields(line);
    std::vector<double> row;
    std::string field;
    while (fields >> field) {
      char* end = nullptr;
      const double value = std::strtod(field.c_str(), &end);
      if (end == field.c_str() || *end != '\0' || !std::isfinite(value))
        fail("{}:{}: column {} is '{}', expected a finite number", path, line_number, row.size() + 1, field);
      row.push_back(value);
    }
    if (row.size() < static_cast<std::size_t>(min_columns))
      fail("{}:{}: {} column(s), expected at least {}", path, line_number, row.size(), min_columns);
    if (columns == 0) columns = row.size();
    if (row.size() != columns)
      fail("{}:{}: {} columns, expected {} like the first data line", path, line_number, row.size(), columns);
    table.rows.push_back(std::move(row));
    table.line_numbers.push_back(line_number);
  }
  if (table.rows.size() < 3)
    fail("{}: {} data line(s), expected at least 3 (k ascending, one row per k)", path, table.rows.size());
  return table;
}

namespace {

// Checks that column `col` of k values rises and that `value_col` is positive; returns both.
void take_columns(const TextTable& t, const std::string& path, std::size_t value_col, const char* what,
                  std::vector<double>& k, std::vector<double>& value) {
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    const double ki = t.rows[i][0], vi = t.rows[i][value_col];
    if (!(ki > 0)) fail("{}:{}: k = {}, expected k > 0 (h/Mpc)", path, t.line_numbers[i], ki);
    if (!k.empty() && !(ki > k.back()))
      fail("{}:{}: k = {} after k = {}, expected k strictly ascending", path, t.line_numbers[i], ki, k.back());
    if (!(vi > 0))
      fail("{}:{}: column {} ({}) is {}, expected a positive value", path, t.line_numbers[i], value_col + 1,
           what, vi);
    k.push_back(ki);
    value.push_back(vi);
  }
}

struct SigmaContext {
  const LinearPower* power;
  double r;
};

double sigma_integrand(double ln_k, void* context) {
  const auto* c = static_cast<const SigmaContext*>(context);
  const double k = std::exp(ln_k);
  const double x = k * c->r;
  // Series below x = 1e-2 avoids the cancellation in sin x - x cos x.
  const double w = x < 1e-2 ? 1.0 - x * x / 10.0 : 3.0 * (std::sin(x) - x * std::cos(x)) / (x * x * x);
  return k * k * k * c->power->power(k) * w * w / (2.0 * M_PI * M_PI);
}

}  // namespace

LinearPower::~LinearPower() = default;
LinearPower::LinearPower(const LinearPower&) = default;
LinearPower& LinearPower::operator=(const LinearPower&) = default;
LinearPower::LinearPower(LinearPower&&) noexcept = default;
LinearPower& LinearPower::operator=(LinearPower&&) noexcept = default;

LinearPower LinearPower::eisenstein_hu(double omega_m, double omega_b, double h, double n_s, double sigma8,
                                       bool wiggles, double t_cmb_k) {
  LinearPower p;
  p.source_ = wiggles ? PowerSource::eisenstein_hu : PowerSource::eisenstein_hu_nowiggle;
  p.n_s_ = n_s;
  p.eh_ = std::make_shared<const EisensteinHu>(omega_m, omega_b, h, t_cmb_k);
  p.normalise(sigma8);
  p.description_ = fmt::format("Eisenstein & Hu 1998 {} (omega_m = {}, omega_b = {}, h = {}, T_CMB = {} K), "
                               "n_s = {}, sigma8 = {}", wiggles ? "with baryon wiggles" : "no-wiggle",
                               omega_m, omega_b, h, t_cmb_k, n_s, sigma8);
  return p;
}

LinearPower LinearPower::camb_transfer(const std::string& path, double n_s, double sigma8) {
  const TextTable t = read_text_table(path, 2);
  const std::size_t col = t.rows[0].size() >= 7 ? 6 : 1;   // total matter, else the only T
  std::vector<double> k, tk;
  take_columns(t, path, col, "transfer function", k, tk);
  LinearPower p;
  p.source_ = PowerSource::camb_transfer;
  p.n_s_ = n_s;
  p.set_table(k, tk);
  p.normalise(sigma8);
  p.description_ = fmt::format("CAMB transfer file '{}' (column {}, {} rows, k = {:g} to {:g} h/Mpc), "
                               "n_s = {}, sigma8 = {}", path, col + 1, k.size(), k.front(), k.back(), n_s, sigma8);
  return p;
}

LinearPower LinearPower::table(const std::string& path, std::optional<double> sigma8) {
  const TextTable t = read_text_table(path, 2);
  std::vector<double> k, pk;
  take_columns(t, path, 1, "P(k)", k, pk);
  return from_points(k, pk, sigma8, fmt::format("P(k) table '{}'", path));
}

LinearPower LinearPower::from_points(const std::vector<double>& k_h_mpc, const std::vector<double>& p_mpc3_h3,
                                     std::optional<double> sigma8, const std::string& description) {
  if (k_h_mpc.size() != p_mpc3_h3.size() || k_h_mpc.size() < 3)
    fail("P(k) {}: {} k values and {} P values, expected the same number, at least 3", description,
         k_h_mpc.size(), p_mpc3_h3.size());
  for (std::size_t i = 0; i < k_h_mpc.size(); ++i)
    if (!(k_h_mpc[i] > 0) || !(p_mpc3_h3[i] > 0) || (i > 0 && !(k_h_mpc[i] > k_h_mpc[i - 1])))
      fail("P(k) {}: row {} has k = {}, P = {}; expected k > 0 ascending and P > 0", description, i + 1,
           k_h_mpc[i], p_mpc3_h3[i]);
  LinearPower p;
  p.source_ = PowerSource::table;
  p.set_table(k_h_mpc, p_mpc3_h3);
  if (sigma8) p.normalise(*sigma8);
  p.description_ = fmt::format("{} ({} rows, k = {:g} to {:g} h/Mpc), {}", description, k_h_mpc.size(),
                               k_h_mpc.front(), k_h_mpc.back(),
                               sigma8 ? fmt::format("rescaled to sigma8 = {}", *sigma8) : "used as given");
  return p;
}

LinearPower LinearPower::from_params(const Params& params) {
  const std::string& source = params.get_string("ic.power_spectrum");
  const bool normalise = params.get_bool("ic.normalise_to_sigma8");
  const double sigma8 = params.get_real("cosmology.sigma8");
  const double n_s = params.get_real("cosmology.n_s");
  std::string file = params.get_string("ic.power_file");
  const bool needs_file = source == "camb_transfer" || source == "table";
  if (needs_file) {
    if (file.empty())
      fail("{}: ic.power_spectrum = \"{}\" needs a file: set ic.power_file", params.describe("ic.power_file"), source);
    if (std::filesystem::path(file).is_relative()) file = (std::filesystem::path(params.directory()) / file).string();
  } else if (!file.empty()) {
    log::warn("ic.power_file = '{}' is ignored: ic.power_spectrum = \"{}\" needs no file", file, source);
  }
  if (!normalise && source != "table")
    fail("{}: a transfer function ({}) carries no amplitude, so ic.normalise_to_sigma8 must be true "
         "(only a (k, P) table can be used as given)", params.describe("ic.normalise_to_sigma8"), source);
  if (source == "eisenstein_hu" || source == "eisenstein_hu_nowiggle")
    return eisenstein_hu(params.get_real("cosmology.omega_m"), params.get_real("cosmology.omega_b"),
                         params.get_real("cosmology.h"), n_s, sigma8, source == "eisenstein_hu");
  if (source == "camb_transfer") return camb_transfer(file, n_s, sigma8);
  if (source == "table") return table(file, normalise ? std::optional<double>(sigma8) : std::nullopt);
  fail("{}: unknown power spectrum source '{}'", params.describe("ic.power_spectrum"), source);
}

void LinearPower::set_table(const std::vector<double>& k, const std::vector<double>& value) {
  std::vector<double> lk(k.size()), lv(k.size());
  for (std::size_t i = 0; i < k.size(); ++i) lk[i] = std::log(k[i]), lv[i] = std::log(value[i]);
  table_ = std::make_shared<const Table>(std::move(lk), std::move(lv));
}

double LinearPower::shape(double k) const {
  switch (source_) {
    case PowerSource::eisenstein_hu: { const double t = eh_->transfer(k); return std::pow(k, n_s_) * t * t; }
    case PowerSource::eisenstein_hu_nowiggle: {
      const double t = eh_->transfer_nowiggle(k);
      return std::pow(k, n_s_) * t * t;
    }
    case PowerSource::camb_transfer: return std::exp(n_s_ * std::log(k) + 2.0 * table_->eval(std::log(k)));
    case PowerSource::table: return std::exp(table_->eval(std::log(k)));
  }
  return 0;
}

double LinearPower::power(double k_h_mpc) const { return k_h_mpc > 0 ? amplitude_ * shape(k_h_mpc) : 0.0; }

double LinearPower::k_min_h_mpc() const { return table_ ? std::exp(table_->ln_k.front()) : 0.0; }
double LinearPower::k_max_h_mpc() const {
  return table_ ? std::exp(table_->ln_k.back()) : std::numeric_limits<double>::infinity();
}

double LinearPower::sigma_r(double r_mpc_h) const {
  if (!(r_mpc_h > 0)) fail("sigma_r: radius {} Mpc/h must be positive", r_mpc_h);
  gsl_set_error_handler_off();
  SigmaContext context{this, r_mpc_h};
  gsl_function fn{sigma_integrand, &context};
  // From kR = 1e-8 to 1e4: beyond, W^2 ~ 4.5/(kR)^4 on average leaves < 1e-8 of the
  // integral for any spectrum falling at least as fast as P ~ 1/k (CDM falls as k^-3), and
  // below, k^3 P ~ k^(3+n_s) leaves nothing. Pieces one decade wide keep the oscillating
  // tail of W^2 well resolved by the adaptive rule.
  const double ln_lo = std::log(1e-8 / r_mpc_h), ln_hi = std::log(1e4 / r_mpc_h);
  gsl_integration_workspace* w = gsl_integration_workspace_alloc(2000);
  double total = 0;
  for (double a = ln_lo; a < ln_hi; a += std::log(10.0)) {
    const double b = std::min(a + std::log(10.0), ln_hi);
    double result = 0, error = 0;
    const int status = gsl_integration_qag(&fn, a, b, 0.0, 1e-10, 2000, GSL_INTEG_GAUSS61, w, &result, &error);
    if (status != GSL_SUCCESS && std::abs(error) > 1e-8 * std::abs(result)) {
      gsl_integration_workspace_free(w);
      fail("sigma_r({} Mpc/h): the top-hat integral did not converge ({})", r_mpc_h, gsl_strerror(status));
    }
    total += result;
  }
  gsl_integration_workspace_free(w);
  return std::sqrt(total);
}

void LinearPower::normalise(double sigma8) {
  if (!(sigma8 > 0)) fail("sigma8 = {} must be positive", sigma8);
  amplitude_ = 1.0;
  const double raw = sigma_r(8.0);
  amplitude_ = (sigma8 / raw) * (sigma8 / raw);
}

}  // namespace orbis
