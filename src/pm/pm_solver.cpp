// PM-only force: why two interlaced meshes, and why this reference (measured; 32^3 mesh pair
// test of tests/physics/test_pm_force.cpp, 64 pairs per separation, TSC; pancake on its 64-cell
// wave unless marked, tests/physics/test_zeldovich_pancake.cpp, position / velocity error;
// "1 - S" is the reference's force deficit at low k, in (k cell)^2).
//
//  one mesh, reference                        max err >= 4 cells  mean at 2 cells  1 - S    pancake
//  Gaussian sigma 0.6 cells                    (rms 0.46%)          below Newton   0.36     2.5% (32 cells)
//  2e^-x - e^-2x, x = (0.55 k cell)^2         4.8% (rms 1.8%)      +20%           O(k^4)   0.19 / 0.44% (32 cells)
//  two meshes (this file), reference
//  Gaussian sigma 0.45 cells                   2.9%                 -3%            0.20     1.4 / 2.4% (32 cells)
//  Gaussian sigma 0.55 cells                   0.31%                -9%            0.30     0.52 / 0.86%
//  e^-x (1 + x), sigma 0.65 (flat, O(k^4))     0.41%                +19%           O(k^4)   0.16 / 0.19%
//  e^-x (1 + x/2), sigma 0.6                   0.45%                +2.5%          0.18     0.28 / 0.46%
//  exp(-(k sigma)^4), sigma 0.36 cells         1.3%                 +22%           O(k^4)   (mean force 1% off at 4 cells)
//  (1 - k^2/K^2)^5, K = 5.5 / cell (chosen)    0.37%                +1.5%          0.165    0.21 / 0.35%
//
// On one mesh the cube-shaped zone ends at |k| = pi / cell along the axes: a reference small
// there costs the large scales force (growth and pancake fail), one flat at low k rings at the
// zone edge (the pair force 2-5% off at 4-6 cells, and its negative lobe overshoots Newton by
// 20%). The second mesh doubles the zone to the rhombic dodecahedron (inscribed radius
// sqrt(2) pi / cell): a reference can then be flat at low k and vanish near the boundary. The
// smoothing must still cost some force at low k: the deficit 1 - S = c2 (k cell)^2 is
// (1/3) int r (1 - F/F_Newton) dr / cell^2, so a small c2 means a force close to Newton's at
// 1.5-3 cells, which a reference band-limited to the zone reaches only with an overshoot. The
// pancake's velocity error grows with c2 (0.35% at 0.165, 0.46% at 0.18, 0.86% at 0.30), the
// pair force and the overshoot want c2 larger; the compact polynomial above gives the least
// overshoot found at c2 = 0.165 (a linear program over references band-limited to the zone's
// inscribed sphere, with this c2, found none below ~1%). Cost: two assignments, 8 FFTs
// instead of 4, two interpolations (tests/bench/bench_pm.cpp).
#include "pm/pm_solver.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/params.hpp"
#include "core/timer.hpp"
#include "core/units.hpp"
#include "pm/fixed_point_mesh.hpp"
#include "pm/interlaced_influence.hpp"
#include "pm/pm_modes.hpp"
#include "pm/slab_routing.hpp"

namespace orbis {
namespace {

// Between the mesh's complex type and the double arithmetic of pm_modes.hpp.
template <typename Real>
std::complex<Real> to_mesh(ModeComplex c) {
  return {static_cast<Real>(c.re), static_cast<Real>(c.im)};
}
template <typename Real>
ModeComplex from_mesh(const std::complex<Real>& c) {
  return {c.real(), c.imag()};
}

}  // namespace

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
  s.interlaced = treepm && params.get_bool("gravity.pm_interlacing");
  return s;
}

void PmSettings::check() const {
  if (!(box_mpc_h > 0)) fail("PM solver: box size {} Mpc/h must be positive", box_mpc_h);
  if (grid_side < 4 || grid_side % 2 != 0) fail("PM solver: mesh side {} must be even and at least 4", grid_side);
  if (r_s_mpc_h < 0) fail("PM solver: r_s = {} Mpc/h must be >= 0", r_s_mpc_h);
}

const std::vector<const char*>& PmSolver::phase_names() {
  static const std::vector<const char*> names{"pm_assign", "pm_fft", "pm_green", "pm_gradient",
                                              "pm_interpolate", "pm_exchange"};
  return names;
}

