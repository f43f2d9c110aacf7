// The particle-mesh gravity solver: the long-range force of TreePM, or the whole force of a
// PM-only run (DESIGN.md "Force split").
//
//   rho(x)  = m sum_p W(x - x_p) / cell^3                  (CIC or TSC, mass_assignment.hpp)
//   phi(k)  = -4 pi G rho(k) / k^2 * exp(-k^2 r_s^2) / W(k)^2,  phi(0) = 0
//   g(k)    = -i k phi(k)                                  (spectral differentiation)
//   g(x_p)  = sum_x W(x - x_p) g(x)                        (the same window: momentum conserved)
//
// g is the comoving acceleration of GADGET's convention: nabla^2 phi = 4 pi G (rho - rho_bar)
// with comoving rho in (1e10 Msun/h)/(Mpc/h)^3, so g is in (km/s)^2/(Mpc/h) and the run loop
// kicks p += g * int da/(a^2 H). The mean density is removed (k = 0 is zero), as in every
// periodic code. W(k) = prod_i sinc^p(k_i cell/2) is divided out twice, once for assignment
// and once for interpolation. With r_s > 0 the force is the long-range part that adds to the
// short-range erfc force of the tree to give 1/r^2; with r_s = 0 it is the full PM force with
// the Hockney & Eastwood optimal influence function in place of 1/W(k)^2 (pm_solver.cpp), for
// a reference force smoothed at kReferenceSmoothingCells.
//
// Memory: three meshes (density/phi/g_z, g_x, g_y) of 4 (float) or 8 (double) bytes per cell,
// in PM-only mode the influence table ((n/2+1)^3 values, ~1/8 of one mesh),
// plus 56 bytes per particle (the particles sorted for the mesh and g in that order), all kept
// from step to step. Mesh loops run over the local x slab of FftMesh, so an FFTW-MPI slab mesh
// can replace the serial one (interpolation will then need ghost planes).
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

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

  // gravity.solver "pm": full force on a mesh of pm_grid_side (0: 2 x particles_per_side);
  // "treepm": r_s = rs_over_cell * box / N_PM on a mesh of pm_grid_side (0: 2 x particles_per_side).
  // gravity.mass_assignment picks the window, gravity.pm_mesh_precision the arithmetic.
  static PmSettings from_params(const Params& params);
};

class PmSolver {
 public:
  explicit PmSolver(const PmSettings& settings);
  ~PmSolver();
  PmSolver(const PmSolver&) = delete;
  PmSolver& operator=(const PmSolver&) = delete;

  const PmSettings& settings() const { return settings_; }

  // acc[p] = g(x_p) for every particle, all of mass particle_mass (1e10 Msun/h); positions in
  // Mpc/h (wrapped into the box here). Phases are added to `times` (may be null) as
  // "pm_assign", "pm_fft", "pm_green", "pm_gradient", "pm_interpolate".
  void accelerations(const std::vector<Vec3d>& pos, double particle_mass,
                     std::vector<Vec3d>& acc, PhaseTimes* times = nullptr);

  std::size_t bytes() const;   // memory held by the meshes
  // "PM 256^3 float mesh, tsc, long range, r_s = 0.47 Mpc/h (1.2 cells), 192 MiB"
  std::string describe() const;

  // Alias images per axis summed in the numerator of the full-force optimal influence function
  // (|k_n| <= (2 + 1/2) k_grid); see pm_solver.cpp.
  static constexpr int kInfluenceAliasImages = 2;
  // Full-force mode: the reference force of the optimal influence function is the point-mass
  // force smoothed by exp(-k^2 sigma^2), sigma = 0.6 cells. Without it the optimal response
  // still drops steeply at the zone boundary and pair forces ring by 10-40% at 4-8 cells
  // (measured). It costs (0.6 k cell)^2 of the force at low k (1.4% at the fundamental of a
  // 32^3 mesh); flatter references remove that but ring at 4-5 cells (pm_solver.cpp).
  static constexpr double kReferenceSmoothingCells = 0.6;

  // Names of the phases accelerations() adds to PhaseTimes, in order.
  static const std::vector<const char*>& phase_names();

 private:
  struct Impl;
  template <typename Real> struct Meshes;
  PmSettings settings_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace orbis
