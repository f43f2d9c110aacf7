// Test-only particle sets and references for the friends-of-friends tests and benchmark:
// uniform and Plummer-sphere samples, and a brute-force O(N^2) friends-of-friends.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/particles.hpp"
#include "core/vec3.hpp"

namespace orbis::testing {

inline Vec3d random_direction(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (;;) {
    Vec3d v{u(rng), u(rng), u(rng)};
    const double r2 = norm2(v);
    if (r2 > 1e-12 && r2 <= 1.0) return v * (1.0 / std::sqrt(r2));
  }
}

inline void add_uniform(std::vector<Vec3d>& pos, std::size_t n, double box, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, box);
  for (std::size_t i = 0; i < n; ++i) pos.push_back({u(rng), u(rng), u(rng)});
}

// Plummer sphere of scale radius `a` truncated at `r_max`, wrapped into the box.
inline void add_plummer(std::vector<Vec3d>& pos, std::size_t n, const Vec3d& centre, double a,
                        double r_max, double box, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (std::size_t i = 0; i < n;) {
    const double q = std::max(u(rng), 1e-12);
    const double r = a / std::sqrt(std::pow(q, -2.0 / 3.0) - 1.0);   // inverse of M(<r) = r^3/(r^2+a^2)^(3/2)
    if (r > r_max) continue;
    Vec3d x = centre + random_direction(rng) * r;
    for (int d = 0; d < 3; ++d) x[d] = periodic_wrap_position(x[d], box);
    pos.push_back(x);
    ++i;
  }
}

// Particles with IDs 1..N in a shuffled order (so IDs and indices differ), zero momenta.
inline Particles make_particles(const std::vector<Vec3d>& pos, double mass, std::mt19937_64& rng) {
  Particles p;
  p.resize(pos.size());
  p.pos = pos;
  p.mass = mass;
  std::vector<std::uint64_t> ids(pos.size());
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = i + 1;
  std::shuffle(ids.begin(), ids.end(), rng);
  p.id = ids;
  return p;
}

// The FoF benchmarks' clustered set of side^3 particles: Plummer haloes with a power-law mass
// spectrum (dN/dM ~ M^-1.9 from 32 to max_halo particles; scale radius R200m / 5 at 200 x the
// mean density), a fraction in_haloes of the particles, in a uniform background; haloes one
// after another, then the background; IDs 1..N in that order, mass 1, zero momenta.
inline Particles plummer_halo_set(int side, double box, std::mt19937_64& rng, double in_haloes_fraction = 0.45,
                                  double max_halo = 2e5) {
  const std::size_t n = static_cast<std::size_t>(side) * side * side;
  const double spacing = box / side;
  std::vector<Vec3d> pos;
  pos.reserve(n);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::size_t in_haloes = 0;
  while (in_haloes < in_haloes_fraction * n) {
    // dN/dM ~ M^-1.9 between 32 and max_halo particles (inverse transform).
    const double lo = std::pow(32.0, -0.9), hi = std::pow(max_halo, -0.9);
    const auto m = static_cast<std::size_t>(std::pow(lo + u(rng) * (hi - lo), -1.0 / 0.9));
    // Scale radius a = R200m / 5 with R200m = spacing (3 M / (4 pi 200))^(1/3).
    const double r200 = spacing * std::cbrt(3.0 * m / (4.0 * 3.14159265 * 200.0));
    const Vec3d centre{u(rng) * box, u(rng) * box, u(rng) * box};
    add_plummer(pos, m, centre, r200 / 5.0, r200, box, rng);
    in_haloes += m;
  }
  add_uniform(pos, n > pos.size() ? n - pos.size() : 0, box, rng);
  pos.resize(n);
  Particles p;
  p.resize(n);
  p.pos = pos;
  p.mass = 1.0;
  for (std::size_t i = 0; i < n; ++i) p.id[i] = i + 1;
  return p;
}

// Brute-force friends-of-friends: connected components of all pairs with minimum-image
// separation <= link, by breadth-first search. Returns the groups with >= min_members as
// sorted ID lists, ordered by descending size then smallest ID.
inline std::vector<std::vector<std::uint64_t>> brute_force_fof(const Particles& p, double box,
                                                               double link, std::size_t min_members) {
  const std::size_t n = p.size();
  std::vector<int> label(n, -1);
  std::vector<std::vector<std::uint64_t>> groups;
  std::vector<std::size_t> queue;
  for (std::size_t seed = 0; seed < n; ++seed) {
    if (label[seed] >= 0) continue;
    label[seed] = 1;
    queue.assign(1, seed);
    std::vector<std::uint64_t> ids;
    for (std::size_t head = 0; head < queue.size(); ++head) {
      const std::size_t i = queue[head];
      ids.push_back(p.id[i]);
      for (std::size_t j = 0; j < n; ++j) {
        if (label[j] >= 0) continue;
        double d2 = 0;
        for (int d = 0; d < 3; ++d) {
          const double dx = periodic_wrap_delta(p.pos[i][d] - p.pos[j][d], box);
          d2 += dx * dx;
        }
        if (d2 <= link * link) {
          label[j] = 1;
          queue.push_back(j);
        }
      }
    }
    if (ids.size() < min_members) continue;
    std::sort(ids.begin(), ids.end());
    groups.push_back(std::move(ids));
  }
  std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
    return a.size() != b.size() ? a.size() > b.size() : a.front() < b.front();
  });
  return groups;
}

}  // namespace orbis::testing
