#include "support/clustered_particles.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/units.hpp"

namespace orbis::test {
namespace {

constexpr double kPi = 3.14159265358979323846;

// splitmix64: small, fast, identical everywhere (std:: distributions are not).
struct Rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }   // [0, 1)
};

// A Plummer sphere of scale radius b, truncated at 6 b, centred at c, wrapped into the box.
void add_plummer(std::vector<Vec3d>& out, std::size_t n, const Vec3d& c, double b, double box, Rng& rng) {
  for (std::size_t k = 0; k < n;) {
    const double u = rng.uniform();
    if (u <= 0) continue;
    const double r = b / std::sqrt(std::pow(u, -2.0 / 3.0) - 1.0);
    if (!(r < 6 * b)) continue;
    const double cos_t = 2 * rng.uniform() - 1, phi = 2 * kPi * rng.uniform();
    const double sin_t = std::sqrt(1 - cos_t * cos_t);
    Vec3d x{c.x + r * sin_t * std::cos(phi), c.y + r * sin_t * std::sin(phi), c.z + r * cos_t};
    for (int d = 0; d < 3; ++d) x[d] = periodic_wrap_position(x[d], box);
    out.push_back(x);
    ++k;
  }
}

}  // namespace

std::vector<Vec3d> clustered_particles(int n_side, double box, std::uint64_t seed, double halo_fraction,
                                       double halo_scale) {
  Rng rng{seed};
  const double n_total = std::pow(static_cast<double>(n_side), 3);
  const int n_grid = static_cast<int>(std::lround(std::cbrt((1 - halo_fraction) * n_total)));

  // Displacement psi(q) = sum A k_hat sin(k.q + phase), the gradient of a potential; the
  // amplitudes fall as k^-1.5 and sum_k A k = 1.4, past the first shell crossings.
  struct Mode {
    Vec3d k;
    double amp, phase;
  };
  std::vector<Mode> modes;
  double norm_sum = 0;
  while (modes.size() < 48) {
    const int nx = static_cast<int>(rng.next() % 13) - 6, ny = static_cast<int>(rng.next() % 13) - 6,
              nz = static_cast<int>(rng.next() % 13) - 6;
    const double n2 = nx * nx + ny * ny + nz * nz;
    if (n2 == 0 || n2 > 36) continue;
    const Vec3d k{2 * kPi / box * nx, 2 * kPi / box * ny, 2 * kPi / box * nz};
    const double kk = norm(k);
    const double amp = std::pow(kk, -1.5) * (0.5 + rng.uniform());
    modes.push_back({k, amp, 2 * kPi * rng.uniform()});
    norm_sum += amp * kk;
  }
  for (auto& m : modes) m.amp *= 1.4 / norm_sum;

  std::vector<Vec3d> out;
  out.reserve(static_cast<std::size_t>(n_total) + 16);
  const double grid_spacing = box / n_grid;
  for (int i = 0; i < n_grid; ++i)
    for (int j = 0; j < n_grid; ++j)
      for (int l = 0; l < n_grid; ++l) {
        const Vec3d q{(i + 0.5) * grid_spacing, (j + 0.5) * grid_spacing, (l + 0.5) * grid_spacing};
        Vec3d x = q;
        for (const auto& m : modes) {
          const double kk = norm(m.k);
          x += m.k * (m.amp / kk * std::sin(dot(m.k, q) + m.phase));
        }
        for (int d = 0; d < 3; ++d) x[d] = periodic_wrap_position(x[d], box);
        out.push_back(x);
      }

  const std::size_t n_halo = static_cast<std::size_t>(n_total) > out.size() ? static_cast<std::size_t>(n_total) - out.size() : 0;
  const std::size_t n_big = (2 * n_halo) / 3;
  add_plummer(out, n_big, Vec3d{0.01 * box, 0.52 * box, 0.985 * box}, halo_scale * box, box, rng);
  add_plummer(out, n_halo - n_big, Vec3d{0.61 * box, 0.27 * box, 0.44 * box}, 0.25 * halo_scale * box, box, rng);
  return out;
}

std::vector<Vec3d> uniform_particles(std::size_t n, double box, std::uint64_t seed) {
  Rng rng{seed};
  std::vector<Vec3d> out(n);
  for (auto& x : out) x = Vec3d{rng.uniform() * box, rng.uniform() * box, rng.uniform() * box};
  return out;
}

std::vector<Vec3d> shuffled_tie_grid(std::uint64_t seed) {
  std::vector<Vec3d> grid;
  for (int i = 0; i < 37; ++i)
    for (int j = 0; j < 41; ++j)
      for (int k = 0; k < 29; ++k) grid.push_back(Vec3d{i * 0.5, j * 0.5, k * 0.5});
  std::shuffle(grid.begin(), grid.end(), std::mt19937_64(seed));
  return grid;
}

Particles clustered_particle_set(int n_side, double box, std::uint64_t seed) {
  Particles p;
  p.pos = clustered_particles(n_side, box, seed);
  p.resize(p.pos.size());
  p.mass = 0.3144 * units::rho_crit0 * box * box * box / static_cast<double>(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) p.id[i] = i + 1;
  return p;
}

}  // namespace orbis::test
