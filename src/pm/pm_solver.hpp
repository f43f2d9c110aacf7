// The particle-mesh gravity solver: the long-range force of TreePM, or the whole force of a
// PM-only run (docs/design.md, "Force split").
//
// Long range (r_s > 0, TreePM), on one mesh:
//   rho(x)  = m sum_p W(x - x_p) / cell^3                  (CIC or TSC, mass_assignment.hpp)
//   phi(k)  = -4 pi G rho(k) / k^2 * exp(-k^2 r_s^2) / W(k)^2,  phi(0) = 0
//   g(k)    = -i k phi(k)                                  (spectral differentiation)
//   g(x_p)  = sum_x W(x - x_p) g(x)                        (the same window: momentum conserved)
// W(k) = prod_i sinc^p(k_i cell/2) is divided out twice, once for assignment and once for
// interpolation; the result adds to the short-range erfc force of the tree to give 1/r^2.
//
// Full force (r_s = 0, PM-only), on two interlaced meshes: mesh A is assigned at the particle
// positions x, mesh B at x + (cell/2)(1,1,1). Together they sample the density on a
// body-centred-cubic lattice, whose Fourier zone (the rhombic dodecahedron) has twice the
// volume of one mesh's cube: with the phase P(k) = exp(i k.(cell/2)(1,1,1)), E = (A + P B)/2
// and O = (A - P B)/2 are two distinct modes of that lattice (interlaced_influence.hpp), each
// with its own wavevector and its own optimal influence function (Hockney & Eastwood) for a
// reference force smoothed by S(k) = (1 - k^2/K^2)^5, K = 5.5/cell. The fields go back as
// g_A = g_E + g_O and g_B = P^-1 (g_E - g_O); each particle gets the mean of g_A
// interpolated at x and g_B at x + (cell/2)(1,1,1). One mesh's cube forces a choice between
// ringing at its edge and a reference that costs the large scales force (pm_solver.cpp);
// the doubled zone holds a reference that is both flat at low k and zero at the boundary.
//
// g is the comoving acceleration of GADGET's convention: nabla^2 phi = 4 pi G (rho - rho_bar)
// with comoving rho in (1e10 Msun/h)/(Mpc/h)^3, so g is in (km/s)^2/(Mpc/h) and the run loop
// kicks p += g * int da/(a^2 H). The mean density is removed (k = 0 is zero), as in every
// periodic code.
//
// Memory: three meshes per mesh set (density/phi/g_z, g_x, g_y) of 4 (float) or 8 (double)
// bytes per cell, one set for the long range, two for PM-only (plus its influence table, two
// values per (n/2+1)^3, ~1/4 of one mesh), plus 56 bytes per particle per set (the particles
// sorted for the mesh and g in that order), all kept from step to step. Mesh loops run over
// the local x slab of FftMesh.
//
// Over several ranks (a communicator given): the meshes are x slabs (pm/fft_mesh.hpp) with
// window-order ghost planes; each rank sends its particles to the owners of their stencils'
// slabs (pm/slab_routing.hpp), the owners assign them, add the ghost planes into their
// neighbours' slabs, transform, fetch the force meshes' ghost planes, interpolate, and send
// the forces back.
//
// Determinism: the forces are BITWISE the same for any rank count, thread count and particle
// order. The density is assigned in 64-bit fixed point (pm/fixed_point_mesh.hpp, the CUDA
// PM's formula; integer sums, ghost planes added as integers) in the storage of the gradient
// meshes (no memory of its own), the transforms are FftPlan::reproducible (the same 1D
// transforms of every line for any decomposition), the Fourier work is per mode, and each
// particle reads its stencil in a fixed order from owner values (fetched ghost planes); the
// PM-only force adds mesh A's then mesh B's share on the same rank. A PmSlabTransform (the cuFFT
// slabs: 2D and 1D cuFFT plans per slab shape) and the CUDA step engine's PM are not bitwise
// across rank counts and do not try to be.
// Cost, measured with tests/bench/bench_pm (128^3 particles, 256^3 mesh, TSC, 1 and 2
// threads, five runs on a shared 2-core VM whose load moved every time by 2x): one mesh's
// forward + backward transform takes 0.5-0.7x the time of FFTW's fast plan (FFTW_ESTIMATE's
// 3D plan is the slower here; quietest run, 2 threads, float: 0.15 vs 0.28 s); the assignment
// of sorted particles in fixed point 2-3x adding floats (0.077 vs 0.033 s), 1.5-1.9x adding
// doubles (0.073 vs 0.047 s): two 32-bit halves to read and write per node, a conversion pass.
// A long-range step is faster than before on balance (4 transforms, 1 assignment).
//
// A PmSlabTransform (below) may take over the long range's mesh work between the density's
// ghost planes and the forces' (the cuFFT slabs of gpu/pm_cuda_slabs.hpp); the routing,
// assignment, ghost planes and interpolation stay here.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/vec3.hpp"
#include "pm/mass_assignment.hpp"

