// Mass assignment to a periodic mesh and interpolation back to particles with the CIC or
// TSC window (Hockney & Eastwood 1988), shared by the PM solver and the P(k) estimator.
//
// Mesh node i sits at x = i * cell (cell = box / n). A coordinate in cell units u = x / cell
// touches `order` consecutive nodes base, base+1, ... (order 2: CIC, 3: TSC); the
// one-dimensional weights are the window evaluated at the node distances, and the 3D weight is
// their product. The Fourier transform of the window along one axis is sinc^order(k cell / 2).
//
// Determinism: assignment is in 64-bit fixed point (assign_fixed_point,
// pm/fixed_point_mesh.hpp): integer sums, the same bits for any particle order, thread count
// and rank count. sort_for_mesh() orders particles by the x plane (then y block) of their
// first stencil node with a stable counting sort. Assignment then scatters slabs of particle
// planes in two colours: slabs of one colour write disjoint mesh planes, so no two threads
// touch one node, with no atomics and no per-thread mesh copies. The sort also makes both
// passes walk the mesh in memory order.
//
// Distributed meshes (pm/fft_mesh.hpp): assignment writes the local slab and the ghost planes
// (stencil nodes on other planes are dropped), so particles must first go to the rank that
// holds their stencil's first plane (pm/slab_routing.hpp) and the ghost planes be added to
// their owners afterwards (FftMesh::add_ghost_planes_fixed); interpolation reads the slab and
// the ghost planes, which must hold the owners' values (FftMesh::fetch_ghost_planes).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/hostdevice.hpp"
#include "core/vec3.hpp"
#include "pm/fft_mesh.hpp"

namespace orbis {

enum class Window { cic = 2, tsc = 3 };

Window parse_window(const std::string& name);   // "cic" or "tsc"; anything else is an Error
const char* window_name(Window window);
ORBIS_HD int window_order(Window window) { return static_cast<int>(window); }

// The window math below is host and device code: the CUDA PM (gpu/pm_cuda_mesh.cu) assigns
// and interpolates with the same weights.

// floor() as an integer without a libm call (baseline x86-64 has no rounding instruction,
// and this sits in the innermost loops); |x| must fit an int.
ORBIS_HD int floor_to_int(double x) {
  const int i = static_cast<int>(x);   // truncates toward zero
  return i > x ? i - 1 : i;
}

// The nodes and weights of one axis for a coordinate u in cell units (any real value; the
// caller wraps base periodically). Weights sum to 1.
ORBIS_HD void window_weights(Window window, double u, int& base, double w[3]) {
  if (window == Window::cic) {
    base = floor_to_int(u);
    const double d = u - base;
    w[0] = 1.0 - d;
    w[1] = d;
    w[2] = 0.0;
  } else {
    const int centre = floor_to_int(u + 0.5);
    const double d = u - centre;   // in [-0.5, 0.5)
    base = centre - 1;
    w[0] = 0.5 * (0.5 - d) * (0.5 - d);
    w[1] = 0.75 - d * d;
    w[2] = 0.5 * (0.5 + d) * (0.5 + d);
  }
}

// Stencil indices lie within a few cells of [0, n): a compare is much cheaper than i % n.
ORBIS_HD int wrap_mesh_index(int i, int n) { return i < 0 ? i + n : (i >= n ? i - n : i); }

// One particle's stencil at cell coordinates (ux, uy, uz) with the window order P (2: CIC,
// 3: TSC) known at compile time, so the loops unroll: wrapped node indices and weights.
template <int P>
struct WindowStencil {
  int i[P], j[P], k[P];
  double wx[P], wy[P], wz[P];

