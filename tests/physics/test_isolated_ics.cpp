// The isolated-system generators (ic/plummer.hpp, ic/hernquist.hpp, ic/parabolic_orbit.hpp)
// against their analytic models, each reference written here independently:
//  - positions: the sampled cumulative mass profile against M(r) (Kolmogorov-Smirnov
//    distance within the 1% critical value 1.63/sqrt(N));
//  - equilibrium: the virial ratio 2K/|W| (W by a direct double sum over all pairs) is 1
//    within its statistical error, measured over eight seeds;
//  - velocities: the velocity dispersion in radial bins against the isotropic Jeans
//    solution sigma^2(r) = (1/rho) int_r^inf rho G M / s^2 ds, integrated numerically here;
//  - the merger orbit: from the two centres of mass, the Kepler energy is 0 and the
//    pericentre (from the orbital elements) is the requested one; a merger of unequal
//    spheres ([ic] mass_ratio) has individual masses in the ratio asked, the second sphere's
//    scale radius in its cube root, and the equal one is bit for bit the two spheres it always was;
// and the reproducibility of a seed, the centre-of-mass frame, bad input. The profiles are
// tested about the model's centre (SphereSettings::centre_of_mass_frame off): the shift to
// the centre of mass moves the radii by ~sqrt(<r^2>/3N), a statistical offset of its own.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "core/error.hpp"
#include "core/params.hpp"
#include "ic/hernquist.hpp"
#include "ic/isolated_ics.hpp"
#include "ic/parabolic_orbit.hpp"
#include "ic/plummer.hpp"

using namespace orbis;

namespace {

constexpr double kPi = 3.14159265358979323846;

// The models as written in the papers (Plummer 1911, Hernquist 1990), G = M = a = 1 unless given.
double plummer_rho(double r) { return 3 / (4 * kPi) * std::pow(1 + r * r, -2.5); }
double plummer_mass(double r) { return r * r * r / std::pow(1 + r * r, 1.5); }
double hernquist_rho(double r) { return 1 / (2 * kPi * r * std::pow(1 + r, 3)); }
double hernquist_mass(double r) { return r * r / ((1 + r) * (1 + r)); }

// The isotropic Jeans solution sigma^2(r) = (1/rho) int_r^inf rho M / s^2 ds (G = 1), by
// Simpson's rule in ln s over 12 decades (the integrands fall as s^-6 or faster).
double jeans_dispersion2(double r, const std::function<double(double)>& rho,
                         const std::function<double(double)>& mass) {
  const int n = 4000;   // even
  const double t0 = std::log(r), h = 12 * std::log(10.0) / n;
  double sum = 0;
  for (int k = 0; k <= n; ++k) {
    const double s = std::exp(t0 + k * h);
    const double f = rho(s) * mass(s) / (s * s) * s;   // ds = s dt
    sum += f * (k == 0 || k == n ? 1 : (k % 2 ? 4 : 2));
  }
  return sum * h / 3 / rho(r);
}

double radius(const Vec3d& x) { return norm(x); }

// Kolmogorov-Smirnov distance between the sampled radii and the cumulative profile cdf.
double ks_distance(const IsolatedSystem& s, const std::function<double(double)>& cdf) {
  std::vector<double> r;
  for (const Vec3d& x : s.pos) r.push_back(radius(x));
  std::sort(r.begin(), r.end());
  const double n = static_cast<double>(r.size());
  double d = 0;
  for (std::size_t i = 0; i < r.size(); ++i) {
    const double f = cdf(r[i]);
    d = std::max({d, std::fabs(f - i / n), std::fabs(f - (i + 1) / n)});
  }
  return d;
}

// 2K / |W|, W = -G m^2 sum_{i<j} 1/r_ij in double.
double virial_ratio(const IsolatedSystem& s, double g) {
  double k = 0, w = 0;
  for (const Vec3d& v : s.vel) k += 0.5 * s.particle_mass * norm2(v);
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) w -= g * s.particle_mass * s.particle_mass / norm(s.pos[i] - s.pos[j]);
  return 2 * k / std::fabs(w);
}

