// Influence function. Long range (r_s > 0): -4 pi G exp(-k^2 r_s^2) / (k^2 W(k)^2), unchanged.
// Full force (r_s = 0): the Hockney & Eastwood (1988, eq. 8-22) optimal influence function for
// the window, the spectral gradient and a Gaussian-smoothed point-mass reference
// (optimal_influence() below), tabulated once per mesh per (|m_x|, |m_y|, |m_z|) in the mesh
// precision. It replaces 1/W^2 (x exp(-k^2 (0.75 cell)^2) before): where aliasing is weak it
// equals the deconvolution, and near the Nyquist corner it weighs the alias images instead of
// amplifying them (Gamma <= 140 at the 32^3 TSC corner against 3400 for 1/W^2). Measured
// (tests/physics/test_pm_force.cpp, 32^3): with the pure point-mass reference the isolated pair
// force is 10-40% off at 4-8 cells (the response drops from 0.27 to 0 at the zone boundary and
// rings), so a reference smoothing is needed. A Gaussian (sigma = 0.6 cells) gives the best
// isolated pair (TSC rms 0.46% at 4 cells) but costs (0.6 k cell)^2 of the force at low k,
// which slows linear growth measurably (2% in P at k cell = 0.15 from z = 49 to 1,
// tests/physics/test_linear_growth.cpp; 2.5% in the Zel'dovich pancake). The flat reference
// S = 2e^-x - e^-2x, x = (k sigma)^2, sigma = 0.55 cells, loses only x^2 (1e-4 at the fundamental
// of a 32^3 mesh): the pancake and the growth test pass, the orientation-averaged pair force stays
// within 1% from 4 cells on, and the price is the anisotropy at 4-5 cells (TSC rms 1.8%, 1.2%)
// and a force above Newton at 1.5-3 cells (+20% at 2 cells: any reference flat to O(k^4) has a
// negative lobe), which lifts PM-only power at k cell > 0.5 above TreePM's (demo z = 0: +8-14% at
// k = 1-2 h/Mpc). For PM-only runs, whose use is the large scales, exact growth is the better
// trade; TreePM (the default) has neither problem.
#include "pm/pm_solver.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/params.hpp"
#include "core/timer.hpp"
#include "core/units.hpp"