namespace orbis {

class Params;
class PhaseTimes;

struct PmSettings {
  double box_mpc_h = 0;       // side of the periodic box, comoving Mpc/h
  int grid_side = 0;          // N_PM: mesh cells per side (even)
  Window window = Window::cic;
  double r_s_mpc_h = 0;       // force-split scale; 0: full 1/k^2 force (PM-only)
  bool double_mesh = false;   // mesh and FFTs in double (float: half the memory, ~1e-6 error)
  bool interlaced = false;    // long range (r_s > 0): two meshes half a cell diagonal apart,
                              // forces averaged (pm/pm_modes.hpp, long_range_mesh_shift)

  // The meshes a solver keeps: two for the PM-only force and for the interlaced long range.
  bool two_meshes() const { return r_s_mpc_h == 0 || interlaced; }

  // gravity.solver "pm": full force on a mesh of pm_grid_side (0: 2 x particles_per_side);
  // "treepm": r_s = rs_over_cell * box / N_PM on a mesh of pm_grid_side (0: 2 x particles_per_side).
  // gravity.mass_assignment picks the window, gravity.pm_mesh_precision the arithmetic,
  // gravity.pm_interlacing the long range's second mesh.
  static PmSettings from_params(const Params& params);
  // Box > 0, an even mesh side >= 4, r_s >= 0; an Error otherwise (every PM solver checks).
  void check() const;
};

// The long-range mesh work of a PmSolver done elsewhere than FFTW (gpu/pm_cuda_slabs.hpp:
// cuFFT on the rank's GPU): from this rank's x slab of the density (rho, ghost planes already
// added) to g_x, g_y, g_z in the slabs gx, gy and rho, with the Green's function and spectral
// gradient of run_long_range. Each pointer is the slab's first real value, FftMesh's padded
// layout (local_nx x n x 2(n/2+1)); ghost planes are left alone. Collective over the
// solver's communicator; the phases go to `times` as PmSolver's ("pm_fft", "pm_green",
// "pm_gradient", the transposes in "pm_exchange").
class PmSlabTransform {
 public:
  virtual ~PmSlabTransform() = default;
  virtual void long_range(float* rho, float* gx, float* gy, PhaseTimes& times) = 0;
  virtual void long_range(double* rho, double* gx, double* gy, PhaseTimes& times) = 0;
  virtual std::string describe() const = 0;
  virtual std::size_t device_bytes() const = 0;
};

class PmSolver {
 public:
  // Collective over comm: every rank of it calls accelerations() together.
  explicit PmSolver(const PmSettings& settings, const Comm& comm = Comm::self());
  ~PmSolver();
  PmSolver(const PmSolver&) = delete;
  PmSolver& operator=(const PmSolver&) = delete;

  const PmSettings& settings() const { return settings_; }

  // acc[p] = g(x_p) for every particle (this rank's), all of mass particle_mass (1e10 Msun/h);
  // positions in Mpc/h (wrapped into the box here). Phases are added to `times` (may be null)
  // as "pm_assign", "pm_fft", "pm_green", "pm_gradient", "pm_interpolate", "pm_exchange"
  // (particles to the slabs and back, ghost planes; several ranks only).
  void accelerations(const std::vector<Vec3d>& pos, double particle_mass,
                     std::vector<Vec3d>& acc, PhaseTimes* times = nullptr);

  // The long-range potential energy W_mesh = (1/2) sum_p m phi_long(x_p), phi_long the
  // potential whose gradient accelerations() interpolates (the same window, deconvolved
  // twice), comoving: (km/s)^2 times 1e10 Msun/h. Since the interpolation is the assignment's
  // transpose it is the mesh sum (1/2) cell^3 sum_x rho(x) phi(x) = (1/2) cell^3 sum_k
  // G(k) |rho(k)|^2 (Parseval; G the Green's function above, the inverse FFT's 1/n^3 in it):
  // one assignment and one forward FFT, no interpolation. It includes each particle's own
  // smooth potential (the caller's self-energy term removes it). Long range (TreePM) only;
  // collective over comm like accelerations(); the same bits for any thread and rank count
  // (the same assignment and transform; the plane sums added in plane order). The
  // meshes are reused: call it between force computations.
  double potential_energy(const std::vector<Vec3d>& pos, double particle_mass);

  // The long range's transforms and Fourier work from now on by `transform` (built for this
  // solver's settings and communicator); an Error for a PM-only solver, whose two interlaced
  // meshes stay on the host. potential_energy() stays on the host.
  void use_slab_transform(std::unique_ptr<PmSlabTransform> transform);
  const PmSlabTransform* slab_transform() const { return slab_transform_.get(); }

  std::size_t bytes() const;   // memory held by the meshes
  // "PM 256^3 float mesh, tsc, long range, r_s = 0.47 Mpc/h (1.2 cells), 192 MiB"
  std::string describe() const;

  // Names of the phases accelerations() adds to PhaseTimes, in order.
  static const std::vector<const char*>& phase_names();

 private:
  struct Impl;
  template <typename Real> struct Meshes;
  PmSettings settings_;
  Comm comm_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<PmSlabTransform> slab_transform_;
};

}  // namespace orbis