// The virial ratio over eight seeds: mean and standard deviation of one sample.
void check_virial(const std::function<IsolatedSystem(std::uint64_t)>& make, double g, const char* name) {
  std::vector<double> q;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) q.push_back(virial_ratio(make(seed), g));
  double mean = 0, var = 0;
  for (double x : q) mean += x / q.size();
  for (double x : q) var += (x - mean) * (x - mean) / (q.size() - 1);
  const double sd = std::sqrt(var);
  std::printf("%s: 2K/|W| over 8 seeds = %.4f +- %.4f (one sample's scatter %.4f)\n", name, mean,
              sd / std::sqrt(8.0), sd);
  CHECK(std::fabs(mean - 1) < 3 * sd / std::sqrt(8.0) + 2e-3);
  CHECK(sd < 0.05);   // statistical: ~1/sqrt(N) for a few thousand particles
}

// Velocity dispersion in `bins` radial bins of equal counts: sum v^2/3 against the Jeans
// sigma^2 averaged over the same particles; returns the largest deviation in units of the
// bin's statistical error sqrt(2 / (3 n)) (v^2 of isotropic Gaussian-like velocities).
double dispersion_deviation(const IsolatedSystem& s, int bins, const std::function<double(double)>& sigma2,
                            const char* name) {
  std::vector<std::size_t> idx(s.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return radius(s.pos[a]) < radius(s.pos[b]); });
  double worst = 0;
  std::printf("%s: r_median   sigma^2 sampled   Jeans    deviation/error\n", name);
  for (int b = 0; b < bins; ++b) {
    const std::size_t lo = idx.size() * b / bins, hi = idx.size() * (b + 1) / bins;
    double measured = 0, model = 0;
    for (std::size_t k = lo; k < hi; ++k) {
      measured += norm2(s.vel[idx[k]]) / 3;
      model += sigma2(radius(s.pos[idx[k]]));
    }
    const double n = static_cast<double>(hi - lo);
    const double dev = (measured / model - 1) / std::sqrt(2 / (3 * n));
    std::printf("  %8.3f  %12.5f  %12.5f  %6.2f\n", radius(s.pos[idx[(lo + hi) / 2]]), measured / n, model / n, dev);
    worst = std::max(worst, std::fabs(dev));
  }
  return worst;
}

}  // namespace

TEST_CASE("Plummer sphere: mass profile, virial equilibrium, Jeans dispersion, CoM frame") {
  SphereSettings set;
  set.n = 4096;
  set.seed = 11;
  set.centre_of_mass_frame = false;
  const IsolatedSystem s = make_plummer(set);
  set.centre_of_mass_frame = true;
  const IsolatedSystem com = make_plummer(set);
  REQUIRE(s.size() == 4096);
  CHECK(s.particle_mass == doctest::Approx(1.0 / 4096));
  const double ks = ks_distance(s, plummer_mass);
  std::printf("Plummer: KS distance %.4f = %.2f / sqrt(N)\n", ks, ks * 64);
  CHECK(ks < 1.63 / std::sqrt(4096.0));
  CHECK(norm(centre_of_mass(com)) < 1e-12);
  CHECK(norm(centre_of_mass_velocity(com)) < 1e-12);
  CHECK(norm(com.pos[9] - (s.pos[9] - centre_of_mass(s))) < 1e-12);
  // The library's Jeans solution against the numerical one.
  for (double r : {0.01, 0.3, 1.0, 4.0, 30.0})
    CHECK(plummer_dispersion2(r, 1, 1, 1) == doctest::Approx(jeans_dispersion2(r, plummer_rho, plummer_mass)).epsilon(1e-6));
  CHECK(dispersion_deviation(s, 8, [](double r) { return jeans_dispersion2(r, plummer_rho, plummer_mass); },
                             "Plummer") < 4);
  check_virial([](std::uint64_t seed) {
    SphereSettings t;
    t.n = 2048;
    t.seed = seed;
    return make_plummer(t);
  }, 1.0, "Plummer");
}

