#include "pm/pm_solver.hpp"

#include <cmath>
#include <string>

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
  s.grid_side = grid != 0 ? grid : (treepm ? particles_per_side : 2 * particles_per_side);
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
};

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
  if (impl_->twice) return 3 * impl_->twice->rho.bytes();
  return 3 * impl_->single->rho.bytes();
}

std::string PmSolver::describe() const {
  const auto& s = settings_;
  const std::string force = s.r_s_mpc_h > 0
      ? fmt::format("long range, r_s = {:.4g} Mpc/h ({:.3g} cells)", s.r_s_mpc_h, s.r_s_mpc_h * s.grid_side / s.box_mpc_h)
      : fmt::format("full force, smoothed at {} cells", kFullForceSmoothingCells);
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
    const double rs = s.r_s_mpc_h > 0 ? s.r_s_mpc_h : PmSolver::kFullForceSmoothingCells * cell;
    const double rs2 = rs * rs;
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
