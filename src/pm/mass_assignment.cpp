#include "pm/mass_assignment.hpp"

#include <omp.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/units.hpp"
#include "pm/fixed_point_mesh.hpp"

namespace orbis {
namespace {

inline double wrap_coordinate(double x, double box) {
  return x >= 0 && x < box ? x : periodic_wrap_position(x, box);
}

// Coordinates in cell units, u in [0, n] before the shift.
inline Vec3d cell_coordinates(const Vec3d& x, double box, double cells_per_length, double shift) {
  Vec3d u;
  for (int d = 0; d < 3; ++d) u[d] = cell_coordinate(x[d], box, cells_per_length, shift);
  return u;
}

// Width S of the particle slabs that assignment scatters in two colours: the smallest S >=
// order - 1 with n / S even. A slab's stencil reaches S + order - 1 < 2S planes, so slabs of
// one colour never write the same plane, also across the periodic seam.
int slab_width(int n, int order) {
  for (int s = std::max(1, order - 1); s < n; ++s)
    if (n % (2 * s) == 0) return s;
  return n / 2;
}

// Two colours of slabs; within a colour every slab writes its own planes, so no two threads
// touch one node (integer sums: the order they add in does not matter). Each node's 64-bit
// sum is kept in two 32-bit halves, lo and hi (assign_fixed_point). The weight is (wx wy) wz
// as on the GPU.
template <int P, typename Real>
void scatter(const FftMesh<Real>& mesh, const SortedParticles& sorted, double scale, std::uint32_t* lo,
             std::uint32_t* hi) {
  const int n = mesh.n(), yb = sorted.y_blocks, held = mesh.held_planes();
  const std::size_t padded = static_cast<std::size_t>(mesh.nz_padded());
  const int width = slab_width(n, P), slabs = n / width;
  for (int colour = 0; colour < 2; ++colour) {
#pragma omp parallel for schedule(dynamic, 1)
    for (int slab = colour; slab < slabs; slab += 2) {
      const std::size_t begin = sorted.block_start[static_cast<std::size_t>(slab) * width * yb];
      const std::size_t end = sorted.block_start[static_cast<std::size_t>(slab + 1) * width * yb];
      for (std::size_t q = begin; q < end; ++q) {
        const WindowStencil<P> s(sorted.entries[q].u.x, sorted.entries[q].u.y, sorted.entries[q].u.z, n);
        for (int o = 0; o < P; ++o) {
          const int plane = mesh.local_plane(s.i[o]);
          if (plane >= held) continue;   // another rank's plane, not a ghost of this one
          for (int a = 0; a < P; ++a) {
            const std::size_t row = (static_cast<std::size_t>(plane) * n + s.j[a]) * padded;
            const double wxy = s.wx[o] * s.wy[a];
            for (int c = 0; c < P; ++c) {
              const std::size_t e = row + s.k[c];
              const std::uint64_t sum =
                  (static_cast<std::uint64_t>(hi[e]) << 32 | lo[e]) + fixed_point_round(wxy * s.wz[c], scale);
              lo[e] = static_cast<std::uint32_t>(sum);
              hi[e] = static_cast<std::uint32_t>(sum >> 32);
            }
          }
        }
      }
    }
  }
}

template <int P, typename Real>
void gather(const FftMesh<Real>& mesh, const SortedParticles& sorted, double scale,
            std::vector<Vec3d>& out_sorted, int component) {
  const int n = mesh.n();
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(sorted.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t q = 0; q < count; ++q) {
    const WindowStencil<P> s(sorted.entries[q].u.x, sorted.entries[q].u.y, sorted.entries[q].u.z, n);
    double sum = 0;
    for (int o = 0; o < P; ++o) {
      const int plane = mesh.local_plane(s.i[o]);
      double sx = 0;
      for (int a = 0; a < P; ++a) {
        const Real* row = mesh.plane_row(plane, s.j[a]);
        double sy = 0;
        for (int c = 0; c < P; ++c) sy += s.wz[c] * row[s.k[c]];
        sx += s.wy[a] * sy;
      }
      sum += s.wx[o] * sx;
    }
    out_sorted[q][component] = scale * sum;
  }
}

// All three components at once from three meshes: one stencil per particle instead of three.
template <int P, typename Real>
void gather3(const FftMesh<Real>* const meshes[3], const SortedParticles& sorted, double scale,
             std::vector<Vec3d>& out_sorted) {
  const int n = meshes[0]->n();
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(sorted.size());
  const Real* data[3] = {meshes[0]->real_data(), meshes[1]->real_data(), meshes[2]->real_data()};
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t q = 0; q < count; ++q) {
    const WindowStencil<P> s(sorted.entries[q].u.x, sorted.entries[q].u.y, sorted.entries[q].u.z, n);
    double sum[3] = {0, 0, 0};
    for (int o = 0; o < P; ++o) {
      const int plane = meshes[0]->local_plane(s.i[o]);
      double sx[3] = {0, 0, 0};
      for (int a = 0; a < P; ++a) {
        const std::size_t row = meshes[0]->plane_row(plane, s.j[a]) - meshes[0]->real_data();
        double sy[3] = {0, 0, 0};
        for (int c = 0; c < P; ++c)
          for (int d = 0; d < 3; ++d) sy[d] += s.wz[c] * data[d][row + s.k[c]];
        for (int d = 0; d < 3; ++d) sx[d] += s.wy[a] * sy[d];
      }
      for (int d = 0; d < 3; ++d) sum[d] += s.wx[o] * sx[d];
    }
    out_sorted[q] = Vec3d{scale * sum[0], scale * sum[1], scale * sum[2]};
  }
}

}  // namespace