TEST_CASE("Plummer sphere in physical units and truncated: scales as G M / a") {
  SphereSettings set;
  set.n = 2000;
  set.seed = 3;
  set.mass = 10.0;       // 1e11 Msun in GADGET's 1e10 Msun
  set.scale_radius = 5;  // kpc
  set.g = 43007.1;       // kpc (km/s)^2 / 1e10 Msun
  set.r_max = 20;
  set.centre_of_mass_frame = false;
  const IsolatedSystem s = make_plummer(set);
  double r_far = 0;
  for (const Vec3d& x : s.pos) r_far = std::max(r_far, radius(x));
  CHECK(r_far < 20);
  CHECK(s.total_mass() == doctest::Approx(10 * plummer_mass(4.0)));
  // Velocities in units of sqrt(G M / a): the N-body system of the same seed, scaled.
  SphereSettings unit = set;
  unit.mass = 1;
  unit.scale_radius = 1;
  unit.g = 1;
  unit.r_max = 4;
  unit.centre_of_mass_frame = false;
  const IsolatedSystem u = make_plummer(unit);
  const double v_unit = std::sqrt(43007.1 * 10 / 5);
  for (std::size_t i = 0; i < s.size(); i += 97) {
    CHECK(norm(s.pos[i] - 5.0 * u.pos[i]) < 1e-9 * 5);
    CHECK(norm(s.vel[i] - v_unit * u.vel[i]) < 1e-9 * v_unit);
  }
}

TEST_CASE("Hernquist sphere: distribution function, mass profile, virial equilibrium, Jeans dispersion") {
  // The DF's shape: series below q = 0.1 and closed form above, against long double.
  for (double q : {1e-3, 0.03, 0.0999, 0.1, 0.3, 0.7, 0.95, 0.999}) {
    const long double ql = q, s = std::sqrt(1 - ql * ql);
    const long double ref = (3 * std::asin(ql) + ql * s * (1 - 2 * ql * ql) * (8 * ql * ql * ql * ql - 8 * ql * ql - 3)) /
                            std::pow(1 - ql * ql, 2.5L);
    INFO("q = " << q);
    // long double's own cancellation at small q: 1e-19 / q^4 relative.
    CHECK(std::fabs(hernquist_df_shape(q) - ref) <= (1e-12L + 1e-19L / (ql * ql * ql * ql)) * ref);
  }
  SphereSettings set;
  set.n = 4096;
  set.seed = 5;
  set.centre_of_mass_frame = false;
  const IsolatedSystem s = make_hernquist(set);
  set.centre_of_mass_frame = true;
  const IsolatedSystem com = make_hernquist(set);
  std::printf("Hernquist: the sample's centre of mass lies %.3f a from the model's centre\n", norm(centre_of_mass(s)));
  const double x_max = hernquist_mass(100.0);   // the default truncation, 100 a
  CHECK(s.total_mass() == doctest::Approx(x_max));
  double r_far = 0;
  for (const Vec3d& x : s.pos) r_far = std::max(r_far, radius(x));
  CHECK(r_far < 100);
  const double ks = ks_distance(s, [&](double r) { return std::min(1.0, hernquist_mass(r) / x_max); });
  std::printf("Hernquist: KS distance %.4f = %.2f / sqrt(N)\n", ks, ks * 64);
  CHECK(ks < 1.63 / std::sqrt(4096.0));
  CHECK(norm(centre_of_mass(com)) < 1e-12);
  CHECK(norm(centre_of_mass_velocity(com)) < 1e-12);
  for (double r : {0.01, 0.3, 1.0, 4.0, 30.0})
    CHECK(hernquist_dispersion2(r, 1, 1, 1) ==
          doctest::Approx(jeans_dispersion2(r, hernquist_rho, hernquist_mass)).epsilon(1e-6));
  CHECK(dispersion_deviation(s, 8, [](double r) { return jeans_dispersion2(r, hernquist_rho, hernquist_mass); },
                             "Hernquist") < 4);
  // Truncated at 100 a, the outer 2% of the mass is missing: its shell adds a constant to
  // the potential inside, no force, and the virial theorem's surface term is ~1e-4.
  check_virial([](std::uint64_t seed) {
    SphereSettings t;
    t.n = 2048;
    t.seed = seed;
    return make_hernquist(t);
  }, 1.0, "Hernquist");
  CHECK(hernquist_radius_of_mass_fraction(hernquist_mass(7.0), 1.0) == doctest::Approx(7.0));
}

