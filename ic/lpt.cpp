#include "ic/lpt.hpp"

#include <cmath>

#include "core/error.hpp"
#include "ic/modes.hpp"

namespace orbis::ic {
namespace {

using Complex = std::complex<double>;

// mesh's modes <- factor(mode) * source[mode.index]; `source` may be the mesh itself.
template <typename Factor>
void set_modes(FftMesh<double>& mesh, const Complex* source, Factor&& factor) {
  Complex* out = mesh.complex_data();
  for_each_mode(mesh, [&](const Mode& m) { out[m.index] = m.dropped ? Complex(0.0) : factor(m) * source[m.index]; });
}

// Calls f(particle index, mesh value) for every grid cell of the local slab; the particle
// index is the local one, ID - 1 - x0 N^2 = ((ix - x0) N + iy) N + iz.
template <typename F>
void for_each_cell(FftMesh<double>& mesh, F&& f) {
  const int n = mesh.n(), x0 = mesh.local_x0(), x1 = mesh.local_x0() + mesh.local_nx();
#pragma omp parallel for schedule(static)
  for (int ix = x0; ix < x1; ++ix)
    for (int iy = 0; iy < n; ++iy) {
      double* row = &mesh.real(ix, iy, 0);
      const std::size_t p0 = (static_cast<std::size_t>(ix - x0) * n + iy) * n;
      for (int iz = 0; iz < n; ++iz) f(p0 + iz, row[iz]);
    }
}

// The 2LPT source S = sum_{i<j} (phi,ii phi,jj - phi,ij^2) on the grid, left in mom[].x.
// pos[] holds phi,xx, phi,yy, phi,zz meanwhile.
void second_order_source(const std::vector<Complex>& delta_k, FftMesh<double>& mesh, Particles& particles) {
  for (int d = 0; d < 3; ++d) {
    set_modes(mesh, delta_k.data(), [d](const Mode& m) {
      const double kd = d == 0 ? m.kx : d == 1 ? m.ky : m.kz;
      return kd * kd / static_cast<double>(m.k2());
    });
    mesh.backward();
    for_each_cell(mesh, [&](std::size_t p, double v) { particles.pos[p][d] = v; });
  }
  const auto count = static_cast<std::ptrdiff_t>(particles.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t p = 0; p < count; ++p) {
    const Vec3d& h = particles.pos[p];
    particles.mom[p].x = h.x * h.y + h.x * h.z + h.y * h.z;
  }
  for (int pair = 0; pair < 3; ++pair) {
    const int a = pair == 2 ? 1 : 0, b = pair == 0 ? 1 : 2;   // xy, xz, yz
    set_modes(mesh, delta_k.data(), [a, b](const Mode& m) {
      const double k[3] = {double(m.kx), double(m.ky), double(m.kz)};
      return k[a] * k[b] / static_cast<double>(m.k2());
    });
    mesh.backward();
    for_each_cell(mesh, [&](std::size_t p, double v) { particles.mom[p].x -= v * v; });
  }
}

}  // namespace

void make_grid_particles(int n, double box_mpc_h, Particles& particles, int x0, int nx) {
  if (nx < 0) nx = n - x0;
  particles.resize(static_cast<std::size_t>(nx) * n * n);
  const double spacing = box_mpc_h / n;
#pragma omp parallel for schedule(static)
  for (int ix = x0; ix < x0 + nx; ++ix)
    for (int iy = 0; iy < n; ++iy)
      for (int iz = 0; iz < n; ++iz) {
        const std::size_t p = (static_cast<std::size_t>(ix - x0) * n + iy) * n + iz;
        particles.pos[p] = Vec3d{ix * spacing, iy * spacing, iz * spacing};
        particles.mom[p] = Vec3d{};
        particles.id[p] = (static_cast<std::uint64_t>(ix) * n + iy) * n + iz + 1;
      }
}

void displace_particles(const std::vector<Complex>& delta_k, FftMesh<double>& mesh, double box_mpc_h, int order,
                        const LptCoefficients& c, Particles& particles) {
  const int n = mesh.n();
  const std::size_t total = static_cast<std::size_t>(mesh.local_nx()) * n * n;
  if (order != 1 && order != 2) fail("LPT order {} is not supported (1: Zel'dovich, 2: 2LPT)", order);
  if (particles.size() != total ||
      delta_k.size() != static_cast<std::size_t>(mesh.local_nx()) * n * mesh.nz_complex())
    fail("displace_particles: {} particles and {} modes for {} planes of an {}^3 grid", particles.size(),
         delta_k.size(), mesh.local_nx(), n);
  const double k_f = 2.0 * M_PI / box_mpc_h;
  const double spacing = box_mpc_h / n;

  // Second order first: psi2 (from the source S) goes into pos[], which the first-order pass
  // then turns into final positions and momenta one component at a time. S is transformed
  // once and its modes kept for the three components.
  if (order == 2) {
    second_order_source(delta_k, mesh, particles);
    const double inv_n3 = 1.0 / (static_cast<double>(n) * n * n);
    for_each_cell(mesh, [&](std::size_t p, double& v) { v = particles.mom[p].x; });
    mesh.forward();
    const std::vector<Complex> source_k(mesh.complex_data(), mesh.complex_data() + delta_k.size());
    for (int d = 0; d < 3; ++d) {
      set_modes(mesh, source_k.data(), [d, k_f, inv_n3](const Mode& m) {
        const double kd = d == 0 ? m.kx : d == 1 ? m.ky : m.kz;
        return Complex(0.0, -kd / (k_f * static_cast<double>(m.k2())) * inv_n3);
      });
      mesh.backward();
      for_each_cell(mesh, [&](std::size_t p, double v) { particles.pos[p][d] = v; });
    }
  }

  for (int d = 0; d < 3; ++d) {
    set_modes(mesh, delta_k.data(), [d, k_f](const Mode& m) {
      const double kd = d == 0 ? m.kx : d == 1 ? m.ky : m.kz;
      return Complex(0.0, kd / (k_f * static_cast<double>(m.k2())));
    });
    mesh.backward();
    const int x0 = mesh.local_x0(), x1 = x0 + mesh.local_nx();
#pragma omp parallel for schedule(static)
    for (int ix = x0; ix < x1; ++ix)
      for (int iy = 0; iy < n; ++iy) {
        const double* row = &mesh.real(ix, iy, 0);
        const int q_index[3] = {ix, iy, 0};
        for (int iz = 0; iz < n; ++iz) {
          const std::size_t p = (static_cast<std::size_t>(ix - x0) * n + iy) * n + iz;
          const double psi1 = row[iz];
          const double psi2 = order == 2 ? particles.pos[p][d] : 0.0;
          const double q = (d == 2 ? iz : q_index[d]) * spacing;
          particles.mom[p][d] = c.vel1 * psi1 + c.vel2 * psi2;
          particles.pos[p][d] = periodic_wrap_position(q + c.d1 * psi1 + c.d2 * psi2, box_mpc_h);
        }
      }
  }
}

}  // namespace orbis::ic