template <typename Real>
void interpolate_vector_from_meshes(const FftMesh<Real>& x, const FftMesh<Real>& y, const FftMesh<Real>& z,
                                    const SortedParticles& sorted, double scale, std::vector<Vec3d>& out_sorted) {
  const int n = x.n();
  if (sorted.n != n || y.n() != n || z.n() != n)
    fail("interpolate_vector_from_meshes: meshes and particles sorted for different mesh sizes");
  if (x.held_planes() != y.held_planes() || x.held_planes() != z.held_planes() || x.local_x0() != y.local_x0())
    fail("interpolate_vector_from_meshes: the three meshes hold different planes");
  out_sorted.resize(sorted.size());
  const FftMesh<Real>* meshes[3] = {&x, &y, &z};
  if (sorted.window == Window::cic) gather3<2>(meshes, sorted, scale, out_sorted);
  else gather3<3>(meshes, sorted, scale, out_sorted);
}
template void interpolate_vector_from_meshes<float>(const FftMesh<float>&, const FftMesh<float>&, const FftMesh<float>&,
                                                    const SortedParticles&, double, std::vector<Vec3d>&);
template void interpolate_vector_from_meshes<double>(const FftMesh<double>&, const FftMesh<double>&, const FftMesh<double>&,
                                                     const SortedParticles&, double, std::vector<Vec3d>&);

Window parse_window(const std::string& name) {
  if (name == "cic") return Window::cic;
  if (name == "tsc") return Window::tsc;
  fail("unknown mass-assignment window '{}': expected cic or tsc", name);
}

const char* window_name(Window window) { return window == Window::cic ? "cic" : "tsc"; }

double window_fourier(Window window, int m, int n) {
  if (m == 0) return 1.0;
  const double t = units::pi * m / n;
  return std::pow(std::sin(t) / t, window_order(window));
}

void sort_for_mesh(const std::vector<Vec3d>& pos, double box_mpc_h, int n, Window window,
                   double shift_cells, SortedParticles& out) {
  if (!(box_mpc_h > 0)) fail("mass assignment: box size {} must be positive", box_mpc_h);
  if (n < window_order(window))
    fail("mass assignment: a {}^3 mesh is too small for the {} window", n, window_name(window));
  out.n = n;
  out.window = window;
  // Rows of a plane are grouped into blocks so the sort's per-thread tables (n * y_blocks
  // entries) stay at most 2^16 long on big meshes, while particles still reach the mesh nearly
  // row by row. The blocking depends on n alone, so the sorted order is thread-independent.
  const int yb = out.y_blocks = std::max(1, std::min({n, 64, 65536 / n}));
  const int bins = n * yb;
  const std::size_t count = pos.size();
  const double cells_per_length = n / box_mpc_h;
  // The first stencil node of a coordinate u is floor(u) (CIC) or floor(u + 1/2) - 1 (TSC).
  const double offset = shift_cells + (window == Window::tsc ? 0.5 : 0.0);
  const int first = window == Window::tsc ? -1 : 0;
  const int threads = omp_get_max_threads();
  std::vector<std::size_t> counts(static_cast<std::size_t>(threads) * bins, 0);
  out.entries.resize(count);
  out.bin.resize(count);
  out.block_start.assign(bins + 1, 0);
  // A parallel stable counting sort whose result does not depend on the thread count: thread
  // t's particles of a bin follow those of thread t-1, as in a serial pass.
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const std::size_t lo = count * t / nt, hi = count * (t + 1) / nt;
    std::size_t* my_counts = &counts[static_cast<std::size_t>(t) * bins];
    for (std::size_t p = lo; p < hi; ++p) {
      const int bx = floor_to_int(wrap_coordinate(pos[p].x, box_mpc_h) * cells_per_length + offset) + first;
      const int by = floor_to_int(wrap_coordinate(pos[p].y, box_mpc_h) * cells_per_length + offset) + first;
      const std::uint32_t b = static_cast<std::uint32_t>(wrap_mesh_index(bx, n) * yb + wrap_mesh_index(by, n) * yb / n);
      out.bin[p] = b;
      ++my_counts[b];
    }
#pragma omp barrier
#pragma omp single
    {
      std::size_t running = 0;
      for (int b = 0; b < bins; ++b) {
        out.block_start[b] = running;
        for (int s = 0; s < nt; ++s) {
          std::size_t& c = counts[static_cast<std::size_t>(s) * bins + b];
          const std::size_t here = c;
          c = running;
          running += here;
        }
      }
      out.block_start[bins] = running;
    }
    for (std::size_t p = lo; p < hi; ++p) {
      const std::size_t q = my_counts[out.bin[p]]++;
      out.entries[q] = {cell_coordinates(pos[p], box_mpc_h, cells_per_length, shift_cells), p};
    }
  }
}

