// The Fourier-space arithmetic of the PM solver, per mode, written once for the host loops
// (pm_solver.cpp) and the CUDA kernels (gpu/pm_cuda_fourier.cu): the long-range Green's
// function and a mode's share of the potential energy, the spectral derivative, and the even/odd coset potentials and gradients of the
// two-mesh PM-only force (pm_solver.hpp describes both schemes). Everything is in double,
// whatever the mesh precision; the callers round to the mesh's type at the end, so a CPU and
// a GPU mesh of the same precision differ only by the transforms' and the sums' rounding.
#pragma once
#include <cmath>
#include <vector>

#include "core/hostdevice.hpp"
#include "core/units.hpp"

namespace orbis {

struct PmSettings;

// A complex number with the plain formulas (no NaN recovery, no FMA beyond what the compiler
// contracts), so the host loops give bitwise what std::complex<double> gave them.
struct ModeComplex {
  double re, im;
};
ORBIS_HD ModeComplex operator+(ModeComplex a, ModeComplex b) { return {a.re + b.re, a.im + b.im}; }
ORBIS_HD ModeComplex operator-(ModeComplex a, ModeComplex b) { return {a.re - b.re, a.im - b.im}; }
ORBIS_HD ModeComplex operator*(ModeComplex a, ModeComplex b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
ORBIS_HD ModeComplex operator*(ModeComplex a, double s) { return {a.re * s, a.im * s}; }
ORBIS_HD ModeComplex operator*(double s, ModeComplex a) { return {s * a.re, s * a.im}; }
ORBIS_HD ModeComplex conj(ModeComplex a) { return {a.re, -a.im}; }

// Per-axis tables of an n-point mesh, indexed by the storage index i (signed index
// m = i <= n/2 ? i : i - n): the wavenumber 2 pi m / box (h/Mpc), 1 / W_1d(m)^2 of the window,
// and the half-cell phase exp(i pi m / n), whose product over the axes is
// P(k) = exp(i k.(cell/2)(1,1,1)), the phase of the PM-only mesh B relative to mesh A.
struct PmAxisTables {
  std::vector<double> k, inv_w2;
  std::vector<ModeComplex> half_shift;
};
PmAxisTables make_pm_axis_tables(const PmSettings& settings);

// Where the long-range (TreePM) meshes lie: nodes at x = (j - shift) cell on every axis.
// Grid ICs put the particles on a lattice commensurate with the mesh (on nodes for an even
// number of cells per spacing, mid-cell for an odd one). The lattice's harmonics at the mesh's
// alias wavenumbers 2 pi n / cell, carrying the displacement field, then fold onto the long
// waves: with the lattice on the nodes the images n = +-1 take the same sign and the long-range
// force of every mode falls short by 0.042 (k cell)^2 (mid-cell: 0.077 too strong) while the
// particles stay near the lattice (at 256^3 in 1 Gpc/h on the default 512 mesh: -0.2% in the
// linear P(k) at z = 0 against a 1024 mesh; docs/force_split.md). The image n carries the
// phase exp(-2 pi i n shift):
//  - one mesh at 1/4 cell: n = +-1 get -i and +i and cancel; n = +-2 leave a quarter of the
//    deficit (0.0104 (k cell)^2, for any lattice offset);
//  - two meshes at 1/8 and 5/8 (interlaced, forces averaged): half a cell apart, so every odd
//    image cancels between them, and n = +-2 get -i and +i on each; n = +-4 leave a sixteenth
//    (0.0026 (k cell)^2), for twice the mesh work.
// Away from the lattice the shifts change nothing but the rounding (the mesh force is
// translation invariant to its own accuracy). tests/physics/test_pm_lattice checks both
// against the exact long-range force of a displaced lattice.
ORBIS_HD double long_range_mesh_shift(bool interlaced, int mesh) {
  return interlaced ? (mesh == 0 ? 0.125 : 0.625) : 0.25;
}

// The constant factors: the long-range norm below; the PM-only potentials' norm, which also
// folds in the (box / 2 pi)^2 of the index-unit influence table and the 1/2 of E and O; and
// the PM-only gradient's wavenumber unit 2 pi / box (h/Mpc).
inline double long_range_norm(int n) { return -4.0 * units::pi * units::G / (static_cast<double>(n) * n * n); }
inline double interlaced_norm(int n, double box_mpc_h) {
  return -4.0 * units::pi * units::G / (static_cast<double>(n) * n * n) * std::pow(box_mpc_h / (2 * units::pi), 2) * 0.5;
}
inline double interlaced_dk(double box_mpc_h) { return 2 * units::pi / box_mpc_h; }

// Long range: phi(k) / rho(k) = norm exp(-k^2 r_s^2) / (k^2 W(k)^2) with norm = -4 pi G / n^3
// (the inverse FFT's normalisation folded in), 0 at k = 0. 1/W^2 comes as the product of the
// x and y axes' factors and the z axis' factor.
ORBIS_HD double long_range_green(double k2, double rs2, double norm, double inv_w2_xy, double inv_w2_z) {
  return k2 > 0 ? norm / k2 * exp(-k2 * rs2) * inv_w2_xy * inv_w2_z : 0.0;
}

// Long range, one stored mode's share of the mesh potential energy (PmSolver::potential_energy):
// G(k) |rho(k)|^2, counted twice for 0 < k_z < n/2, whose conjugate mode (-k) the half-complex
// mesh does not store. `green` is long_range_green of the mode; kz_index its storage index.
ORBIS_HD double long_range_energy_term(double re, double im, double green, int kz_index, int n) {
  const double weight = (kz_index == 0 || 2 * kz_index == n) ? 1.0 : 2.0;
  return weight * (re * re + im * im) * green;
}

// -i k_d phi for the wavenumber k_d of axis d (k_d = 0 on that axis' Nyquist plane).
ORBIS_HD ModeComplex minus_i_k(double k_d, double re, double im) { return {k_d * im, -k_d * re}; }

// PM-only, Green's step: the even and odd coset potentials E = (A + P B) norm g_E and
// O = (A - P B) norm g_O from the two meshes' modes; `phase` is P(k), g_E and g_O the
// influence table's values (interlaced_influence.hpp).
ORBIS_HD void interlaced_potentials(ModeComplex a, ModeComplex b, ModeComplex phase, double norm,
                                    double g_even, double g_odd, ModeComplex& even, ModeComplex& odd) {
  const ModeComplex shifted = phase * b;
  even = (a + shifted) * (norm * g_even);
  odd = (a - shifted) * (norm * g_odd);
}

// PM-only, gradient step for one component: g_E = -i kappa_E phi_E, g_O = -i kappa_O phi_O
// (kappa in index units, dk = 2 pi / box), back to the meshes as g_A = g_E + g_O and
// g_B = conj(P) (g_E - g_O); `back` is conj(P(k)).
ORBIS_HD void interlaced_gradient(ModeComplex phi_even, ModeComplex phi_odd, double dk, double kappa_even,
                                  double kappa_odd, ModeComplex back, ModeComplex& g_a, ModeComplex& g_b) {
  const ModeComplex ge = kappa_even * (phi_even * ModeComplex{0, -dk});
  const ModeComplex go = kappa_odd * (phi_odd * ModeComplex{0, -dk});
  g_a = ge + go;
  g_b = back * (ge - go);
}

}  // namespace orbis