namespace orbis {

PmSettings PmSettings::from_params(const Params& params) {
  PmSettings s;
  s.box_mpc_h = params.get_real("box.size_mpc_h");
  const std::string solver = params.get_string("gravity.solver");
  const int particles_per_side = static_cast<int>(params.get_int("box.particles_per_side"));
  const int grid = static_cast<int>(params.get_int("gravity.pm_grid_side"));
  const bool treepm = solver == "treepm";
  s.grid_side = grid != 0 ? grid : 2 * particles_per_side;
  if (s.grid_side % 2 != 0 || s.grid_side < 4)
    fail("{}: the PM mesh must have an even number of cells per side, at least 4; got {}{}",
         params.describe("gravity.pm_grid_side"), s.grid_side,
         grid == 0 ? " (derived from [box] particles_per_side)" : "");
  s.window = parse_window(params.get_string("gravity.mass_assignment"));
  s.r_s_mpc_h = treepm ? params.get_real("gravity.rs_over_cell") * s.box_mpc_h / s.grid_side : 0.0;
  s.double_mesh = params.get_string("gravity.pm_mesh_precision") == "double";
  return s;
}

const std::vector<const char*>& PmSolver::phase_names() {
  static const std::vector<const char*> names{"pm_assign", "pm_fft", "pm_green", "pm_gradient",
                                              "pm_interpolate"};
  return names;
}

template <typename Real>
struct PmSolver::Meshes {
  explicit Meshes(int n) : rho(n), gx(n), gy(n) {}
  // rho: density, then phi(k), then g_z. Three meshes rather than two (one component of g at a
  // time) because interpolating all components in one pass is 1.5 (TSC) to 2 (CIC) times
  // faster: one stencil per particle instead of three.
  FftMesh<Real> rho, gx, gy;
  // PM-only: the optimal influence function as Gamma(k) = G_opt(k) k^2 / (-4 pi G), i.e. the
  // factor that replaces 1/W(k)^2, per (|m_x|, |m_y|, |m_z|) (it has the symmetry of the cube),
  // (n/2+1)^3 values in the mesh precision. Empty with r_s > 0.
  std::vector<Real> gamma;
};

namespace {

// The PM-only optimal influence function (Hockney & Eastwood 1988, eq. 8-22) for the window
// W = sinc^p, the spectral gradient D(k) = i k' (k' = k with the Nyquist component of each
// axis set to zero, as in the gradient loop) and the reference force
// R(k) = -i k 4 pi G / k^2 S(k), S = exp(-k^2 sigma^2), sigma = kReferenceSmoothingCells:
//   G_opt(k) = D*(k) . sum_n W^2(k_n) R(k_n) / (|D(k)|^2 [sum_n W^2(k_n)]^2),  k_n = k + 2 pi n / cell
//            = -4 pi G sum_n W^2(k_n) S(k_n) (k'.k_n) / k_n^2 / (|k'|^2 [sum_n W^2(k_n)]^2).
// Returned as Gamma = G_opt k^2 / (-4 pi G) for m in [0, n/2]^3, index (mx * h + my) * h + mz,
// h = n/2 + 1. The numerator sums the alias images |k_n| <= (images + 1/2) k_grid per axis
// (a set symmetric about 0, also on the Nyquist plane); the denominator factorises per axis and
// is summed in closed form: sum_j sinc^4(x + pi j) = 1 - 2/3 sin^2 x (CIC),
// sum_j sinc^6(x + pi j) = 1 - sin^2 x + 2/15 sin^4 x (TSC).
std::vector<double> optimal_influence(Window window, int n, int images) {
  const int h = n / 2 + 1, p = window_order(window);
  struct Image { double j, w2; };   // alias wavenumber (mesh units) and W_1d^2 there
  std::vector<std::vector<Image>> axis(h);
  std::vector<double> alias_sum(h);
  for (int m = 0; m < h; ++m) {
    for (int a = -images - 1; a <= images + 1; ++a) {
      const int j = m + a * n;
      if (2 * std::abs(j) > (2 * images + 1) * n) continue;
      const double t = units::pi * j / n;
      const double w = j == 0 ? 1.0 : std::pow(std::sin(t) / t, p);
      axis[m].push_back({static_cast<double>(j), w * w});
    }
    const double s2 = std::pow(std::sin(units::pi * m / n), 2);
    alias_sum[m] = window == Window::cic ? 1 - 2.0 / 3.0 * s2 : 1 - s2 + 2.0 / 15.0 * s2 * s2;
  }
  // Reference smoothing S = 2e^-x - e^-2x = 1 - x^2 + ..., x = k^2 sigma^2, sigma in cells
  // (see PmSolver::kReferenceSmoothingCells): flat to O(k^4) so that large-scale growth is
  // not slowed, and zero-bound at the Nyquist corner.
  const double sig2 = std::pow(2 * units::pi * PmSolver::kReferenceSmoothingCells / n, 2);
  auto smoothing = [&](double jj) { return 2 * std::exp(-jj * sig2) - std::exp(-2 * jj * sig2); };
  std::vector<double> gamma(static_cast<std::size_t>(h) * h * h, 0.0);
#pragma omp parallel for schedule(dynamic)
  for (int mx = 0; mx < h; ++mx)
    for (int my = 0; my < h; ++my)
      for (int mz = 0; mz < h; ++mz) {
        const double kx = mx == n / 2 ? 0.0 : mx, ky = my == n / 2 ? 0.0 : my, kz = mz == n / 2 ? 0.0 : mz;
        const double kd2 = kx * kx + ky * ky + kz * kz;
        if (kd2 == 0) continue;   // k = 0 or the corner: no gradient there
        double num = 0;
        for (const Image& ix : axis[mx])
          for (const Image& iy : axis[my]) {
            const double wxy = ix.w2 * iy.w2;
            if (wxy == 0) continue;
            for (const Image& iz : axis[mz]) {
              const double w2 = wxy * iz.w2;
              if (w2 == 0) continue;
              const double jj = ix.j * ix.j + iy.j * iy.j + iz.j * iz.j;
              num += w2 * (kx * ix.j + ky * iy.j + kz * iz.j) / jj * smoothing(jj);
            }
          }
        const double den = alias_sum[mx] * alias_sum[my] * alias_sum[mz];
        const double k2 = static_cast<double>(mx) * mx + static_cast<double>(my) * my + static_cast<double>(mz) * mz;
        gamma[(static_cast<std::size_t>(mx) * h + my) * h + mz] = k2 * num / (kd2 * den * den);
      }
  return gamma;
}

}  // namespace

struct PmSolver::Impl {
  std::unique_ptr<Meshes<float>> single;
  std::unique_ptr<Meshes<double>> twice;
  std::vector<double> k_axis;      // 2 pi m / L for signed mesh index m, h/Mpc
  std::vector<double> inv_w2_axis; // 1 / W_1d(m)^2