template <typename Real>
struct PmSolver::Meshes {
  // One mesh: density, then phi(k), then g_z; and g_x, g_y. Three meshes rather than two (one
  // component of g at a time) because interpolating all components in one pass is 1.5 (TSC)
  // to 2 (CIC) times faster: one stencil per particle instead of three.
  // Distributed: ghost planes for the window's stencil (one more than it reaches from its
  // first plane, for mesh B's half-cell shift).
  struct Set {
    // The reproducible transforms: the same bits for any rank and thread count (see the header).
    Set(int n, const Comm& comm, int ghosts)
        : rho(n, comm, FftPlan::reproducible, 0, ghosts), gx(n, comm, FftPlan::reproducible, 0, ghosts),
          gy(n, comm, FftPlan::reproducible, 0, ghosts) {}
    FftMesh<Real> rho, gx, gy;
    // The density in 64-bit fixed point (pm/fixed_point_mesh.hpp), in the storage of gx (low
    // halves) and gy (high halves), free until the gradient: no memory of its own.
    std::uint32_t* fixed_lo() { return reinterpret_cast<std::uint32_t*>(gx.real_data()); }
    std::uint32_t* fixed_hi() { return reinterpret_cast<std::uint32_t*>(gy.real_data()); }
  };
  Meshes(int n, bool interlaced, const Comm& comm, int ghosts) : a(n, comm, ghosts) {
    if (interlaced) b = std::make_unique<Set>(n, comm, ghosts);
  }
  Set a;                    // assigned at the particle positions
  std::unique_ptr<Set> b;   // PM-only: assigned at the positions + (h/2)(1,1,1); interlaced
                            // long range: the second mesh (long_range_mesh_shift)
  // PM-only: the influence function of the even and odd coset, G_c / (-4 pi G) in mesh index
  // units, two values per (|m_x|, |m_y|, |m_z|) (interlaced_influence.hpp), mesh precision.
  std::vector<Real> influence;
};

struct PmSolver::Impl {
  std::unique_ptr<Meshes<float>> single;
  std::unique_ptr<Meshes<double>> twice;
  PmAxisTables axes;   // k, 1/W^2 and the half-cell phase per axis index (pm_modes.hpp)

  // Reused from step to step: the particles sorted for each mesh and g in sorted order; over
  // several ranks, the particles routed to this rank's slab and their g.
  SortedParticles sorted, sorted_b;
  std::vector<Vec3d> acc_sorted;
  SlabRouting routing;
  std::vector<Vec3d> routed, acc_routed;

  PmSlabTransform* slab_transform = nullptr;   // PmSolver's, when it has one

  // `total`: the particles over all ranks (the fixed-point scale, pm/fixed_point_mesh.hpp).
  template <typename Real>
  void run(const PmSettings& s, Meshes<Real>& m, const std::vector<Vec3d>& pos, std::size_t total, double mass,
           std::vector<Vec3d>& acc, PhaseTimes& times);
  // The density of a mesh set from particles sorted for it: fixed-point sums (in gx, gy),
  // ghost planes added, converted into rho.
  template <typename Real>
  void assign_density(const PmSettings& s, typename Meshes<Real>::Set& set, const SortedParticles& particles,
                      std::size_t total, double mass, PhaseTimes& times);
  // Long range: one sum per local x plane of the mesh energy (potential_energy).
  template <typename Real>
  std::vector<double> mesh_energy(const PmSettings& s, Meshes<Real>& m, const std::vector<Vec3d>& pos,
                                  std::size_t total, double mass);
  // plane[x - x0] += weight * (the x plane's share of the mesh energy) of a transformed density.
  template <typename Real>
  void add_mesh_energy_planes(const PmSettings& s, FftMesh<Real>& rho, double weight, std::vector<double>& plane);
  template <typename Real>
  void run_long_range(const PmSettings& s, typename Meshes<Real>::Set& set, PhaseTimes& times);
  template <typename Real>
  void run_full(const PmSettings& s, Meshes<Real>& m, PhaseTimes& times);
};

PmSolver::PmSolver(const PmSettings& settings, const Comm& comm)
    : settings_(settings), comm_(comm), impl_(std::make_unique<Impl>()) {
  const int n = settings.grid_side;
  settings.check();
  const bool full = settings.r_s_mpc_h == 0;
  const int ghosts = window_order(settings.window);
  const bool two = settings.two_meshes();
  if (settings.double_mesh) impl_->twice = std::make_unique<Meshes<double>>(n, two, comm, ghosts);
  else impl_->single = std::make_unique<Meshes<float>>(n, two, comm, ghosts);
  if (full) {
    const std::vector<double> g = interlaced_optimal_influence(settings.window, n);
    if (impl_->twice) impl_->twice->influence = g;
    else impl_->single->influence.assign(g.begin(), g.end());
  }
  impl_->axes = make_pm_axis_tables(settings);
}

