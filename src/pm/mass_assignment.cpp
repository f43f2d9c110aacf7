#include "pm/mass_assignment.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "core/error.hpp"
#include "core/units.hpp"

namespace orbis {
namespace {

inline int wrap_index(int i, int n) {
  i %= n;
  return i < 0 ? i + n : i;
}

// Coordinates in cell units, u in [0, n) before the shift.
inline Vec3d cell_coordinates(const Vec3d& x, double box, double cells_per_length, double shift) {
  Vec3d u;
  for (int d = 0; d < 3; ++d) u[d] = periodic_wrap_position(x[d], box) * cells_per_length + shift;
  return u;
}

// Particles in cell units, stably sorted by the (wrapped) x index of their first stencil node:
// bin b holds sorted[start[b] .. start[b+1]). A parallel counting sort whose result does not
// depend on the thread count (each thread's chunk keeps its place within every bin).
struct Binned {
  std::vector<Vec3d> sorted;
  std::vector<std::size_t> start;
};

Binned bin_by_plane(const std::vector<Vec3d>& pos, double box, int n, Window window, double shift) {
  const std::size_t count = pos.size();
  const double cells_per_length = n / box;
  std::vector<int> bin(count);
  const int threads = omp_get_max_threads();
  std::vector<std::size_t> counts(static_cast<std::size_t>(threads) * n, 0);
  Binned out;
  out.sorted.resize(count);
  out.start.assign(n + 1, 0);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const std::size_t lo = count * t / nt, hi = count * (t + 1) / nt;
    std::size_t* my_counts = &counts[static_cast<std::size_t>(t) * n];
    for (std::size_t p = lo; p < hi; ++p) {
      const double u = periodic_wrap_position(pos[p].x, box) * cells_per_length + shift;
      int base;
      double w[3];
      window_weights(window, u, base, w);
      bin[p] = wrap_index(base, n);
      ++my_counts[bin[p]];
    }
#pragma omp barrier
#pragma omp single
    {
      // Offsets ordered by (bin, thread): thread t's particles of bin b follow those of t-1.
      std::size_t running = 0;
      for (int b = 0; b < n; ++b) {
        out.start[b] = running;
        for (int s = 0; s < nt; ++s) {
          const std::size_t c = counts[static_cast<std::size_t>(s) * n + b];
          counts[static_cast<std::size_t>(s) * n + b] = running;
          running += c;
        }
      }
      out.start[n] = running;
    }
    for (std::size_t p = lo; p < hi; ++p)
      out.sorted[my_counts[bin[p]]++] = cell_coordinates(pos[p], box, cells_per_length, shift);
  }
  return out;
}

}  // namespace

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

template <typename Real>
void assign_to_mesh(FftMesh<Real>& mesh, const std::vector<Vec3d>& pos, double box_mpc_h,
                    Window window, double value, double shift_cells) {
  if (!(box_mpc_h > 0)) fail("mass assignment: box size {} must be positive", box_mpc_h);
  const int n = mesh.n(), order = window_order(window);
  if (n < order) fail("mass assignment: a {}^3 mesh is too small for the {} window", n, window_name(window));
  const Binned binned = bin_by_plane(pos, box_mpc_h, n, window, shift_cells);
  const int x0 = mesh.local_x0(), nx = mesh.local_nx(), nzp = mesh.nz_padded();

  // One plane per task; which thread takes it does not change its value (see the header).
#pragma omp parallel for schedule(dynamic, 1)
  for (int i = x0; i < x0 + nx; ++i) {
    Real* plane = &mesh.real(i, 0, 0);
    std::fill(plane, plane + static_cast<std::size_t>(n) * nzp, Real(0));
    for (int o = order - 1; o >= 0; --o) {   // bins in increasing x order: i-order+1 ... i
      const int b = wrap_index(i - o, n);
      for (std::size_t q = binned.start[b]; q < binned.start[b + 1]; ++q) {
        const Vec3d& u = binned.sorted[q];
        int bx, by, bz;
        double wx[3], wy[3], wz[3];
        window_weights(window, u.x, bx, wx);
        window_weights(window, u.y, by, wy);
        window_weights(window, u.z, bz, wz);
        const double vx = value * wx[o];
        int jj[3], kk[3];
        for (int a = 0; a < order; ++a) {
          jj[a] = wrap_index(by + a, n);
          kk[a] = wrap_index(bz + a, n);
        }
        for (int a = 0; a < order; ++a) {
          Real* row = plane + static_cast<std::size_t>(jj[a]) * nzp;
          const double vxy = vx * wy[a];
          for (int c = 0; c < order; ++c) row[kk[c]] += static_cast<Real>(vxy * wz[c]);
        }
      }
    }
  }
}

template <typename Real>
void interpolate_from_mesh(const FftMesh<Real>& mesh, const std::vector<Vec3d>& pos,
                           double box_mpc_h, Window window, double scale,
                           std::vector<Vec3d>& out, int component) {
  const int n = mesh.n(), order = window_order(window);
  if (mesh.local_nx() != n) fail("interpolate_from_mesh needs the whole mesh (serial slab)");
  if (out.size() != pos.size()) out.resize(pos.size());
  const double cells_per_length = n / box_mpc_h;
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(pos.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t p = 0; p < count; ++p) {
    const Vec3d u = cell_coordinates(pos[p], box_mpc_h, cells_per_length, 0.0);
    int b[3];
    double w[3][3];
    for (int d = 0; d < 3; ++d) window_weights(window, u[d], b[d], w[d]);
    int jj[3], kk[3];
    for (int a = 0; a < order; ++a) {
      jj[a] = wrap_index(b[1] + a, n);
      kk[a] = wrap_index(b[2] + a, n);
    }
    double sum = 0;
    for (int o = 0; o < order; ++o) {
      const int i = wrap_index(b[0] + o, n);
      double sx = 0;
      for (int a = 0; a < order; ++a) {
        const Real* row = mesh.real_data() + mesh.real_index(i, jj[a], 0);
        double sy = 0;
        for (int c = 0; c < order; ++c) sy += w[2][c] * row[kk[c]];
        sx += w[1][a] * sy;
      }
      sum += w[0][o] * sx;
    }
    out[p][component] = scale * sum;
  }
}

template void assign_to_mesh<float>(FftMesh<float>&, const std::vector<Vec3d>&, double, Window,
                                    double, double);
template void assign_to_mesh<double>(FftMesh<double>&, const std::vector<Vec3d>&, double, Window,
                                     double, double);
template void interpolate_from_mesh<float>(const FftMesh<float>&, const std::vector<Vec3d>&, double,
                                           Window, double, std::vector<Vec3d>&, int);
template void interpolate_from_mesh<double>(const FftMesh<double>&, const std::vector<Vec3d>&,
                                            double, Window, double, std::vector<Vec3d>&, int);

}  // namespace orbis
