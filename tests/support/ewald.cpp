#include "support/ewald.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/units.hpp"

namespace orbis::test {
namespace {
constexpr double kPi = 3.14159265358979323846;
constexpr int kHMax = 15;
}  // namespace

EwaldSum::EwaldSum(const std::vector<Vec3d>& positions, const std::vector<double>& masses, double box)
    : pos_(positions), mass_(masses), box_(box), alpha_(2 * 4.6 / box) {
  const double k_unit = 2 * kPi / box;
  for (int hx = 0; hx <= kHMax; ++hx)
    for (int hy = -kHMax; hy <= kHMax; ++hy)
      for (int hz = -kHMax; hz <= kHMax; ++hz) {
        // Half space: hx > 0, or hx == 0 and (hy > 0, or hy == 0 and hz > 0).
        if (hx == 0 && (hy < 0 || (hy == 0 && hz <= 0))) continue;
        if (hx * hx + hy * hy + hz * hz > kHMax * kHMax) continue;
        Vec3d k{hx * k_unit, hy * k_unit, hz * k_unit};
        const double k2 = norm2(k);
        kvec_.push_back(k);
        kfactor_.push_back(2.0 * 4.0 * kPi / (box * box * box) * std::exp(-k2 / (4 * alpha_ * alpha_)) / k2);
      }
  structure_.assign(kvec_.size(), {0.0, 0.0});
  const long nk = static_cast<long>(kvec_.size());
#pragma omp parallel for schedule(static)
  for (long q = 0; q < nk; ++q) {
    std::complex<double> s{0, 0};
    for (std::size_t j = 0; j < pos_.size(); ++j) {
      const double phase = dot(kvec_[q], pos_[j]);
      s += mass_[j] * std::complex<double>(std::cos(phase), std::sin(phase));
    }
    structure_[q] = s;
  }
}

Vec3d EwaldSum::acceleration(const Vec3d& x) const {
  Vec3d acc;
  // Real space, minimal image: the erfc-screened Newtonian pull toward each source.
  for (std::size_t j = 0; j < pos_.size(); ++j) {
    Vec3d d{periodic_wrap_delta(pos_[j].x - x.x, box_), periodic_wrap_delta(pos_[j].y - x.y, box_),
            periodic_wrap_delta(pos_[j].z - x.z, box_)};
    const double r2 = norm2(d);
    if (r2 == 0) continue;
    const double r = std::sqrt(r2);
    const double screen = std::erfc(alpha_ * r) + 2 * alpha_ * r / std::sqrt(kPi) * std::exp(-alpha_ * alpha_ * r2);
    acc += d * (mass_[j] * screen / (r2 * r));
  }
  // k space: a(x) = sum_k (4 pi / L^3) e^{-k^2/4a^2} / k^2 * k * Im[e^{-i k.x} S(k)], summed
  // over both half spaces (hence the factor 2 in kfactor_).
  for (std::size_t q = 0; q < kvec_.size(); ++q) {
    const double phase = dot(kvec_[q], x);
    const double im = (std::complex<double>(std::cos(phase), -std::sin(phase)) * structure_[q]).imag();
    acc += kvec_[q] * (kfactor_[q] * im);
  }
  return acc;
}

double EwaldSum::potential(const Vec3d& x) const {
  // Real space, minimal image: -m erfc(alpha r) / r; a source at r = 0 gives instead the
  // removal of its own term from the k-space sum, + m 2 alpha / sqrt(pi) (the limit of
  // erf(alpha r) / r).
  double phi = 0, total_mass = 0;
  for (std::size_t j = 0; j < pos_.size(); ++j) {
    total_mass += mass_[j];
    Vec3d d{periodic_wrap_delta(pos_[j].x - x.x, box_), periodic_wrap_delta(pos_[j].y - x.y, box_),
            periodic_wrap_delta(pos_[j].z - x.z, box_)};
    const double r = std::sqrt(norm2(d));
    phi += r == 0 ? mass_[j] * 2 * alpha_ / std::sqrt(kPi) : -mass_[j] * std::erfc(alpha_ * r) / r;
  }
  // k space: -sum_k (4 pi / L^3) e^{-k^2/4a^2} / k^2 Re[e^{-i k.x} S(k)] over both half spaces.
  for (std::size_t q = 0; q < kvec_.size(); ++q) {
    const double phase = dot(kvec_[q], x);
    phi -= kfactor_[q] * (std::complex<double>(std::cos(phase), -std::sin(phase)) * structure_[q]).real();
  }
  // The background of density -M / L^3 (the k = 0 mode): + pi M / (L^3 alpha^2).
  return phi + kPi * total_mass / (box_ * box_ * box_ * alpha_ * alpha_);
}

double ewald_potential_energy(const std::vector<Vec3d>& positions, double mass, double box) {
  const EwaldSum ewald(positions, std::vector<double>(positions.size(), mass), box);
  std::vector<double> phi(positions.size());
  const auto n = static_cast<std::int64_t>(positions.size());
#pragma omp parallel for schedule(dynamic, 16)
  for (std::int64_t i = 0; i < n; ++i) phi[static_cast<std::size_t>(i)] = ewald.potential(positions[static_cast<std::size_t>(i)]);
  double sum = 0;
  for (double p : phi) sum += p;
  return 0.5 * units::G * mass * sum;   // phi holds the sources' masses
}

Vec3d ewald_acceleration(const Vec3d& dx, double box) {
  EwaldSum sum({dx}, {1.0}, box);
  return sum.acceleration(Vec3d{0, 0, 0});
}

EwaldSample ewald_sample(const std::vector<Vec3d>& positions, double mass, double box, std::size_t stride) {
  EwaldSample out;
  for (std::size_t i = 0; i < positions.size(); i += stride) out.index.push_back(i);
  const EwaldSum ewald(positions, std::vector<double>(positions.size(), mass), box);
  out.acc.resize(out.index.size());
  const auto n = static_cast<std::int64_t>(out.index.size());
#pragma omp parallel for schedule(dynamic, 16)
  for (std::int64_t q = 0; q < n; ++q)
    out.acc[static_cast<std::size_t>(q)] = ewald.acceleration(positions[out.index[static_cast<std::size_t>(q)]]) * units::G;
  return out;
}

ForceErrors relative_force_errors(const std::vector<Vec3d>& acc, const EwaldSample& reference) {
  std::vector<double> err;
  for (std::size_t q = 0; q < reference.index.size(); ++q)
    err.push_back(norm(acc[reference.index[q]] - reference.acc[q]) / norm(reference.acc[q]));
  std::sort(err.begin(), err.end());
  return {err[err.size() / 2], err[static_cast<std::size_t>(0.99 * static_cast<double>(err.size() - 1))], err.back()};
}

}  // namespace orbis::test
