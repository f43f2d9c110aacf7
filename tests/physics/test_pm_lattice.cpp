// The long-range (TreePM) mesh force on a displaced particle lattice, the state of grid ICs,
// against the exact long-range force of the same discrete particles.
//
// A lattice commensurate with the mesh (2 or 3 cells per spacing, as pm_grid_side = 2N or 3N
// makes it) has Fourier harmonics at the mesh's alias wavenumbers; a displacement wave of
// wavenumber k modulates them, and the mesh folds them onto k itself. On a mesh whose nodes
// hold the lattice, the long-range force of the wave falls short by 0.042 (k cell)^2 (and at
// mid-cell lattices it overshoots by 0.077 (k cell)^2; a diagonal wave, half of those): at 2N
// that cost the 256^3 headline 0.2% of its linear P(k). The meshes' offsets (pm/pm_modes.hpp,
// long_range_mesh_shift) cancel the leading images: one mesh at a quarter cell leaves 0.0104
// (k cell)^2 for any lattice offset, with a phase of ~0.024 (k cell)^3 (bar 0.016 (k cell)^2:
// with the mesh on the box's origin every case fails); two interlaced meshes at 1/8 and 5/8
// leave 0.0026 (k cell)^2 (bar 0.004 (k cell)^2).
//
// Reference: the long-range acceleration of the point masses, summed mode by mode,
//   g(x) = sum_k 4 pi G i k / k^2 exp(-k^2 r_s^2) rho(k) e^{i k.x},  rho(k) = (m/V) sum_q e^{-i k.x_q},
// over every mode with exp(-k^2 r_s^2) > 1e-14 (no mesh, no window, no aliasing), projected,
// like the mesh force, on the wave: A = (1/N) sum_p g(x_p).k_hat e^{-i k0.q_p}.
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <cstdio>
#include <vector>

#include "core/units.hpp"
#include "pm/pm_solver.hpp"

using orbis::PmSettings;
using orbis::PmSolver;
using orbis::Vec3d;
using orbis::Window;