template <typename Real>
void assign_fixed_point(const FftMesh<Real>& mesh, const SortedParticles& sorted, double scale,
                        std::uint32_t* lo, std::uint32_t* hi) {
  if (sorted.n != mesh.n())
    fail("assign_fixed_point: particles sorted for a {}^3 mesh, not {}^3", sorted.n, mesh.n());
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(mesh.held_planes()) * mesh.n() * mesh.nz_padded();
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t e = 0; e < count; ++e) lo[e] = hi[e] = 0;
  if (sorted.window == Window::cic) scatter<2>(mesh, sorted, scale, lo, hi);
  else scatter<3>(mesh, sorted, scale, lo, hi);
}

template <typename Real>
void fixed_point_to_mesh(const std::uint32_t* lo, const std::uint32_t* hi, double mean, double factor,
                         FftMesh<Real>& mesh) {
  const int n = mesh.n(), padded = mesh.nz_padded();
  const std::ptrdiff_t rows = static_cast<std::ptrdiff_t>(mesh.local_nx()) * n;
  Real* out = mesh.real_data();
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t r = 0; r < rows; ++r)
    for (int k = 0; k < padded; ++k) {
      const std::size_t e = static_cast<std::size_t>(r) * padded + k;
      out[e] = k < n ? static_cast<Real>(pm_fixed_to_density(static_cast<std::uint64_t>(hi[e]) << 32 | lo[e], mean, factor))
                     : Real(0);
    }
  std::fill(out + static_cast<std::size_t>(rows) * padded,
            out + static_cast<std::size_t>(mesh.held_planes()) * n * padded, Real(0));
}

template <typename Real>
void interpolate_from_mesh(const FftMesh<Real>& mesh, const SortedParticles& sorted, double scale,
                           std::vector<Vec3d>& out_sorted, int component) {
  const int n = mesh.n();
  if (sorted.n != n) fail("interpolate_from_mesh: particles sorted for a {}^3 mesh, not {}^3", sorted.n, n);
  if (out_sorted.size() != sorted.size())
    fail("interpolate_from_mesh: output holds {} particles, not {}", out_sorted.size(), sorted.size());
  if (sorted.window == Window::cic) gather<2>(mesh, sorted, scale, out_sorted, component);
  else gather<3>(mesh, sorted, scale, out_sorted, component);
}

void unsort(const SortedParticles& sorted, const std::vector<Vec3d>& in_sorted, std::vector<Vec3d>& out) {
  if (in_sorted.size() != sorted.size()) fail("unsort: {} values for {} particles", in_sorted.size(), sorted.size());
  out.resize(sorted.size());
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(sorted.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t q = 0; q < count; ++q) out[sorted.entries[q].index] = in_sorted[q];
}

void unsort_add(const SortedParticles& sorted, const std::vector<Vec3d>& in_sorted, std::vector<Vec3d>& out) {
  if (in_sorted.size() != sorted.size() || out.size() != sorted.size())
    fail("unsort_add: {} values and {} outputs for {} particles", in_sorted.size(), out.size(), sorted.size());
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(sorted.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t q = 0; q < count; ++q) out[sorted.entries[q].index] += in_sorted[q];
}

template void assign_fixed_point<float>(const FftMesh<float>&, const SortedParticles&, double, std::uint32_t*,
                                        std::uint32_t*);
template void assign_fixed_point<double>(const FftMesh<double>&, const SortedParticles&, double, std::uint32_t*,
                                         std::uint32_t*);
template void fixed_point_to_mesh<float>(const std::uint32_t*, const std::uint32_t*, double, double, FftMesh<float>&);
template void fixed_point_to_mesh<double>(const std::uint32_t*, const std::uint32_t*, double, double,
                                          FftMesh<double>&);
template void interpolate_from_mesh<float>(const FftMesh<float>&, const SortedParticles&, double,
                                           std::vector<Vec3d>&, int);
template void interpolate_from_mesh<double>(const FftMesh<double>&, const SortedParticles&, double,
                                            std::vector<Vec3d>&, int);

}  // namespace orbis