TEST_CASE("a seed gives the same system; another seed another") {
  SphereSettings set;
  set.n = 500;
  set.seed = 42;
  const IsolatedSystem a = make_hernquist(set), b = make_hernquist(set);
  CHECK(std::memcmp(a.pos.data(), b.pos.data(), a.size() * sizeof(Vec3d)) == 0);
  CHECK(std::memcmp(a.vel.data(), b.vel.data(), a.size() * sizeof(Vec3d)) == 0);
  set.seed = 43;
  CHECK(std::memcmp(make_hernquist(set).pos.data(), a.pos.data(), a.size() * sizeof(Vec3d)) != 0);
}

TEST_CASE("merger: a parabolic orbit with the requested pericentre") {
  SphereSettings big, small;
  big.n = 2000;
  big.seed = 1;
  small.n = 1000;   // half the mass with half the particles: the same particle mass
  small.mass = 0.5;
  small.scale_radius = 0.7;
  small.seed = 2;
  small.r_max = hernquist_radius_of_mass_fraction(hernquist_mass(100.0), 0.7);   // the same fraction
  const IsolatedSystem a = make_hernquist(big), b = make_hernquist(small);
  REQUIRE(a.particle_mass == doctest::Approx(b.particle_mass).epsilon(1e-12));
  const double g = 2.5;
  const ParabolicEncounter orbit{20.0, 1.5, g};
  const IsolatedSystem m = place_on_parabolic_orbit(a, b, orbit);
  REQUIRE(m.size() == 3000);
  // The pair's frame.
  CHECK(norm(centre_of_mass(m)) < 1e-12);
  CHECK(norm(centre_of_mass_velocity(m)) < 1e-12);
  // Each system's centre of mass and velocity, from its particles.
  Vec3d xa{0, 0, 0}, xb{0, 0, 0}, va{0, 0, 0}, vb{0, 0, 0};
  for (std::size_t i = 0; i < 2000; ++i) xa += m.pos[i] * (1.0 / 2000), va += m.vel[i] * (1.0 / 2000);
  for (std::size_t i = 2000; i < 3000; ++i) xb += m.pos[i] * (1.0 / 1000), vb += m.vel[i] * (1.0 / 1000);
  const Vec3d r = xb - xa, v = vb - va;
  const double mu = g * (a.total_mass() + b.total_mass());
  const double energy = 0.5 * norm2(v) - mu / norm(r);
  const Vec3d h{r.y * v.z - r.z * v.y, r.z * v.x - r.x * v.z, r.x * v.y - r.y * v.x};
  const double h2 = norm2(h);
  const double e = std::sqrt(std::max(0.0, 1 + 2 * energy * h2 / (mu * mu)));
  const double r_p = h2 / (mu * (1 + e));
  std::printf("merger: d = %.6f, E / (mu/d) = %.2e, e = %.12f, r_p = %.9f (asked 1.5)\n", norm(r),
              energy / (mu / norm(r)), e, r_p);
  CHECK(norm(r) == doctest::Approx(20.0).epsilon(1e-12));
  CHECK(std::fabs(energy) < 1e-12 * mu / 20.0);
  CHECK(r_p == doctest::Approx(1.5).epsilon(1e-10));
  CHECK(dot(r, v) < 0);   // approaching
  // Bad input.
  CHECK_THROWS_AS(place_on_parabolic_orbit(a, b, ParabolicEncounter{1.0, 1.5, g}), Error);
  // Systems of different particle masses: individual masses, their mean the particle mass,
  // and the centre of mass weighted by them.
  SphereSettings other = small;
  other.n = 900;
  const IsolatedSystem c = make_hernquist(other);
  const IsolatedSystem unequal = place_on_parabolic_orbit(a, c, orbit);
  REQUIRE(unequal.masses.size() == 2900);
  CHECK(unequal.masses.front() == a.particle_mass);
  CHECK(unequal.masses.back() == c.particle_mass);
  CHECK(unequal.particle_mass == doctest::Approx(unequal.total_mass() / 2900).epsilon(1e-14));
  CHECK(unequal.total_mass() == doctest::Approx(a.total_mass() + c.total_mass()).epsilon(1e-12));
  CHECK(norm(centre_of_mass(unequal)) < 1e-12);
  CHECK(norm(centre_of_mass_velocity(unequal)) < 1e-12);
}

