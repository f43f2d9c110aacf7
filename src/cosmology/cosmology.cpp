#include "cosmology/cosmology.hpp"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_integration.h>
#include <gsl/gsl_odeiv2.h>
#include <gsl/gsl_spline.h>

#include <cmath>

#include "core/error.hpp"
#include "core/params.hpp"
#include "core/units.hpp"

namespace orbis {

namespace {

constexpr int kTableSize = 4096;

struct Spline {
  gsl_interp_accel* acc = nullptr;
  gsl_spline* spline = nullptr;
  Spline(const std::vector<double>& x, const std::vector<double>& y) {
    acc = gsl_interp_accel_alloc();
    spline = gsl_spline_alloc(gsl_interp_cspline, x.size());
    gsl_spline_init(spline, x.data(), y.data(), x.size());
  }
  ~Spline() {
    gsl_spline_free(spline);
    gsl_interp_accel_free(acc);
  }
  Spline(const Spline&) = delete;
  Spline& operator=(const Spline&) = delete;
  // gsl_interp_accel is a cache: evaluation stays logically const but is not thread-safe,
  // so it is evaluated without the accelerator.
  double operator()(double x) const { return gsl_spline_eval(spline, x, nullptr); }
};

// State y = {D1, dD1/dlna, D2, dD2/dlna} in s = ln a.
int growth_rhs(double s, const double y[], double dyds[], void* context) {
  const auto* c = static_cast<const Cosmology*>(context);
  const double a = std::exp(s);
  const auto& p = c->params();
  const double e2 = p.omega_m / (a * a * a) + c->omega_k() / (a * a) +
                    p.omega_lambda * std::pow(a, -3.0 * (1.0 + p.w0));
  const double de2_ds = -3.0 * p.omega_m / (a * a * a) - 2.0 * c->omega_k() / (a * a) -
                        3.0 * (1.0 + p.w0) * p.omega_lambda * std::pow(a, -3.0 * (1.0 + p.w0));
  const double dlnh_ds = 0.5 * de2_ds / e2;
  const double source = 1.5 * p.omega_m / (a * a * a) / e2;
  dyds[0] = y[1];
  dyds[1] = -(2.0 + dlnh_ds) * y[1] + source * y[0];
  dyds[2] = y[3];
  dyds[3] = -(2.0 + dlnh_ds) * y[3] + source * (y[2] - y[0] * y[0]);
  return GSL_SUCCESS;
}

double integrate(double (*f)(double, void*), void* context, double a1, double a2) {
  if (a1 == a2) return 0.0;
  gsl_function fn{f, context};
  double result = 0, error = 0;
  gsl_integration_workspace* w = gsl_integration_workspace_alloc(256);
  int status = gsl_integration_qag(&fn, a1, a2, 0.0, 1e-12, 256, GSL_INTEG_GAUSS41, w, &result, &error);
  gsl_integration_workspace_free(w);
  if (status != GSL_SUCCESS) fail("cosmology: integral from a = {} to {} did not converge", a1, a2);
  return result;
}

}  // namespace

struct Cosmology::Tables {
  Spline log_d1, f1, log_minus_d2, f2;
  Tables(const std::vector<double>& s, const std::vector<double>& ld1, const std::vector<double>& f1v,
         const std::vector<double>& ld2, const std::vector<double>& f2v)
      : log_d1(s, ld1), f1(s, f1v), log_minus_d2(s, ld2), f2(s, f2v) {}
};

Cosmology::Cosmology(const CosmologyParams& p) : p_(p) {
  if (!(p_.omega_m > 0)) fail("cosmology: omega_m = {} must be positive", p_.omega_m);
  for (double a : {a_min, 1.0, a_max})
    if (!(E(a) * E(a) > 0))
      fail("cosmology: H(a)^2 <= 0 at a = {} for omega_m = {}, omega_lambda = {}: no such universe "
           "expands from the Big Bang to a = {}", a, p_.omega_m, p_.omega_lambda, a_max);
  gsl_set_error_handler_off();
  // Growing modes in the matter era: D1 = a, D2 = -3/7 a^2.
  double y[4] = {a_min, a_min, -3.0 / 7.0 * a_min * a_min, -6.0 / 7.0 * a_min * a_min};
  gsl_odeiv2_system sys{growth_rhs, nullptr, 4, this};
  gsl_odeiv2_driver* driver = gsl_odeiv2_driver_alloc_y_new(&sys, gsl_odeiv2_step_rk8pd, 1e-6, 1e-13, 1e-12);
  const double s0 = std::log(a_min), s1 = std::log(a_max);
  std::vector<double> s(kTableSize), d1(kTableSize), dd1(kTableSize), d2(kTableSize), dd2(kTableSize);
  double s_now = s0;
  for (int i = 0; i < kTableSize; ++i) {
    s[i] = s0 + (s1 - s0) * i / (kTableSize - 1);
    if (i > 0 && gsl_odeiv2_driver_apply(driver, &s_now, s[i], y) != GSL_SUCCESS) {
      gsl_odeiv2_driver_free(driver);
      fail("cosmology: the growth equation could not be integrated to a = {}", std::exp(s[i]));
    }
    d1[i] = y[0], dd1[i] = y[1], d2[i] = y[2], dd2[i] = y[3];
  }
  gsl_odeiv2_driver_free(driver);
  // Normalise D1(1) = 1, and D2 by the same factor squared so D2/D1^2 is kept.
  Spline d1_spline(s, d1);
  const double norm = d1_spline(0.0);
  std::vector<double> ld1(kTableSize), f1(kTableSize), ld2(kTableSize), f2(kTableSize);
  for (int i = 0; i < kTableSize; ++i) {
    ld1[i] = std::log(d1[i] / norm);
    f1[i] = dd1[i] / d1[i];
    ld2[i] = std::log(-d2[i] / (norm * norm));
    f2[i] = dd2[i] / d2[i];
  }
  tables_ = std::make_unique<Tables>(s, ld1, f1, ld2, f2);
}

Cosmology::~Cosmology() = default;
Cosmology::Cosmology(const Cosmology& other) : Cosmology(other.p_) {}
Cosmology& Cosmology::operator=(const Cosmology& other) {
  if (this != &other) *this = Cosmology(other.p_);
  return *this;
}

CosmologyParams cosmology_params(const Params& params) {
  CosmologyParams p;
  p.omega_m = params.get_real("cosmology.omega_m");
  p.omega_lambda = params.has("cosmology.omega_lambda") ? params.get_real("cosmology.omega_lambda")
                                                        : 1.0 - p.omega_m;
  p.w0 = params.get_real("cosmology.w0");
  return p;
}

Cosmology Cosmology::from_params(const Params& params) { return Cosmology(cosmology_params(params)); }

double Cosmology::E(double a) const {
  return std::sqrt(p_.omega_m / (a * a * a) + omega_k() / (a * a) +
                   p_.omega_lambda * std::pow(a, -3.0 * (1.0 + p_.w0)));
}

double Cosmology::hubble(double a) const { return units::H0 * E(a); }

double Cosmology::omega_m_of_a(double a) const {
  const double e = E(a);
  return p_.omega_m / (a * a * a * e * e);
}

namespace {
void check_range(double a) {
  if (!(a >= Cosmology::a_min && a <= Cosmology::a_max))
    fail("cosmology: a = {} is outside the tabulated range [{}, {}]", a, Cosmology::a_min, Cosmology::a_max);
}
}  // namespace

double Cosmology::growth(double a) const { check_range(a); return std::exp(tables_->log_d1(std::log(a))); }
double Cosmology::growth_rate(double a) const { check_range(a); return tables_->f1(std::log(a)); }
double Cosmology::growth2(double a) const { check_range(a); return -std::exp(tables_->log_minus_d2(std::log(a))); }
double Cosmology::growth_rate2(double a) const { check_range(a); return tables_->f2(std::log(a)); }

double Cosmology::drift_factor(double a1, double a2) const {
  return integrate([](double a, void* c) { return 1.0 / (a * a * a * static_cast<const Cosmology*>(c)->hubble(a)); },
                   const_cast<Cosmology*>(this), a1, a2);
}

double Cosmology::kick_factor(double a1, double a2) const {
  return integrate([](double a, void* c) { return 1.0 / (a * a * static_cast<const Cosmology*>(c)->hubble(a)); },
                   const_cast<Cosmology*>(this), a1, a2);
}

double Cosmology::growth_weighted_kick_factor(double a1, double a2, double a_force) const {
  struct Context {
    const Cosmology* cosmology;
    double inv_growth_force;
  } context{this, 1.0 / growth(a_force)};
  return integrate(
      [](double a, void* c) {
        const auto* x = static_cast<const Context*>(c);
        return x->cosmology->growth(a) * x->inv_growth_force / (a * a * x->cosmology->hubble(a));
      },
      &context, a1, a2);
}

// The integrand G(a)/G(a_p) / (a^3 H) is f(a) D(a) / (a G(a_p)), G(a) = a^2 H f D; integrated
// as the kick's weight is, so that a drift cut into pieces adds up to the whole one's.
double Cosmology::growth_weighted_drift_factor(double a1, double a2, double a_momentum) const {
  struct Context {
    const Cosmology* cosmology;
    double inv_g_momentum;
  } context{this, 1.0 / (a_momentum * a_momentum * hubble(a_momentum) * growth_rate(a_momentum) * growth(a_momentum))};
  return integrate(
      [](double a, void* c) {
        const auto* x = static_cast<const Context*>(c);
        return x->cosmology->growth_rate(a) * x->cosmology->growth(a) * x->inv_g_momentum / a;
      },
      &context, a1, a2);
}

double Cosmology::time_between(double a1, double a2) const {
  return integrate([](double a, void* c) { return 1.0 / (a * static_cast<const Cosmology*>(c)->hubble(a)); },
                   const_cast<Cosmology*>(this), a1, a2);
}

}  // namespace orbis