PmAxisTables make_pm_axis_tables(const PmSettings& settings) {
  const int n = settings.grid_side;
  PmAxisTables t;
  t.k.resize(n);
  t.inv_w2.resize(n);
  t.half_shift.resize(n);
  for (int i = 0; i < n; ++i) {
    const int m = FftMesh<double>::signed_index(i, n);
    t.k[i] = 2.0 * units::pi * m / settings.box_mpc_h;
    const double w = window_fourier(settings.window, m, n);
    t.inv_w2[i] = 1.0 / (w * w);
    const double phase = units::pi * m / n;
    t.half_shift[i] = {std::cos(phase), std::sin(phase)};
  }
  return t;
}

PmSolver::~PmSolver() = default;

void PmSolver::use_slab_transform(std::unique_ptr<PmSlabTransform> transform) {
  if (settings_.r_s_mpc_h == 0)
    fail("internal: the PM-only force (two interlaced meshes) has no slab transform; it runs on FFTW");
  slab_transform_ = std::move(transform);
  impl_->slab_transform = slab_transform_.get();
}

namespace {
template <typename Meshes>
std::size_t mesh_bytes(const Meshes& m) {
  return (m.b ? 6 : 3) * m.a.rho.bytes() + m.influence.size() * sizeof(m.influence[0]);
}
}  // namespace

std::size_t PmSolver::bytes() const {
  return impl_->twice ? mesh_bytes(*impl_->twice) : mesh_bytes(*impl_->single);
}

std::string PmSolver::describe() const {
  const auto& s = settings_;
  const std::string force = s.r_s_mpc_h > 0
      ? fmt::format("long range, r_s = {:.4g} Mpc/h ({:.3g} cells)", s.r_s_mpc_h, s.r_s_mpc_h * s.grid_side / s.box_mpc_h)
      : std::string("full force, two interlaced meshes, optimal influence function");
  return fmt::format("PM {}^3 {} mesh, {}, {}, {:.0f} MiB{}", s.grid_side, s.double_mesh ? "double" : "float",
                     window_name(s.window), force, bytes() / 1048576.0,
                     slab_transform_ ? "; " + slab_transform_->describe() : std::string());
}

void PmSolver::accelerations(const std::vector<Vec3d>& pos, double particle_mass,
                             std::vector<Vec3d>& acc, PhaseTimes* times) {
  PhaseTimes local;
  PhaseTimes& t = times ? *times : local;
  acc.resize(pos.size());
  if (comm_.size() == 1) {
    if (impl_->twice) impl_->run(settings_, *impl_->twice, pos, pos.size(), particle_mass, acc, t);
    else impl_->run(settings_, *impl_->single, pos, pos.size(), particle_mass, acc, t);
    return;
  }
  std::size_t total = 0;
  {
    ScopedPhase phase(t, "pm_exchange");
    total = comm_.sum(pos.size());
    impl_->routing.route(pos, settings_.box_mpc_h, settings_.grid_side, settings_.window, comm_, impl_->routed);
  }
  if (impl_->twice) impl_->run(settings_, *impl_->twice, impl_->routed, total, particle_mass, impl_->acc_routed, t);
  else impl_->run(settings_, *impl_->single, impl_->routed, total, particle_mass, impl_->acc_routed, t);
  ScopedPhase phase(t, "pm_exchange");
  impl_->routing.send_back(impl_->acc_routed, acc);
}

template <typename Real>
void PmSolver::Impl::assign_density(const PmSettings& s, typename Meshes<Real>::Set& set,
                                    const SortedParticles& particles, std::size_t total, double mass,
                                    PhaseTimes& times) {
  const int n = s.grid_side;
  const double cell = s.box_mpc_h / n, density = mass / (cell * cell * cell);
  const double scale = fixed_point_scale(total);
  {
    ScopedPhase phase(times, "pm_assign");
    assign_fixed_point(set.rho, particles, scale, set.fixed_lo(), set.fixed_hi());
  }
  if (set.rho.distributed()) {
    ScopedPhase phase(times, "pm_exchange");
    set.rho.add_ghost_planes_fixed(set.fixed_lo(), set.fixed_hi());
  }
  ScopedPhase phase(times, "pm_assign");
  fixed_point_to_mesh(set.fixed_lo(), set.fixed_hi(), pm_fixed_point_mean(total, scale, n), density / scale, set.rho);
}