TEST_CASE("merger of unequal spheres: [ic] mass_ratio weighs the second's particles, its radius the cube root") {
  const std::string base = "[ic]\nkind = \"merger\"\nparticles = 2000\nseparation = 40.0\npericentre = 4.0\n"
                           "scale_radius = 2.0\nseed = 7\n[units]\nsystem = \"nbody\"\n[gravity]\nboundary = \"vacuum\"\n"
                           "softening = 0.05\n[time]\nt_end = 1.0\nmax_dt = 0.1\n";
  // mass_ratio = 1 (the default): one mass, bit for bit the two spheres of seeds 7 and 8 on the orbit.
  const Particles equal = make_isolated_ics(Params::parse(base, "m.toml"));
  SphereSettings s;
  s.n = 2000;
  s.scale_radius = 2.0;
  s.seed = 7;
  const IsolatedSystem a = make_hernquist(s);
  s.seed = 8;
  const IsolatedSystem reference = place_on_parabolic_orbit(a, make_hernquist(s), ParabolicEncounter{40.0, 4.0, 1.0});
  CHECK(equal.masses.empty());
  CHECK(equal.mass == reference.particle_mass);
  REQUIRE(equal.size() == 4000);
  CHECK(std::memcmp(equal.pos.data(), reference.pos.data(), 4000 * sizeof(Vec3d)) == 0);
  CHECK(std::memcmp(equal.mom.data(), reference.vel.data(), 4000 * sizeof(Vec3d)) == 0);

  const Particles unequal = make_isolated_ics(Params::parse(base, "m.toml", {"ic.mass_ratio=4"}));
  REQUIRE(unequal.masses.size() == 4000);
  CHECK(unequal.masses[0] == a.particle_mass);   // the first sphere as before
  CHECK(unequal.masses[1999] == a.particle_mass);
  CHECK(unequal.masses[2000] == doctest::Approx(4 * a.particle_mass).epsilon(1e-13));
  CHECK(unequal.mass == doctest::Approx(2.5 * a.particle_mass).epsilon(1e-13));   // the mean
  // The pair's frame, weighted by the masses.
  Vec3d x{0, 0, 0}, v{0, 0, 0};
  for (std::size_t i = 0; i < 4000; ++i) x += unequal.pos[i] * unequal.masses[i], v += unequal.mom[i] * unequal.masses[i];
  CHECK(norm(x) < 1e-10);
  CHECK(norm(v) < 1e-10);
  // The second sphere is the Hernquist sphere of mass 4 and scale radius 2 4^(1/3) (one density
  // scale M / (2 pi a^3) for both), seed 8, moved onto the orbit.
  s.mass = 4;
  s.scale_radius = 2.0 * std::cbrt(4.0);
  const IsolatedSystem b = make_hernquist(s);
  double worst = 0;
  for (std::size_t i = 0; i < 2000; ++i)
    worst = std::max(worst, norm((unequal.pos[2000 + i] - unequal.pos[2000]) - (b.pos[i] - b.pos[0])) / s.scale_radius);
  CHECK(worst < 1e-12);
  CHECK(b.particle_mass == doctest::Approx(4 * a.particle_mass).epsilon(1e-13));
}
