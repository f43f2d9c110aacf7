// Mass assignment to a periodic mesh and interpolation back to particles with the CIC or
// TSC window (Hockney & Eastwood 1988), shared by the PM solver and the P(k) estimator.
//
// Mesh node i sits at x = i * cell (cell = box / n). A coordinate in cell units u = x / cell
// touches `order` consecutive nodes base, base+1, ... (order 2: CIC, 3: TSC); the
// one-dimensional weights are the window evaluated at the node distances, and the 3D weight is
// their product. The Fourier transform of the window along one axis is sinc^order(k cell / 2).
//
// Determinism: assign_to_mesh() bins particles by the x plane of their first node (a stable
// counting sort), then each mesh plane is *gathered* by one thread from the two or three bins
// that reach it, in bin order and particle order. Every cell therefore sums its contributions
// in the same order for any number of threads, so the mesh is bitwise identical for 1 or 64
// threads, with no atomics and no per-thread copies of the mesh. Each particle's x weight is
// recomputed for each plane it touches, which costs little next to the memory traffic.
// Only the local x slab of the mesh is written (FFTW-MPI ready); particles whose stencil
// misses the slab are skipped.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "core/vec3.hpp"
#include "pm/fft_mesh.hpp"

namespace orbis {

enum class Window { cic = 2, tsc = 3 };

Window parse_window(const std::string& name);   // "cic" or "tsc"; anything else is an Error
const char* window_name(Window window);
inline int window_order(Window window) { return static_cast<int>(window); }

// The nodes and weights of one axis for a coordinate u in cell units (any real value; the
// caller wraps base periodically). Weights sum to 1.
inline void window_weights(Window window, double u, int& base, double w[3]) {
  if (window == Window::cic) {
    const double f = std::floor(u);
    const double d = u - f;
    base = static_cast<int>(f);
    w[0] = 1.0 - d;
    w[1] = d;
    w[2] = 0.0;
  } else {
    const double centre = std::floor(u + 0.5);
    const double d = u - centre;   // in [-0.5, 0.5)
    base = static_cast<int>(centre) - 1;
    w[0] = 0.5 * (0.5 - d) * (0.5 - d);
    w[1] = 0.75 - d * d;
    w[2] = 0.5 * (0.5 + d) * (0.5 + d);
  }
}

// Fourier transform of the window along one axis at mesh wavenumber index m of an n-point
// mesh: sinc^order(pi m / n) (= sinc^order(k cell / 2)).
double window_fourier(Window window, int m, int n);

// mesh(node) = sum_p value * W(x_node - x_p) over particles, for the local slab. Positions are
// in [0, box) or anywhere (they are wrapped); shift_cells is added to every coordinate in cell
// units (0.5 for the interlaced copy of the P(k) estimator). The padding is zeroed.
template <typename Real>
void assign_to_mesh(FftMesh<Real>& mesh, const std::vector<Vec3d>& pos, double box_mpc_h,
                    Window window, double value, double shift_cells = 0.0);

// out[p][component] = scale * sum_node W(x_node - x_p) mesh(node), the transpose of
// assign_to_mesh() (the same window, so a PM force built with it conserves momentum).
// Serial meshes only: every stencil node must be in the local slab.
template <typename Real>
void interpolate_from_mesh(const FftMesh<Real>& mesh, const std::vector<Vec3d>& pos,
                           double box_mpc_h, Window window, double scale,
                           std::vector<Vec3d>& out, int component);

extern template void assign_to_mesh<float>(FftMesh<float>&, const std::vector<Vec3d>&, double,
                                           Window, double, double);
extern template void assign_to_mesh<double>(FftMesh<double>&, const std::vector<Vec3d>&, double,
                                            Window, double, double);
extern template void interpolate_from_mesh<float>(const FftMesh<float>&, const std::vector<Vec3d>&,
                                                  double, Window, double, std::vector<Vec3d>&, int);
extern template void interpolate_from_mesh<double>(const FftMesh<double>&,
                                                   const std::vector<Vec3d>&, double, Window,
                                                   double, std::vector<Vec3d>&, int);

}  // namespace orbis