template <typename Real>
void PmSolver::Impl::run(const PmSettings& s, Meshes<Real>& m, const std::vector<Vec3d>& pos, std::size_t total,
                         double mass, std::vector<Vec3d>& acc, PhaseTimes& times) {
  const int n = s.grid_side;
  const bool full = s.r_s_mpc_h == 0;
  {
    ScopedPhase phase(times, "pm_assign");
    sort_for_mesh(pos, s.box_mpc_h, n, s.window, full ? 0.0 : long_range_mesh_shift(s.interlaced, 0), sorted);
    if (m.b) sort_for_mesh(pos, s.box_mpc_h, n, s.window, full ? 0.5 : long_range_mesh_shift(true, 1), sorted_b);
  }
  assign_density<Real>(s, m.a, sorted, total, mass, times);
  if (m.b) assign_density<Real>(s, *m.b, sorted_b, total, mass, times);
  if (full) {
    run_full(s, m, times);
  } else {
    run_long_range<Real>(s, m.a, times);
    if (m.b) run_long_range<Real>(s, *m.b, times);
  }
  if (m.a.rho.distributed()) {
    ScopedPhase phase(times, "pm_exchange");
    for (auto* set : {&m.a, m.b.get()}) {
      if (!set) continue;
      set->gx.fetch_ghost_planes();
      set->gy.fetch_ghost_planes();
      set->rho.fetch_ghost_planes();
    }
  }
  {
    // Two meshes (PM-only, interlaced long range): g(x) = (g_A(x) + g_B(x)) / 2.
    ScopedPhase phase(times, "pm_interpolate");
    const double scale = m.b ? 0.5 : 1.0;
    interpolate_vector_from_meshes(m.a.gx, m.a.gy, m.a.rho, sorted, scale, acc_sorted);
    unsort(sorted, acc_sorted, acc);
    if (m.b) {
      interpolate_vector_from_meshes(m.b->gx, m.b->gy, m.b->rho, sorted_b, scale, acc_sorted);
      unsort_add(sorted_b, acc_sorted, acc);
    }
  }
}

double PmSolver::potential_energy(const std::vector<Vec3d>& pos, double particle_mass) {
  if (settings_.r_s_mpc_h == 0) fail("PM solver: the potential energy is computed for the long-range (TreePM) force only");
  const std::vector<Vec3d>* mine = &pos;
  std::size_t total = pos.size();
  if (comm_.size() > 1) {
    total = comm_.sum(pos.size());
    impl_->routing.route(pos, settings_.box_mpc_h, settings_.grid_side, settings_.window, comm_, impl_->routed);
    mine = &impl_->routed;
  }
  std::vector<double> planes = impl_->twice ? impl_->mesh_energy(settings_, *impl_->twice, *mine, total, particle_mass)
                                            : impl_->mesh_energy(settings_, *impl_->single, *mine, total, particle_mass);
  // Every plane's sum on every rank (the slabs in rank order are the planes in order), added
  // in plane order as on one rank: the same bits for any rank count.
  if (comm_.size() > 1) planes = comm_.allgatherv(planes);
  double total_sum = 0;
  for (double p : planes) total_sum += p;
  const double cell = settings_.box_mpc_h / settings_.grid_side;
  return 0.5 * cell * cell * cell * total_sum;
}

template <typename Real>
std::vector<double> PmSolver::Impl::mesh_energy(const PmSettings& s, Meshes<Real>& m, const std::vector<Vec3d>& pos,
                                                std::size_t total, double mass) {
  const int n = s.grid_side, nx = m.a.rho.local_nx();
  std::vector<double> plane(static_cast<std::size_t>(nx), 0.0);
  // Interlaced: the mean of the two meshes' energies, as the force is their forces' mean.
  const int meshes = m.b ? 2 : 1;
  for (int mesh = 0; mesh < meshes; ++mesh) {
    auto& set = mesh == 0 ? m.a : *m.b;
    PhaseTimes unused;
    sort_for_mesh(pos, s.box_mpc_h, n, s.window, long_range_mesh_shift(s.interlaced, mesh), sorted);
    assign_density<Real>(s, set, sorted, total, mass, unused);   // as accelerations() assigns
    set.rho.forward();
    add_mesh_energy_planes<Real>(s, set.rho, 1.0 / meshes, plane);
  }
  return plane;
}