  ORBIS_HD WindowStencil(double ux, double uy, double uz, int n) {
    constexpr Window window = P == 2 ? Window::cic : Window::tsc;
    int b[3];
    double w[3][3];
    window_weights(window, ux, b[0], w[0]);
    window_weights(window, uy, b[1], w[1]);
    window_weights(window, uz, b[2], w[2]);
    for (int a = 0; a < P; ++a) {
      i[a] = wrap_mesh_index(b[0] + a, n);
      j[a] = wrap_mesh_index(b[1] + a, n);
      k[a] = wrap_mesh_index(b[2] + a, n);
      wx[a] = w[0][a];
      wy[a] = w[1][a];
      wz[a] = w[2][a];
    }
  }
};

// A position in cell units: x wrapped into [0, box), times n / box, plus a shift in cells.
ORBIS_HD double cell_coordinate(double x, double box, double cells_per_length, double shift) {
  return (x >= 0 && x < box ? x : periodic_wrap_position(x, box)) * cells_per_length + shift;
}

// Fourier transform of the window along one axis at mesh wavenumber index m of an n-point
// mesh: sinc^order(pi m / n) (= sinc^order(k cell / 2)).
double window_fourier(Window window, int m, int n);

// Particles in cell units (shift included), stably sorted by the mesh row (x index, then a
// coarse y block) of their first stencil node; the permutation is kept so results go back to
// the caller's order. Built once per step and used by both passes.
struct SortedParticles {
  struct Entry {
    Vec3d u;             // cell coordinates
    std::size_t index;   // the caller's index (one 32-byte record: one cache miss to scatter)
  };
  int n = 0;                             // mesh side
  int y_blocks = 0;                      // rows of a plane are grouped into this many blocks
  Window window = Window::cic;
  std::vector<Entry> entries;            // sorted
  std::vector<std::size_t> block_start;  // plane b: [block_start[b*y_blocks], block_start[(b+1)*y_blocks])
  std::vector<std::uint32_t> bin;        // scratch: each particle's block, kept to reuse its memory
  std::size_t size() const { return entries.size(); }
};

// Positions are wrapped into [0, box); shift_cells is added to every coordinate in cell units
// (0.5 for the interlaced copy of the P(k) estimator). `out` is overwritten; passing the same
// object every step reuses its memory.
void sort_for_mesh(const std::vector<Vec3d>& pos, double box_mpc_h, int n, Window window,
                   double shift_cells, SortedParticles& out);
inline SortedParticles sort_for_mesh(const std::vector<Vec3d>& pos, double box_mpc_h, int n,
                                     Window window, double shift_cells = 0.0) {
  SortedParticles out;
  sort_for_mesh(pos, box_mpc_h, n, window, shift_cells, out);
  return out;
}

// Fixed-point assignment (pm/fixed_point_mesh.hpp): the 64-bit node sums
// sum_p round(W(x_node - x_p) * scale) over the held planes of `mesh` (slab and ghost planes,
// in its layout), kept as two 32-bit halves lo[e] and hi[e], zeroed here first. Each array
// holds fixed_point_elements(mesh) elements, as many as `mesh` holds Reals (PmSolver lends its
// two gradient meshes; the P(k) estimator allocates them). The sums are the same bits for any
// particle order and thread count (and, ghost planes added, any rank count). `mesh` only
// gives the geometry.
template <typename Real>
std::size_t fixed_point_elements(const FftMesh<Real>& mesh) {
  return static_cast<std::size_t>(mesh.held_planes()) * mesh.n() * mesh.nz_padded();
}
template <typename Real>
void assign_fixed_point(const FftMesh<Real>& mesh, const SortedParticles& sorted, double scale,
                        std::uint32_t* lo, std::uint32_t* hi);
// mesh(node) = pm_fixed_to_density(sum, mean, factor) over the slab; padding and ghost planes
// zeroed.
template <typename Real>
void fixed_point_to_mesh(const std::uint32_t* lo, const std::uint32_t* hi, double mean, double factor,
                         FftMesh<Real>& mesh);

// out_sorted[q][component] = scale * sum_node W(x_node - x_q) mesh(node) for the particles in
// *sorted* order (sequential writes; unsort() puts them back once all components are done):
// the transpose of assignment, so a PM force built on it conserves momentum.
// Every stencil node must be a held plane (the slab or a fetched ghost plane).
template <typename Real>
void interpolate_from_mesh(const FftMesh<Real>& mesh, const SortedParticles& sorted, double scale,
                           std::vector<Vec3d>& out_sorted, int component);

// The same for a vector field held as three meshes, all components in one pass.
template <typename Real>
void interpolate_vector_from_meshes(const FftMesh<Real>& x, const FftMesh<Real>& y, const FftMesh<Real>& z,
                                    const SortedParticles& sorted, double scale, std::vector<Vec3d>& out_sorted);

// out[index of q] = in_sorted[q].
void unsort(const SortedParticles& sorted, const std::vector<Vec3d>& in_sorted, std::vector<Vec3d>& out);
// out[index of q] += in_sorted[q] (out already holds one value per particle).
void unsort_add(const SortedParticles& sorted, const std::vector<Vec3d>& in_sorted, std::vector<Vec3d>& out);

// A convenience that sorts first.
template <typename Real>
void interpolate_from_mesh(const FftMesh<Real>& mesh, const std::vector<Vec3d>& pos,
                           double box_mpc_h, Window window, double scale,
                           std::vector<Vec3d>& out, int component) {
  const SortedParticles sorted = sort_for_mesh(pos, box_mpc_h, mesh.n(), window);
  std::vector<Vec3d> values(pos.size());
  interpolate_from_mesh(mesh, sorted, scale, values, component);
  if (out.size() != pos.size()) out.resize(pos.size());
  for (std::size_t q = 0; q < values.size(); ++q) out[sorted.entries[q].index][component] = values[q][component];
}

extern template void assign_fixed_point<float>(const FftMesh<float>&, const SortedParticles&, double,
                                               std::uint32_t*, std::uint32_t*);
extern template void assign_fixed_point<double>(const FftMesh<double>&, const SortedParticles&, double,
                                                std::uint32_t*, std::uint32_t*);
extern template void fixed_point_to_mesh<float>(const std::uint32_t*, const std::uint32_t*, double, double,
                                                FftMesh<float>&);
extern template void fixed_point_to_mesh<double>(const std::uint32_t*, const std::uint32_t*, double, double,
                                                 FftMesh<double>&);
extern template void interpolate_from_mesh<float>(const FftMesh<float>&, const SortedParticles&,
                                                  double, std::vector<Vec3d>&, int);
extern template void interpolate_from_mesh<double>(const FftMesh<double>&, const SortedParticles&,
                                                   double, std::vector<Vec3d>&, int);
extern template void interpolate_vector_from_meshes<float>(const FftMesh<float>&, const FftMesh<float>&,
                                                           const FftMesh<float>&, const SortedParticles&,
                                                           double, std::vector<Vec3d>&);
extern template void interpolate_vector_from_meshes<double>(const FftMesh<double>&, const FftMesh<double>&,
                                                            const FftMesh<double>&, const SortedParticles&,
                                                            double, std::vector<Vec3d>&);

}  // namespace orbis