  // Reused from step to step: the particles sorted for the mesh and g in sorted order.
  SortedParticles sorted;
  std::vector<Vec3d> acc_sorted;

  template <typename Real>
  void run(const PmSettings& s, Meshes<Real>& m, const std::vector<Vec3d>& pos, double mass,
           std::vector<Vec3d>& acc, PhaseTimes& times);
};

PmSolver::PmSolver(const PmSettings& settings) : settings_(settings), impl_(std::make_unique<Impl>()) {
  const int n = settings.grid_side;
  if (!(settings.box_mpc_h > 0)) fail("PM solver: box size {} Mpc/h must be positive", settings.box_mpc_h);
  if (n < 4 || n % 2 != 0) fail("PM solver: mesh side {} must be even and at least 4", n);
  if (settings.r_s_mpc_h < 0) fail("PM solver: r_s = {} Mpc/h must be >= 0", settings.r_s_mpc_h);
  if (settings.double_mesh) impl_->twice = std::make_unique<Meshes<double>>(n);
  else impl_->single = std::make_unique<Meshes<float>>(n);
  if (settings.r_s_mpc_h == 0) {
    const std::vector<double> gamma = optimal_influence(settings.window, n, kInfluenceAliasImages);
    if (impl_->twice) impl_->twice->gamma = gamma;
    else impl_->single->gamma.assign(gamma.begin(), gamma.end());
  }
  impl_->k_axis.resize(n);
  impl_->inv_w2_axis.resize(n);
  for (int i = 0; i < n; ++i) {
    const int m = FftMesh<double>::signed_index(i, n);
    impl_->k_axis[i] = 2.0 * units::pi * m / settings.box_mpc_h;
    const double w = window_fourier(settings.window, m, n);
    impl_->inv_w2_axis[i] = 1.0 / (w * w);
  }
}

PmSolver::~PmSolver() = default;

std::size_t PmSolver::bytes() const {
  if (impl_->twice) return 3 * impl_->twice->rho.bytes() + impl_->twice->gamma.size() * sizeof(double);
  return 3 * impl_->single->rho.bytes() + impl_->single->gamma.size() * sizeof(float);
}

std::string PmSolver::describe() const {
  const auto& s = settings_;
  const std::string force = s.r_s_mpc_h > 0
      ? fmt::format("long range, r_s = {:.4g} Mpc/h ({:.3g} cells)", s.r_s_mpc_h, s.r_s_mpc_h * s.grid_side / s.box_mpc_h)
      : std::string("full force, optimal influence function");
  return fmt::format("PM {}^3 {} mesh, {}, {}, {:.0f} MiB", s.grid_side, s.double_mesh ? "double" : "float",
                     window_name(s.window), force, bytes() / 1048576.0);
}

void PmSolver::accelerations(const std::vector<Vec3d>& pos, double particle_mass,
                             std::vector<Vec3d>& acc, PhaseTimes* times) {
  PhaseTimes local;
  PhaseTimes& t = times ? *times : local;
  acc.resize(pos.size());
  if (impl_->twice) impl_->run(settings_, *impl_->twice, pos, particle_mass, acc, t);
  else impl_->run(settings_, *impl_->single, pos, particle_mass, acc, t);
}

template <typename Real>
void PmSolver::Impl::run(const PmSettings& s, Meshes<Real>& m, const std::vector<Vec3d>& pos,
                         double mass, std::vector<Vec3d>& acc, PhaseTimes& times) {
  using Complex = typename FftMesh<Real>::Complex;
  const int n = s.grid_side, nzc = m.rho.nz_complex();
  const int x0 = m.rho.local_x0(), nx = m.rho.local_nx();
  const double cell = s.box_mpc_h / n;
  {
    ScopedPhase phase(times, "pm_assign");
    sort_for_mesh(pos, s.box_mpc_h, n, s.window, 0.0, sorted);
    assign_to_mesh(m.rho, sorted, mass / (cell * cell * cell));
  }
  {
    ScopedPhase phase(times, "pm_fft");
    m.rho.forward();
  }
  {
    // phi(k) = G(k) rho(k); the 1/n^3 of the unnormalised inverse FFT is folded in here.
    ScopedPhase phase(times, "pm_green");
    const double norm = -4.0 * units::pi * units::G / (static_cast<double>(n) * n * n);
    if (s.r_s_mpc_h > 0) {   // long range: exp(-k^2 r_s^2) / W(k)^2
      const double rs2 = s.r_s_mpc_h * s.r_s_mpc_h;
#pragma omp parallel for schedule(static)
      for (int i = x0; i < x0 + nx; ++i)
        for (int j = 0; j < n; ++j) {
          Complex* row = &m.rho.mode(i, j, 0);
          const double kxy2 = k_axis[i] * k_axis[i] + k_axis[j] * k_axis[j];
          const double wxy = inv_w2_axis[i] * inv_w2_axis[j];
          for (int k = 0; k < nzc; ++k) {
            const double k2 = kxy2 + k_axis[k] * k_axis[k];
            const double g = k2 > 0 ? norm / k2 * std::exp(-k2 * rs2) * wxy * inv_w2_axis[k] : 0.0;
            row[k] *= static_cast<Real>(g);
          }
        }
    } else {                 // full force: the optimal influence function, Gamma(k) / k^2
      const int h = n / 2 + 1;
      const Real* gamma = m.gamma.data();
#pragma omp parallel for schedule(static)
      for (int i = x0; i < x0 + nx; ++i)
        for (int j = 0; j < n; ++j) {
          Complex* row = &m.rho.mode(i, j, 0);
          const double kxy2 = k_axis[i] * k_axis[i] + k_axis[j] * k_axis[j];
          const Real* gamma_row = gamma + (static_cast<std::size_t>(std::min(i, n - i)) * h + std::min(j, n - j)) * h;
          for (int k = 0; k < nzc; ++k) {
            const double k2 = kxy2 + k_axis[k] * k_axis[k];
            const double g = k2 > 0 ? norm / k2 * static_cast<double>(gamma_row[k]) : 0.0;
            row[k] *= static_cast<Real>(g);
          }
        }
    }
  }
  // g_d(k) = -i k_d phi(k). The Nyquist plane of axis d has no odd (sine) part on the mesh,
  // so its derivative is set to zero there; that keeps g real and the operator antisymmetric
  // (no self-force, momentum conserved).
  //
  // Spectral differentiation rather than 4-point finite differences of phi (GADGET's
  // choice), measured with the pair test of tests/physics/test_pm_force.cpp (32^3 mesh,
  // r_s = 1.2 cells, errors relative to the Ewald force): TSC long-range max error 0.33%
  // spectral vs 0.73% FD, and FD's k-response falls below ik at high k, so its long-range
  // force is 2% short at r < 1.5 cells, just where it must add to the tree's erfc force to
  // give 1/r^2. CIC is aliasing-limited either way (3.5%). The price is two more inverse FFTs
  // per step; the gain besides accuracy is that FFTW-MPI slabs need no ghost planes of phi.
  {
    ScopedPhase phase(times, "pm_gradient");
    const int nyquist = n / 2;
#pragma omp parallel for schedule(static)
    for (int i = x0; i < x0 + nx; ++i)
      for (int j = 0; j < n; ++j) {
        Complex* phi = &m.rho.mode(i, j, 0);   // becomes g_z
        Complex* gx = &m.gx.mode(i, j, 0);
        Complex* gy = &m.gy.mode(i, j, 0);
        const double kx = i == nyquist ? 0.0 : k_axis[i];
        const double ky = j == nyquist ? 0.0 : k_axis[j];
        for (int k = 0; k < nzc; ++k) {
          const double kz = k == nyquist ? 0.0 : k_axis[k];
          const double re = phi[k].real(), im = phi[k].imag();
          // -i kd (re + i im) = kd im - i kd re
          gx[k] = Complex(static_cast<Real>(kx * im), static_cast<Real>(-kx * re));
          gy[k] = Complex(static_cast<Real>(ky * im), static_cast<Real>(-ky * re));
          phi[k] = Complex(static_cast<Real>(kz * im), static_cast<Real>(-kz * re));
        }
      }
  }
  {
    ScopedPhase phase(times, "pm_fft");
    m.gx.backward();
    m.gy.backward();
    m.rho.backward();
  }
  {
    ScopedPhase phase(times, "pm_interpolate");
    interpolate_vector_from_meshes(m.gx, m.gy, m.rho, sorted, 1.0, acc_sorted);
    unsort(sorted, acc_sorted, acc);
  }
}

}  // namespace orbis
