#include "integrate/conservation.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace orbis {

double softened_pair_sum(const std::vector<Vec3d>& x, double softening, const std::vector<double>* weights) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(x.size());
  const double eps2 = softening * softening;
  std::vector<double> row(x.size(), 0.0);
  // Rows shrink with i: dynamic scheduling keeps the threads even; each row in order.
#pragma omp parallel for schedule(dynamic, 16)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    double s = 0;
    const Vec3d xi = x[i];
    if (weights) {
      for (std::ptrdiff_t j = i + 1; j < n; ++j) {
        const Vec3d d = x[j] - xi;
        s += (*weights)[j] / std::sqrt(norm2(d) + eps2);
      }
      s *= (*weights)[i];
    } else {
      for (std::ptrdiff_t j = i + 1; j < n; ++j) {
        const Vec3d d = x[j] - xi;
        s += 1.0 / std::sqrt(norm2(d) + eps2);
      }
    }
    row[i] = s;
  }
  double total = 0;
  for (double s : row) total += s;
  return total;
}

std::vector<double> softened_potentials(const std::vector<Vec3d>& x, double softening,
                                        const std::vector<double>* weights) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(x.size());
  const double eps2 = softening * softening;
  std::vector<double> phi(x.size(), 0.0);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < n; ++i) {
    double s = 0;
    const Vec3d xi = x[i];
    for (std::ptrdiff_t j = 0; j < n; ++j) {
      if (j == i) continue;
      const double inv = 1.0 / std::sqrt(norm2(x[j] - xi) + eps2);
      s += weights ? (*weights)[j] * inv : inv;
    }
    phi[i] = s;
  }
  return phi;
}

double pair_sum_of_potentials(const std::vector<double>& phi, const std::vector<double>* weights) {
  double total = 0;
  for (std::size_t i = 0; i < phi.size(); ++i) total += weights ? (*weights)[i] * phi[i] : phi[i];
  return 0.5 * total;
}

std::vector<double> mass_weights(const Particles& p) {
  std::vector<double> w(p.masses.size());
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = p.masses[i] / p.mass;
  return w;
}

ConservedQuantities conserved_quantities(const Particles& p, double g, std::optional<double> pair_sum) {
  ConservedQuantities c;
  const double m = p.mass;
  // Sums of weight (mass / m) times v^2, v, x × v: weight 1 without individual masses.
  double wv2 = 0, w_total = 0, v2 = 0, r2 = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const Vec3d& x = p.pos[i];
    const Vec3d& v = p.mom[i];
    const double w = p.masses.empty() ? 1.0 : p.masses[i] / m;
    wv2 += w * norm2(v);
    w_total += w;
    v2 += norm2(v);
    r2 += norm2(x);
    c.momentum += v * w;
    c.angular_momentum += Vec3d{x.y * v.z - x.z * v.y, x.z * v.x - x.x * v.z, x.x * v.y - x.y * v.x} * w;
  }
  const double n = static_cast<double>(p.size());
  c.mass = m * w_total;
  c.kinetic = 0.5 * m * wv2;
  c.momentum = c.momentum * m;
  c.angular_momentum = c.angular_momentum * m;
  c.r_rms = n > 0 ? std::sqrt(r2 / n) : 0;
  c.v_rms = n > 0 ? std::sqrt(v2 / n) : 0;
  if (pair_sum) {
    c.potential = -g * m * m * *pair_sum;
    c.has_potential = true;
  }
  return c;
}

ConservationRecord conservation_record(double t, const ConservedQuantities& now, const ConservedQuantities* start) {
  ConservationRecord r;
  r.t = t;
  r.now = now;
  const ConservedQuantities& s = start ? *start : now;
  // The velocity scale: the start's rms velocity, or now's where that is larger (a system that
  // starts at rest, a cold collapse, has none at the start).
  const double v_scale = std::max(s.v_rms, now.v_rms);
  const double p_scale = s.mass * v_scale, l_scale = s.mass * s.r_rms * v_scale;
  if (now.has_potential && s.has_potential) r.energy_drift = (now.energy() - s.energy()) / std::abs(s.energy());
  r.momentum_drift = p_scale > 0 ? norm(now.momentum - s.momentum) / p_scale : 0;
  r.angular_momentum_drift = l_scale > 0 ? norm(now.angular_momentum - s.angular_momentum) / l_scale : 0;
  return r;
}

std::string conservation_line(const ConservationRecord& r) {
  const ConservedQuantities& c = r.now;
  return fmt::format(
      "conservation at t = {:.6g}: {}K = {:.8e}; P = ({:.3e}, {:.3e}, {:.3e}), |dP|/(M v_rms) = {:.2e}; "
      "L = ({:.4e}, {:.4e}, {:.4e}), |dL|/(M r_rms v_rms) = {:.2e}",
      r.t,
      c.has_potential
          ? fmt::format("E = {:.8e}, (E - E0)/|E0| = {:+.3e}, W = {:.8e}, ", c.energy(), r.energy_drift, c.potential)
          : std::string(),
      c.kinetic, c.momentum.x, c.momentum.y, c.momentum.z, r.momentum_drift, c.angular_momentum.x,
      c.angular_momentum.y, c.angular_momentum.z, r.angular_momentum_drift);
}

}  // namespace orbis
