// Mode bookkeeping and the optimal influence function of the PM-only force, which samples the
// density on two meshes offset by half a cell diagonal (a body-centred-cubic lattice; the
// scheme is described in pm_solver.hpp).
//
// On one mesh of cell h the Fourier mode k (|k_i| <= pi/h) carries k and all its alias images
// k + 2 pi a / h, a integer. Mesh B is assigned at x + (h/2)(1,1,1), so with the phase factor
// P(k) = exp(i k.(h/2)(1,1,1)) the image a enters P B with the sign (-1)^(a_x + a_y + a_z):
// E = (A + P B)/2 holds the images of even a_x + a_y + a_z, O = (A - P B)/2 those of odd ones.
// Each of these "cosets" is one mode of the body-centred-cubic lattice, whose zone is the
// rhombic dodecahedron |k_i| + |k_j| <= 2 pi / h (twice the cube's volume). Its wavevector is
// the shortest image in the coset: k itself for E, k - 2 pi/h sign(k_i) e_i (i the largest
// component) for O.
#pragma once
#include <vector>

#include "core/hostdevice.hpp"

namespace orbis {

enum class Window;

// Parity of a_x + a_y + a_z of the images a coset holds: even (channel E) or odd (channel O).
enum class Coset { even = 0, odd = 1 };

// The wavevector, in mesh index units (2 pi / box), of the shortest image in `coset` of the
// mesh mode with signed indices m in (-n/2, n/2]. Where several images are equally short (the
// mode lies on the zone boundary) it is their mean: the derivative is then odd in k, which
// keeps the force field real and free of self-force, as setting the Nyquist derivative to
// zero does on one mesh. Shortest images have |a_i| <= 1 (any |a_i| >= 2 is shortened by
// a_i -= 2 sign(a_i)), which the brute-force check in tests/unit/test_pm_assignment.cpp uses.
// Host and device code: the CUDA PM's gradient kernel calls it per mode.
ORBIS_HD void principal_wavevector(const int m[3], int n, Coset coset, double kappa[3]) {
  const int half = n / 2;
  int size[3];
  for (int d = 0; d < 3; ++d) {
    kappa[d] = m[d];
    size[d] = m[d] < 0 ? -m[d] : m[d];
  }
  if (coset == Coset::even) {
    // m itself, unless two or three components sit on the Nyquist plane: then m - n (1,1,0)
    // (and permutations) are as short, and the mean zeroes those components.
    int nyquist = 0;
    for (int d = 0; d < 3; ++d) nyquist += size[d] == half;
    if (nyquist >= 2)
      for (int d = 0; d < 3; ++d)
        if (size[d] == half) kappa[d] = 0;
    return;
  }
  // Odd: move the largest component by n towards zero; with t components tied for largest,
  // the mean of the t moves. At k = 0 (six images) and at the corner (the three moves and
  // m - n (1,1,1)) the mean is zero.
  int largest = 0, tied = 0;
  for (int d = 0; d < 3; ++d) largest = size[d] > largest ? size[d] : largest;
  for (int d = 0; d < 3; ++d) tied += size[d] == largest;
  if (largest == 0 || (tied == 3 && largest == half)) {
    kappa[0] = kappa[1] = kappa[2] = 0;
    return;
  }
  for (int d = 0; d < 3; ++d)
    if (size[d] == largest) kappa[d] = m[d] - (m[d] > 0 ? 1.0 : -1.0) * n / tied;
}

// The reference force of the optimal influence function: the point-mass force times
// S(k) = (1 - k^2/K^2)^p for k < K, 0 beyond, with K = kReferenceCutoff / cell and
// p = kReferencePower. Chosen by measurement (pm_solver.cpp has the table): S = 1 - 0.165 (k cell)^2
// at low k, which the Zel'dovich pancake and linear-growth tests need, and S reaches zero inside
// the rhombic-dodecahedron zone except near its face centres (|k| = sqrt(2) pi / cell, where S =
// 0.005), so the pair force does not ring there.
inline constexpr double kReferenceCutoff = 5.5;   // K cell
inline constexpr int kReferencePower = 5;

// S(k) at |k|^2 = k2 in mesh index units (2 pi / box) on an n^3 mesh.
double reference_smoothing(double k2, int n);

// The optimal influence function (Hockney & Eastwood 1988, eq. 8-22) of each coset for the
// window W = sinc^p, the spectral derivative i kappa and the reference force
// R(k) = -i k 4 pi G S(k) / k^2:
//   G_c(k) = -4 pi G sum_{a in c} W^2(k_a) S(k_a) (kappa.k_a) / k_a^2 / (|kappa|^2 [sum_{a in c} W^2(k_a)]^2).
// Returned as G_c / (-4 pi G) in mesh index units ((2 pi / box)^-2) for m in [0, n/2]^3, two
// values (even, odd) per m at 2 * ((mx * h + my) * h + mz), h = n/2 + 1 (G_c has the symmetry
// of the cube). Zero where kappa = 0. The numerator needs only the images inside K (S = 0
// beyond), i.e. |m_i + n a_i| < 0.88 n, so a_i in {-1, 0, 1}; the denominators are summed over
// all images in closed form (see the .cpp).
std::vector<double> interlaced_optimal_influence(Window window, int n);

}  // namespace orbis
