// Zel'dovich and second-order Lagrangian perturbation theory (2LPT) on the particle grid,
// in the conventions of Crocce, Pueblas & Scoccimarro (2006):
//   x = q + D1 psi1 + D2 psi2,        p = a^2 dx/dt = a^2 H (f1 D1 psi1 + f2 D2 psi2)
//   psi1 = -grad phi1,  lap phi1 = delta                 (so div psi1 = -delta)
//   psi2 = +grad phi2,  lap phi2 = sum_{i<j} (phi1,ii phi1,jj - phi1,ij^2)
// with delta the linear field at D1 = 1 and D2 -> -3/7 D1^2 (Cosmology::growth2). In Fourier
// space (delta_k as in ic/gaussian_field.hpp): psi1_k = i k delta_k / k^2,
// phi1,ij_k = k_i k_j delta_k / k^2, psi2_k = -i k S_k / k^2 with S the 2LPT source above.
// The source is formed on the grid from products of fields, without dealiasing (as 2LPTic).
#pragma once
#include <complex>
#include <vector>

#include "core/particles.hpp"
#include "pm/fft_mesh.hpp"

namespace orbis::ic {

struct LptCoefficients {
  double d1 = 0, d2 = 0;       // x = q + d1 psi1 + d2 psi2, Mpc/h per unit psi
  double vel1 = 0, vel2 = 0;   // p = vel1 psi1 + vel2 psi2: a^2 H f1 D1 and a^2 H f2 D2, km/s per Mpc/h
};

// Grid particles of the x planes [x0, x0 + nx) (all of them by default): q = (ix, iy, iz) L/N,
// ID - 1 = (ix N + iy) N + iz, stored in ID order. Positions are set to q, momenta to zero,
// the mass is not touched.
void make_grid_particles(int n, double box_mpc_h, Particles& particles, int x0 = 0, int nx = -1);

// Displaces grid particles (make_grid_particles of the mesh's x slab) by `order` (1 or 2)
// LPT from delta_k, which has `mesh`'s complex layout; collective over mesh.comm(). `mesh` is the one scratch FFT mesh (its contents are lost);
// the particles' own arrays hold the intermediate fields, so the peak memory is the
// particles, delta_k and one mesh. Positions are wrapped into [0, L).
void displace_particles(const std::vector<std::complex<double>>& delta_k, FftMesh<double>& mesh,
                        double box_mpc_h, int order, const LptCoefficients& c, Particles& particles);

}  // namespace orbis::ic