template <typename Real>
void PmSolver::Impl::add_mesh_energy_planes(const PmSettings& s, FftMesh<Real>& rho, double weight,
                                            std::vector<double>& plane) {
  const int n = s.grid_side, nzc = rho.nz_complex();
  const int x0 = rho.local_x0(), nx = rho.local_nx();
  // One partial sum per x plane, then the planes in order: no dependence on the threads.
  // The half-complex mesh holds k_z in [0, n/2] (long_range_energy_term counts the conjugates).
  // CudaPmSolver::potential_energy sums the same terms per row.
  const double norm = long_range_norm(n), rs2 = s.r_s_mpc_h * s.r_s_mpc_h;
#pragma omp parallel for schedule(static)
  for (int i = x0; i < x0 + nx; ++i) {
    double sum = 0;
    for (int j = 0; j < n; ++j) {
      const double kxy2 = axes.k[i] * axes.k[i] + axes.k[j] * axes.k[j];
      const double wxy = axes.inv_w2[i] * axes.inv_w2[j];
      for (int k = 0; k < nzc; ++k) {
        const auto mode = rho.mode(i, j, k);
        sum += long_range_energy_term(mode.real(), mode.imag(),
                                      long_range_green(kxy2 + axes.k[k] * axes.k[k], rs2, norm, wxy, axes.inv_w2[k]),
                                      k, n);
      }
    }
    plane[static_cast<std::size_t>(i - x0)] += weight * sum;
  }
}