namespace {

constexpr double kBox = 100.0;   // Mpc/h
constexpr int kSide = 16;        // lattice points per side
constexpr double kMass = 1.0;    // 1e10 Msun/h

struct Wave {
  int mx, my;            // wavenumber 2 pi (mx, my, 0) / box
  double amplitude;      // of the displacement along k, in lattice spacings
};

Vec3d wave_vector(const Wave& w) { return Vec3d{static_cast<double>(w.mx), static_cast<double>(w.my), 0.0} * (2 * orbis::units::pi / kBox); }

// Lattice points q = (j + offset) spacing and positions q + psi(q), psi along k.
void displaced_lattice(const Wave& w, double offset, std::vector<Vec3d>& q, std::vector<Vec3d>& x) {
  const double spacing = kBox / kSide;
  const Vec3d k = wave_vector(w), k_hat = k * (1.0 / orbis::norm(k));
  q.clear();
  x.clear();
  for (int i = 0; i < kSide; ++i)
    for (int j = 0; j < kSide; ++j)
      for (int l = 0; l < kSide; ++l) {
        const Vec3d p = Vec3d{i + offset, j + offset, l + offset} * spacing;
        q.push_back(p);
        x.push_back(p + k_hat * (w.amplitude * spacing * std::sin(dot(k, p))));
      }
}

// The wave's component of a force field sampled at the particles: (1/N) sum g.k_hat e^{-i k.q}.
std::complex<double> projection(const std::vector<Vec3d>& g, const std::vector<Vec3d>& q, const Vec3d& k) {
  const Vec3d k_hat = k * (1.0 / orbis::norm(k));
  std::complex<double> sum = 0;
  for (std::size_t p = 0; p < q.size(); ++p) sum += dot(g[p], k_hat) * std::exp(std::complex<double>(0, -dot(k, q[p])));
  return sum / static_cast<double>(q.size());
}

// The reference's projection on the wave, sum_k i (k.k_hat) C(k) rho(k) S(k) / N with
// C(k) = 4 pi G / k^2 exp(-k^2 r_s^2) and S(k) = sum_p e^{i (k.x_p - k0.q_p)}. On a lattice
// displaced by one wave, e^{i k.x_p} = e^{i k.q_p} sum_n J_n(k.k_hat a) e^{i n k0.q_p}, so
// rho(k) and S(k) vanish (exactly, as sums of roots of unity) unless k = G - n k0 for a
// reciprocal lattice vector G; |n| <= 6 leaves out terms of J_7(0.08) ~ 1e-12.
std::complex<double> exact_projection(const std::vector<Vec3d>& q, const std::vector<Vec3d>& x, const Vec3d& k0,
                                      double r_s) {
  const double k_f = 2 * orbis::units::pi / kBox, k_g = kSide * k_f;
  const int g_max = static_cast<int>(std::ceil(std::sqrt(std::log(1e14)) / (r_s * k_g))) + 1;
  const Vec3d k_hat = k0 * (1.0 / orbis::norm(k0));
  const double volume = kBox * kBox * kBox;
  std::complex<double> sum = 0;
  for (int a = -g_max; a <= g_max; ++a)
    for (int b = -g_max; b <= g_max; ++b)
      for (int c = -g_max; c <= g_max; ++c)
        for (int n = -6; n <= 6; ++n) {
          const Vec3d k = Vec3d{static_cast<double>(a), static_cast<double>(b), static_cast<double>(c)} * k_g - k0 * static_cast<double>(n);
          const double k2 = dot(k, k), filter = std::exp(-k2 * r_s * r_s);
          if (k2 == 0 || filter < 1e-14) continue;
          std::complex<double> rho = 0, overlap = 0;
          for (std::size_t p = 0; p < x.size(); ++p) {
            rho += std::exp(std::complex<double>(0, -dot(k, x[p])));
            overlap += std::exp(std::complex<double>(0, dot(k, x[p]) - dot(k0, q[p])));
          }
          const double c_k = 4 * orbis::units::pi * orbis::units::G / k2 * filter * kMass / volume;
          sum += std::complex<double>(0, dot(k, k_hat) * c_k) * rho * overlap;
        }
  return sum / static_cast<double>(x.size());
}

void check_lattice_images(bool interlaced, double bar) {
  const Wave waves[] = {{1, 0, 0.01}, {2, 0, 0.01}, {1, 1, 0.01}};
  for (int cells_per_spacing : {2, 3, 4}) {
    for (double offset : {0.0, 0.5}) {
      PmSettings s;
      s.box_mpc_h = kBox;
      s.grid_side = cells_per_spacing * kSide;
      s.window = Window::tsc;
      s.r_s_mpc_h = 2.4 * kBox / s.grid_side;
      s.double_mesh = true;
      s.interlaced = interlaced;
      PmSolver pm(s);
      const double cell = kBox / s.grid_side;
      for (const Wave& w : waves) {
        std::vector<Vec3d> q, x, acc;
        displaced_lattice(w, offset, q, x);
        pm.accelerations(x, kMass, acc);
        const Vec3d k = wave_vector(w);
        const std::complex<double> mesh = projection(acc, q, k);
        const std::complex<double> exact = exact_projection(q, x, k, s.r_s_mpc_h);
        const double kh2 = dot(k, k) * cell * cell;
        const double deficit = std::abs(mesh / exact) - 1;
        std::printf("%s mesh %d (%d cells per spacing), lattice offset %.1f, k = (%d,%d,0) 2pi/L: |A_mesh/A_exact| - 1 = "
                    "%+.3e = %+.4f (k cell)^2, phase %+.2e\n",
                    interlaced ? "interlaced" : "one", s.grid_side, cells_per_spacing, offset, w.mx, w.my, deficit, deficit / kh2, std::arg(mesh / exact));
        CHECK(std::abs(deficit) < bar * kh2);
        // In phase with the exact force but for the images' small remainder.
        CHECK(std::abs(std::arg(mesh / exact)) < 0.05 * kh2 * std::sqrt(kh2));
      }
    }
  }
}

}  // namespace

TEST_CASE("long-range force on a displaced lattice, one mesh: the lattice's images stay below 0.016 (k cell)^2") {
  check_lattice_images(false, 0.016);
}

TEST_CASE("long-range force on a displaced lattice, two interlaced meshes: below 0.004 (k cell)^2") {
  check_lattice_images(true, 0.004);
}
