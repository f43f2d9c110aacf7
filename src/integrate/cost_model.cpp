#include "integrate/cost_model.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/units.hpp"
#include "cosmology/cosmology.hpp"
#include "cosmology/linear_power.hpp"
#include "integrate/time_bins.hpp"
#include "tree/orb_tree.hpp"

namespace orbis {
namespace {

constexpr double kDeltaC = 1.686;        // the linear collapse threshold (Press-Schechter)
constexpr double kHaloDensity = 200.0;   // a halo's mean density over the mean matter density
constexpr double kGridStep = 0.01;       // the forecast's grid in ln a
// The largest |g| in a Plummer-softened singular isothermal sphere, in units of G M / (r_vir eps):
// G M(<r) r / (r^2 + eps^2)^(3/2) with M(<r) = M r / r_vir peaks at r = sqrt 2 eps.
const double kSoftenedPeak = 2.0 / (3.0 * std::sqrt(3.0));

// The recent PM steps: those of the last half of the ln a run so far (at least the last 3).
// A step that begins within kWindowTie of the cut is in: PM steps of max_dln_a put one
// exactly on it at every other step, where rounding alone decided, and the step log's
// 6 digits of a (eta_accuracy.py --replay) could not follow it.
constexpr double kWindowTie = 1e-4;
std::size_t recent_begin(const std::vector<CostRecord>& history, double ln_a_now) {
  if (history.empty()) return 0;
  const double cut = ln_a_now - 0.5 * (ln_a_now - history.front().ln_a) - kWindowTie;
  std::size_t begin = history.size();
  while (begin > 0 && history[begin - 1].ln_a >= cut) --begin;
  return std::min(begin, history.size() >= 3 ? history.size() - 3 : std::size_t{0});
}

double halo_mass(const ClusteringInputs& in, double j) { return in.particle_mass * std::pow(10.0, j / 4); }

// int f(k) dln k from e^lo to e^hi, Simpson's rule with n (even) intervals.
template <class F>
double simpson_ln_k(double lo, double hi, int n, F f) {
  double sum = 0;
  for (int i = 0; i <= n; ++i) sum += (i == 0 || i == n ? 1 : i % 2 ? 4 : 2) * f(std::exp(lo + (hi - lo) * i / n));
  return sum * (hi - lo) / (3 * n);
}

// The shell of a singular isothermal sphere (M(<r) = M r / r_vir) whose Plummer-softened
// |g| = G M / (r_vir eps) y^2 / (1 + y^2)^(3/2) (y = r / eps) exceeds x g_vir
// (g_vir = G M / r_vir^2), eps = e r_vir: between the two roots y1 < sqrt 2 < y2 of
// y^2 / (1 + y^2)^(3/2) = t = x e, within r_vir. Without softening it is the ball of radius
// min(1, 1 / x) r_vir.
struct SphereShell {
  double mass = 0;       // the sphere's mass fraction in it
  double surfaces = 0;   // the sum of (r / r_vir)^(2/3) over the spheres that bound it
};
SphereShell softened_sphere_shell(double x, double e) {
  if (!(e > 0 && x > 0)) return x > 1 ? SphereShell{1 / x, std::pow(x, -2.0 / 3)} : SphereShell{1, 1};
  const double t = x * e;
  if (!(t < kSoftenedPeak)) return {};
  const auto f = [](double y) { return y * y / std::pow(1 + y * y, 1.5); };
  // Bisection on each monotone side (f rises to its peak at sqrt 2, then falls below 1 / y).
  const auto root = [&](double lo, double hi, bool rising) {
    for (int i = 0; i < 40; ++i) {   // to 1e-12 of the bracket
      const double mid = 0.5 * (lo + hi);
      ((f(mid) < t) == rising ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
  };
  const double y1 = root(0, std::sqrt(2.0), true), y2 = root(std::sqrt(2.0), std::max(std::sqrt(2.0), 1 / t), false);
  const double inner = std::min(1.0, e * y1), outer = std::min(1.0, e * y2);
  if (!(outer > inner)) return {};
  return {outer - inner, std::pow(inner, 2.0 / 3) + std::pow(outer, 2.0 / 3)};
}

// The share of all leaves that hold an active particle of a halo of n_h particles whose shell
// (mass fraction `mass`, surfaces as above) is active, per unit of the haloes' mass fraction,
// in leaves of L particles. Inside the shell the active particles fill their leaves (mass of
// them); the spheres that bound it cut leaves that hold some: an isothermal sphere's density
// n(r) = n_h / (4 pi r_vir r^2) gives leaves of volume L / n(r), so a sphere of radius
// x r_vir crosses (4 pi)^(1/3) (n_h / L)^(2/3) x^(2/3) leaf cross-sections, and a surface
// cuts 3/2 of them (a cube's mean width over its side) of which the half outside adds its
// leaf: 3/4 each. At most one leaf per active particle (L mass): the few active of a thin
// shell or of a halo smaller than a leaf lie in leaves of their own. L = 1: mass exactly.
double halo_leaf_share(const SphereShell& shell, double n_h, double leaf) {
  if (!(shell.mass > 0)) return 0;
  const double cut = 0.75 * std::cbrt(4 * units::pi) * std::cbrt(leaf / n_h) * shell.surfaces;
  return std::min(leaf * shell.mass, shell.mass + cut);
}

}  // namespace

ClusteringInputs ClusteringInputs::from_power(const LinearPower& power, double omega_m, double box,
                                              double particles_per_side, double softening, double eta,
                                              double max_dln_a) {
  ClusteringInputs in;
  in.omega_m = omega_m;
  in.softening = softening;
  in.eta = eta;
  in.max_dln_a = max_dln_a;
  in.particles = particles_per_side * particles_per_side * particles_per_side;
  const double rho = omega_m * units::rho_crit0;   // comoving mean matter density
  in.particle_mass = rho * box * box * box / in.particles;
  // sigma_psi^2 = 1/(2 pi^2) int P(k) dk over the box's modes.
  in.sigma_psi = std::sqrt(simpson_ln_k(std::log(2 * units::pi / box), std::log(units::pi * particles_per_side / box),
                                        512, [&](double k) { return k * power(k); }) /
                           (2 * units::pi * units::pi));
  // sigma(M) = sigma_r of the top hat holding M: a fixed rule rather than LinearPower::sigma_r's
  // adaptive one (a forecast needs ~1e-4, not 30 adaptive integrals at every run's start).
  const int masses = static_cast<int>(std::floor(4 * std::log10(in.particles))) + 1;
  for (int j = 0; j < masses; ++j) {
    const double r = std::cbrt(3 * halo_mass(in, j) / (4 * units::pi * rho));
    const double s2 = simpson_ln_k(std::log(1e-5), std::log(1e3 / r), 1200, [&](double k) {
      const double x = k * r;
      const double w = x > 1e-3 ? 3 * (std::sin(x) - x * std::cos(x)) / (x * x * x) : 1 - x * x / 10;
      return k * k * k * power(k) * w * w;
    });
    in.sigma_m.push_back(std::sqrt(s2 / (2 * units::pi * units::pi)));
  }
  return in;
}

std::string ClusteringInputs::describe() const {
  std::string sigmas;
  for (double s : sigma_m) sigmas += fmt::format("{}{:.6g}", sigmas.empty() ? "" : " ", s);
  return fmt::format("ETA forecast: sigma_psi = {:.6g} Mpc/h; sigma(M) at 10^(j/4) particles = {}; an active "
                     "particle's short-range work: {:.6g} particles", sigma_psi, sigmas, work_particles);
}

ActiveShare active_above(const ClusteringInputs& in, double growth, double g) {
  // The field: |g| of a Gaussian vector with 3D rms s is Maxwellian.
  const double s = 1.5 * in.omega_m * units::H0 * units::H0 * growth * in.sigma_psi;
  double field = 0;
  if (s > 0) {
    const double x = g * std::sqrt(3.0) / s;
    field = std::erfc(x / std::sqrt(2.0)) + std::sqrt(2 / units::pi) * x * std::exp(-0.5 * x * x);
  }
  // The haloes: Press-Schechter mass fraction between M_j and M_j+1 (nu = delta_c / (sigma D)),
  // each bin's haloes taken at its middle mass.
  const double rho = in.omega_m * units::rho_crit0, leaf = std::max(1.0, in.work_particles);
  double halo = 0, touched = 0;
  for (std::size_t j = 0; j + 1 < in.sigma_m.size(); ++j) {
    const double f = std::erfc(kDeltaC / (in.sigma_m[j] * growth * std::sqrt(2.0))) -
                     std::erfc(kDeltaC / (in.sigma_m[j + 1] * growth * std::sqrt(2.0)));
    if (!(f > 1e-12)) continue;   // no such haloes yet (and it spares the root finding)
    const double m = halo_mass(in, static_cast<double>(j) + 0.5);
    const double r_vir = std::cbrt(3 * m / (4 * units::pi * kHaloDensity * rho));
    const double g_vir = units::G * m / (r_vir * r_vir);
    const SphereShell shell = softened_sphere_shell(g / g_vir, in.softening / r_vir);
    halo += f * shell.mass;
    touched += f * halo_leaf_share(shell, m / in.particle_mass, leaf);
  }
  ActiveShare out;
  out.fraction = 1 - (1 - field) * (1 - halo);
  if (!(out.fraction < 1)) return {out.fraction, 1.0};
  // The leaves that hold an active particle: the field's lie anywhere (the Maxwellian stands for
  // every particle outside the haloes, whose |g| near a bin's edge varies from one particle to
  // its neighbours), a leaf free of them with the chance (1 - field)^L; the haloes' as above.
  // Bounded by every active particle in full leaves (f) and each in a leaf of its own.
  const double leaves =
      field < 1 && touched < 1 ? -std::expm1(leaf * std::log1p(-field) + std::log1p(-touched)) : 1.0;
  out.work = std::min(std::max(leaves, out.fraction), -std::expm1(leaf * std::log1p(-out.fraction)));
  return out;
}

double fraction_above(const ClusteringInputs& in, double growth, double g) {
  return active_above(in, growth, g).fraction;
}

BinForecast forecast_bins(const ClusteringInputs& in, double growth, double hubble, double a, double dln_pm) {
  BinForecast out;
  if (!(in.eta > 0 && in.softening > 0 && dln_pm > 0)) return out;
  const double x = in.eta * hubble / dln_pm;
  const double acc0 = in.softening * a * a * a * x * x;   // timestep.cpp: bin0_acceleration
  for (int k = 1; k <= kDeepestBin; ++k) {
    const ActiveShare p = active_above(in, growth, acc0 * std::pow(4.0, k - 1));
    if (p.fraction * in.particles < 1) break;
    out.kicks += std::ldexp(p.fraction, k - 1);   // bin >= k: 2^k - 2^(k-1) kicks more
    out.deepest = k;
    out.above[static_cast<std::size_t>(k)] = p.fraction;
    out.work[static_cast<std::size_t>(k)] = p.work;
  }
  return out;
}

ClusteringForecast::ClusteringForecast(const ClusteringInputs& in, const Cosmology& cosmology, double ln_a_begin,
                                       double ln_a_end)
    : begin_(ln_a_begin), particles_(in.particles) {
  const int n = std::max(2, static_cast<int>(std::ceil((ln_a_end - ln_a_begin) / kGridStep)) + 1);
  step_ = std::max(ln_a_end - ln_a_begin, 1e-9) / (n - 1);
  for (int i = 0; i < n; ++i) {
    const double a = std::exp(begin_ + step_ * i);
    const BinForecast f = forecast_bins(in, cosmology.growth(a), cosmology.hubble(a), a, in.max_dln_a);
    kicks_.push_back(f.kicks);
    deepest_.push_back(f.deepest);
    above_.push_back(f.above);
    work_.push_back(f.work);
  }
}

BinForecast ClusteringForecast::at(double ln_a) const {
  if (kicks_.empty()) return BinForecast{};
  const double u = std::clamp((ln_a - begin_) / step_, 0.0, static_cast<double>(kicks_.size() - 1));
  const auto i = std::min(static_cast<std::size_t>(u), kicks_.size() - 2);
  const double t = u - static_cast<double>(i);
  BinForecast f{(1 - t) * kicks_[i] + t * kicks_[i + 1], t < 1 ? deepest_[i] : deepest_[i + 1], {}};
  for (std::size_t k = 0; k < f.above.size(); ++k) {
    f.above[k] = (1 - t) * above_[i][k] + t * above_[i + 1][k];
    f.work[k] = (1 - t) * work_[i][k] + t * work_[i + 1][k];
  }
  return f;
}

double leaf_particles(double n, int max_leaf) {
  if (!(n >= 1) || max_leaf < 1) return 1;
  return n / static_cast<double>(OrbTree::subtree_leaves(static_cast<std::int64_t>(n), max_leaf));
}

double other_seconds(const OutputCost& o, double pm_steps) {
  const double every = static_cast<double>(o.check_every);
  const double checks = std::max(0, o.checks) + (every > 0 ? std::floor(pm_steps / every) : 0.0);
  return std::max(0, o.remaining) * std::max(0.0, o.seconds_each) + checks * std::max(0.0, o.check_seconds) +
         std::max(0.0, o.final_wait);
}

double SyncPointPrice::at(double f, double prior) const {
  if (!(f > 0)) return 0;
  return work * (weight * std::pow(std::min(f, 1.0), alpha) + (1 - weight) * std::min(prior, 1.0));
}

SyncPointPrice sync_point_price(const std::vector<CostRecord>& h, std::size_t begin, double n) {
  SyncPointPrice p;
  double full = 0, pm = 0, fulls = 0, sub_min = 0, other_min = 0;
  std::array<SubStepCost, kSubStepBuckets> sub{};
  for (std::size_t j = begin; j < h.size(); ++j) {
    const CostRecord& r = h[j];
    if (r.end_seconds > 0) {
      full += r.end_seconds, pm += r.end_pm, ++fulls;
      if (fulls == 1 || r.end_other < other_min) other_min = r.end_other;
    }
    if (r.sub_min > 0 && (sub_min == 0 || r.sub_min < sub_min)) sub_min = r.sub_min;
    for (int b = 0; b < kSubStepBuckets; ++b) {
      sub[b].syncs += r.sub[b].syncs;
      sub[b].seconds += r.sub[b].seconds;
      sub[b].active += r.sub[b].active;
    }
  }
  if (!(fulls > 0 && n > 0)) return p;
  p.valid = true;
  p.full = full / fulls;
  p.fixed = sub_min > 0 ? sub_min : std::max(0.0, other_min);
  p.work = std::max(0.0, p.full - p.fixed - pm / fulls);
  // The sub-steps' measured seconds beyond s0, and alpha that prices them so.
  double measured = 0;
  for (const SubStepCost& c : sub) measured += c.seconds - c.syncs * p.fixed;
  if (!(measured > 0 && p.work > 0)) return p;
  const auto priced = [&](double alpha) {
    double sum = 0;
    for (const SubStepCost& c : sub)
      if (c.syncs > 0) sum += c.syncs * p.work * std::pow(std::min(1.0, c.active / (c.syncs * n)), alpha);
    return sum;
  };
  // priced() falls as alpha rises (f <= 1): bisection on [0, 1], clamped at its ends.
  double lo = 0, hi = 1;
  if (priced(hi) >= measured) {
    lo = hi;
  } else if (priced(lo) <= measured) {
    hi = lo;
  } else {
    for (int i = 0; i < 50; ++i) {
      const double mid = 0.5 * (lo + hi);
      (priced(mid) > measured ? lo : hi) = mid;
    }
  }
  p.alpha = 0.5 * (lo + hi);
  p.weight = measured / (measured + p.work);
  return p;
}

double forecast_remaining_seconds(const std::vector<CostRecord>& h, double a, const ClusteringForecast& forecast,
                                  double ln_a_end, const OutputCost& outputs) {
  if (h.empty() || forecast.empty()) return -1;
  const double ln_a = std::log(a), n = forecast.particles();
  const std::size_t begin = recent_begin(h, ln_a);
  // PM steps as long as the longest recent one (the last may have been shortened to land on
  // an output: as a step length it would forecast too many sync points, and a tiny one would
  // make the loop below long on every step line).
  double dln = 0;
  for (std::size_t j = begin; j < h.size(); ++j) dln = std::max(dln, h[j].dln_a);
  const SyncPointPrice price = sync_point_price(h, begin, n);
  if (!price.valid) {
    // No full step measured in the window (a restart's records keep only their seconds):
    // seconds per force evaluation of the recent steps, times the kicks to come.
    double seconds = 0, kicks = 0;
    for (std::size_t j = begin; j < h.size(); ++j) seconds += h[j].seconds, kicks += h[j].particle_steps / n;
    if (!(seconds > 0 && kicks > 0 && dln > 0)) return -1;
    double total = 0, pm_steps = 0;
    for (double x = ln_a; x < ln_a_end - 1e-9; x += dln) {
      const double d = std::min(dln, ln_a_end - x);
      total += seconds / kicks * forecast.at(x + 0.5 * d).kicks * d / dln;
      pm_steps += d / dln;
    }
    return total + other_seconds(outputs, pm_steps);
  }
  // The deepest bin: the forecast's, lowered to the one measured once the run has deep bins.
  const CostRecord& last = h.back();
  int lower = 0;
  if (last.deepest > 0)
    lower = std::min(0, static_cast<int>(last.deepest) - forecast.at(last.ln_a + 0.5 * last.dln_a).deepest);
  double total = 0, pm_steps = 0;
  if (dln > 0)
    for (double x = ln_a; x < ln_a_end - 1e-9; x += dln) {
      const double d = std::min(dln, ln_a_end - x);
      const BinForecast f = forecast.at(x + 0.5 * d);
      double step = price.full;
      for (int k = 1; k <= std::max(0, f.deepest + lower); ++k)
        step += std::ldexp(price.fixed + price.at(f.above[static_cast<std::size_t>(k)], f.work[static_cast<std::size_t>(k)]), k - 1);
      total += step * d / dln;
      pm_steps += d / dln;
    }
  return total + other_seconds(outputs, pm_steps);
}

double predicted_remaining_seconds(const std::vector<CostRecord>& h, double a, double ln_a_end,
                                   const OutputCost& outputs) {
  const std::size_t begin = recent_begin(h, std::log(a));
  // n: the steps the fit takes (a step without both a length and seconds is left out of
  // every sum, its count included: counted, it would tilt the trend and shift its mean).
  double seconds = 0, span = 0, n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t j = begin; j < h.size(); ++j) {
    if (!(h[j].dln_a > 0 && h[j].seconds > 0)) continue;
    seconds += h[j].seconds, span += h[j].dln_a, n += 1;
    // ln(seconds per unit ln a) against ln a at the step's middle: the trend's least squares.
    const double x = h[j].ln_a + 0.5 * h[j].dln_a, y = std::log(h[j].seconds / h[j].dln_a);
    sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  if (!(span > 0)) return -1;
  const double den = n * sxx - sx * sx;
  const double beta = den > 0 ? std::clamp((n * sxy - sx * sy) / den, 0.0, kMaxCostGrowth) : 0.0;
  // The window's mean rate belongs to its mean ln a; grown from there to now.
  const double ln_a = std::log(a);
  const double rate = seconds / span * std::exp(beta * (ln_a - sx / n));
  const double left = std::max(0.0, ln_a_end - ln_a);
  const double steps = rate * (beta * left > 1e-9 ? std::expm1(beta * left) / beta : left);
  return steps + other_seconds(outputs, left * n / span);   // PM steps to come as long as the recent ones
}

}  // namespace orbis