template <typename Real>
void PmSolver::Impl::run_long_range(const PmSettings& s, typename Meshes<Real>::Set& set, PhaseTimes& times) {
  using Complex = typename FftMesh<Real>::Complex;
  const int n = s.grid_side, nzc = set.rho.nz_complex();
  const int x0 = set.rho.local_x0(), nx = set.rho.local_nx();
  if (slab_transform) {   // the same steps on the rank's GPU (gpu/pm_cuda_slabs.hpp)
    slab_transform->long_range(set.rho.real_data(), set.gx.real_data(), set.gy.real_data(), times);
    return;
  }
  {
    ScopedPhase phase(times, "pm_fft");
    set.rho.forward();
  }
  {
    // phi(k) = -4 pi G exp(-k^2 r_s^2) / (k^2 W(k)^2) rho(k); the 1/n^3 of the unnormalised
    // inverse FFT is folded in here.
    ScopedPhase phase(times, "pm_green");
    const double norm = long_range_norm(n);
    const double rs2 = s.r_s_mpc_h * s.r_s_mpc_h;
    const double* k_axis = axes.k.data();
    const double* inv_w2 = axes.inv_w2.data();
#pragma omp parallel for schedule(static)
    for (int i = x0; i < x0 + nx; ++i)
      for (int j = 0; j < n; ++j) {
        Complex* row = &set.rho.mode(i, j, 0);
        const double kxy2 = k_axis[i] * k_axis[i] + k_axis[j] * k_axis[j];
        const double wxy = inv_w2[i] * inv_w2[j];
        for (int k = 0; k < nzc; ++k) {
          const double k2 = kxy2 + k_axis[k] * k_axis[k];
          row[k] *= static_cast<Real>(long_range_green(k2, rs2, norm, wxy, inv_w2[k]));
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
  // per step; the gain besides accuracy is that the slabs need no ghost planes of phi.
  {
    ScopedPhase phase(times, "pm_gradient");
    const int nyquist = n / 2;
    const double* k_axis = axes.k.data();
#pragma omp parallel for schedule(static)
    for (int i = x0; i < x0 + nx; ++i)
      for (int j = 0; j < n; ++j) {
        Complex* phi = &set.rho.mode(i, j, 0);   // becomes g_z
        Complex* gx = &set.gx.mode(i, j, 0);
        Complex* gy = &set.gy.mode(i, j, 0);
        const double kx = i == nyquist ? 0.0 : k_axis[i];
        const double ky = j == nyquist ? 0.0 : k_axis[j];
        for (int k = 0; k < nzc; ++k) {
          const double kz = k == nyquist ? 0.0 : k_axis[k];
          const double re = phi[k].real(), im = phi[k].imag();
          gx[k] = to_mesh<Real>(minus_i_k(kx, re, im));
          gy[k] = to_mesh<Real>(minus_i_k(ky, re, im));
          phi[k] = to_mesh<Real>(minus_i_k(kz, re, im));
        }
      }
  }
  {
    ScopedPhase phase(times, "pm_fft");
    set.gx.backward();
    set.gy.backward();
    set.rho.backward();
  }
}

template <typename Real>
void PmSolver::Impl::run_full(const PmSettings& s, Meshes<Real>& m, PhaseTimes& times) {
  using Complex = typename FftMesh<Real>::Complex;
  const int n = s.grid_side, h = n / 2 + 1, nzc = m.a.rho.nz_complex();
  const int x0 = m.a.rho.local_x0(), nx = m.a.rho.local_nx();
  auto& b = *m.b;
  {
    ScopedPhase phase(times, "pm_fft");
    m.a.rho.forward();
    b.rho.forward();
  }
  {
    // E = (A + P B)/2 and O = (A - P B)/2 (interlaced_influence.hpp), each times its own
    // influence function: phi_E in place of A, phi_O in place of B. The 1/n^3 of the
    // unnormalised inverse FFT and the (box / 2 pi)^2 of the index-unit table are folded in.
    ScopedPhase phase(times, "pm_green");
    const double norm = interlaced_norm(n, s.box_mpc_h);
    const Real* influence = m.influence.data();
    const ModeComplex* shift = axes.half_shift.data();
#pragma omp parallel for schedule(static)
    for (int i = x0; i < x0 + nx; ++i)
      for (int j = 0; j < n; ++j) {
        Complex* pa = &m.a.rho.mode(i, j, 0);
        Complex* pb = &b.rho.mode(i, j, 0);
        const Real* g = influence + 2 * (static_cast<std::size_t>(std::min(i, n - i)) * h + std::min(j, n - j)) * h;
        const ModeComplex pxy = shift[i] * shift[j];
        for (int k = 0; k < nzc; ++k) {
          ModeComplex even, odd;
          interlaced_potentials(from_mesh(pa[k]), from_mesh(pb[k]), pxy * shift[k], norm,
                                static_cast<double>(g[2 * k]), static_cast<double>(g[2 * k + 1]), even, odd);
          pa[k] = to_mesh<Real>(even);
          pb[k] = to_mesh<Real>(odd);
        }
      }
  }
  {
    // g_c = -i kappa_c phi_c with each coset's own wavevector; back to the meshes:
    // g_A = g_E + g_O, g_B = P^-1 (g_E - g_O).
    ScopedPhase phase(times, "pm_gradient");
    const double dk = interlaced_dk(s.box_mpc_h);
    const ModeComplex* shift = axes.half_shift.data();
#pragma omp parallel for schedule(static)
    for (int i = x0; i < x0 + nx; ++i)
      for (int j = 0; j < n; ++j) {
        Complex* out_a[3] = {&m.a.gx.mode(i, j, 0), &m.a.gy.mode(i, j, 0), &m.a.rho.mode(i, j, 0)};
        Complex* out_b[3] = {&b.gx.mode(i, j, 0), &b.gy.mode(i, j, 0), &b.rho.mode(i, j, 0)};
        const ModeComplex pxy = conj(shift[i] * shift[j]);
        int idx[3] = {FftMesh<double>::signed_index(i, n), FftMesh<double>::signed_index(j, n), 0};
        for (int k = 0; k < nzc; ++k) {
          idx[2] = k;
          double ke[3], ko[3];
          principal_wavevector(idx, n, Coset::even, ke);
          principal_wavevector(idx, n, Coset::odd, ko);
          const ModeComplex phi_e = from_mesh(out_a[2][k]), phi_o = from_mesh(out_b[2][k]);
          const ModeComplex back = pxy * conj(shift[k]);
          for (int d = 0; d < 3; ++d) {
            ModeComplex ga, gb;
            interlaced_gradient(phi_e, phi_o, dk, ke[d], ko[d], back, ga, gb);
            out_a[d][k] = to_mesh<Real>(ga);
            out_b[d][k] = to_mesh<Real>(gb);
          }
        }
      }
  }
  {
    ScopedPhase phase(times, "pm_fft");
    m.a.gx.backward();
    m.a.gy.backward();
    m.a.rho.backward();
    b.gx.backward();
    b.gy.backward();
    b.rho.backward();
  }
}

}  // namespace orbis
