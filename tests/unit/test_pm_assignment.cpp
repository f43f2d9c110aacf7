// Mass assignment and interpolation (pm/mass_assignment.hpp) against naive references, and
// the bitwise reproducibility of the PM solver for any thread count and particle order.
#include <doctest/doctest.h>

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/exact_sum.hpp"
#include "core/params.hpp"
#include "pm/fixed_point_mesh.hpp"
#include "pm/interlaced_influence.hpp"
#include "pm/mass_assignment.hpp"
#include "pm/pm_solver.hpp"

using orbis::FftMesh;
using orbis::Vec3d;
using orbis::Window;

namespace {

constexpr double kBox = 50.0;

std::vector<Vec3d> random_positions(std::size_t count, unsigned seed, double lo = 0, double hi = kBox) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<Vec3d> pos(count);
  for (auto& p : pos) p = {u(rng), u(rng), u(rng)};
  return pos;
}

// The textbook 1D kernels, written independently of window_weights(): CIC W(s) = 1 - |s| for
// |s| < 1; TSC W(s) = 3/4 - s^2 for |s| < 1/2, (3/2 - |s|)^2 / 2 for 1/2 <= |s| < 3/2.
double kernel(Window w, double s) {
  s = std::abs(s);
  if (w == Window::cic) return s < 1 ? 1 - s : 0;
  if (s < 0.5) return 0.75 - s * s;
  return s < 1.5 ? 0.5 * (1.5 - s) * (1.5 - s) : 0;
}

// Scatter every particle to every node within two cells, minimal-image distances.
std::vector<double> naive_assign(const std::vector<Vec3d>& pos, int n, Window w) {
  std::vector<double> mesh(static_cast<std::size_t>(n) * n * n, 0.0);
  const double cell = kBox / n;
  for (const auto& p : pos) {
    const int c[3] = {static_cast<int>(p.x / cell), static_cast<int>(p.y / cell), static_cast<int>(p.z / cell)};
    for (int a = -2; a <= 2; ++a)
      for (int b = -2; b <= 2; ++b)
        for (int d = -2; d <= 2; ++d) {
          const int i = (c[0] + a + n) % n, j = (c[1] + b + n) % n, k = (c[2] + d + n) % n;
          const double wx = kernel(w, orbis::periodic_wrap_delta(p.x - i * cell, kBox) / cell);
          const double wy = kernel(w, orbis::periodic_wrap_delta(p.y - j * cell, kBox) / cell);
          const double wz = kernel(w, orbis::periodic_wrap_delta(p.z - k * cell, kBox) / cell);
          mesh[(static_cast<std::size_t>(i) * n + j) * n + k] += wx * wy * wz;
        }
  }
  return mesh;
}

// The fixed-point assignment of weight-1 particles (pm/mass_assignment.hpp) in Reals, the mean
// kept: the window-weighted particle counts.
template <typename Real>
void assign_counts(FftMesh<Real>& mesh, const std::vector<Vec3d>& pos, Window w, double shift_cells = 0.0) {
  const auto sorted = orbis::sort_for_mesh(pos, kBox, mesh.n(), w, shift_cells);
  const double scale = orbis::fixed_point_scale(pos.size());
  std::vector<std::uint32_t> lo(orbis::fixed_point_elements(mesh)), hi(lo.size());
  orbis::assign_fixed_point(mesh, sorted, scale, lo.data(), hi.data());
  orbis::fixed_point_to_mesh(lo.data(), hi.data(), 0.0, 1.0 / scale, mesh);
}

}  // namespace

TEST_CASE("assignment equals a naive scatter of the textbook kernels and conserves mass") {
  const auto pos = random_positions(700, 1);
  // 12: TSC slabs of 2 planes; 14: n/2 odd, so TSC needs slabs of 7 (two slabs).
  for (int n : {12, 14})
  for (Window w : {Window::cic, Window::tsc}) {
    FftMesh<double> mesh(n);
    assign_counts(mesh, pos, w);
    const auto ref = naive_assign(pos, n, w);
    double total = 0, worst = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        for (int k = 0; k < n; ++k) {
          total += mesh.real(i, j, k);
          worst = std::max(worst, std::abs(mesh.real(i, j, k) - ref[(static_cast<std::size_t>(i) * n + j) * n + k]));
        }
    CHECK(worst < 1e-12);
    CHECK(total == doctest::Approx(700.0).epsilon(1e-13));
  }
}

TEST_CASE("interpolation reproduces linear fields and is the transpose of assignment") {
  const int n = 16;
  for (Window w : {Window::cic, Window::tsc}) {
    // Linear field (CIC and TSC are exact for it), particles away from the periodic seam.
    FftMesh<double> mesh(n);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        for (int k = 0; k < n; ++k) mesh.real(i, j, k) = 1 + 0.5 * i + 0.25 * j - 0.125 * k;
    const double cell = kBox / n;
    const auto pos = random_positions(200, 2, 2 * cell, kBox - 3 * cell);
    std::vector<Vec3d> out;
    orbis::interpolate_from_mesh(mesh, pos, kBox, w, 1.0, out, 1);
    for (std::size_t p = 0; p < pos.size(); ++p)
      CHECK(out[p].y == doctest::Approx(1 + (0.5 * pos[p].x + 0.25 * pos[p].y - 0.125 * pos[p].z) / cell).epsilon(1e-12));

    // <assign(x_p), f> = interpolate(f)(x_p) for a random field f.
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<double> u(-1, 1);
    FftMesh<double> field(n), single(n);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        for (int k = 0; k < n; ++k) field.real(i, j, k) = u(rng);
    const auto probes = random_positions(20, 4);
    orbis::interpolate_from_mesh(field, probes, kBox, w, 1.0, out, 0);
    for (std::size_t p = 0; p < probes.size(); ++p) {
      assign_counts(single, std::vector<Vec3d>{probes[p]}, w);
      double dot = 0;
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
          for (int k = 0; k < n; ++k) dot += single.real(i, j, k) * field.real(i, j, k);
      CHECK(out[p].x == doctest::Approx(dot).epsilon(1e-12));
    }
  }
}

TEST_CASE("the vector interpolation equals three scalar ones") {
  const int n = 16;
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(-1, 1);
  FftMesh<double> mx(n), my(n), mz(n);
  for (auto* m : {&mx, &my, &mz})
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        for (int k = 0; k < n; ++k) m->real(i, j, k) = u(rng);
  const auto pos = random_positions(300, 10);
  for (Window w : {Window::cic, Window::tsc}) {
    const auto sorted = orbis::sort_for_mesh(pos, kBox, n, w);
    std::vector<Vec3d> scalar(pos.size()), vector;
    orbis::interpolate_from_mesh(mx, sorted, 2.0, scalar, 0);
    orbis::interpolate_from_mesh(my, sorted, 2.0, scalar, 1);
    orbis::interpolate_from_mesh(mz, sorted, 2.0, scalar, 2);
    orbis::interpolate_vector_from_meshes(mx, my, mz, sorted, 2.0, vector);
    std::vector<Vec3d> back;
    orbis::unsort(sorted, vector, back);
    for (std::size_t q = 0; q < pos.size(); ++q)
      for (int d = 0; d < 3; ++d) CHECK(vector[q][d] == scalar[q][d]);
    // unsort puts particle sorted.entries[q].index back in its place
    for (std::size_t q = 0; q < pos.size(); ++q) CHECK(back[sorted.entries[q].index].x == vector[q].x);
  }
}

TEST_CASE("mesh and PM accelerations are bitwise identical for 1, 2 and 3 threads") {
  const int saved = omp_get_max_threads();
  // Clustered: half the particles in a small clump, so some planes hold most of them.
  auto pos = random_positions(20000, 5);
  const auto clump = random_positions(20000, 6, 20.0, 23.0);
  pos.insert(pos.end(), clump.begin(), clump.end());
  for (Window w : {Window::cic, Window::tsc}) {
    orbis::PmSettings s;
    s.box_mpc_h = kBox;
    s.grid_side = 32;
    s.window = w;
    orbis::PmSolver pm(s);   // FFTW plans fixed here; only our loops change thread count
    std::vector<std::uint32_t> first_mesh;
    std::vector<Vec3d> first_acc;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      // The fixed-point sums, low halves then high halves.
      const FftMesh<float> mesh(32);
      const auto sorted = orbis::sort_for_mesh(pos, kBox, 32, w, 0.5);
      const std::size_t elements = orbis::fixed_point_elements(mesh);
      std::vector<std::uint32_t> values(2 * elements);
      orbis::assign_fixed_point(mesh, sorted, orbis::fixed_point_scale(pos.size()), values.data(),
                                values.data() + elements);
      std::vector<Vec3d> acc;
      pm.accelerations(pos, 1.0, acc);
      if (threads == 1) {
        first_mesh = values;
        first_acc = acc;
      } else {
        CHECK(values == first_mesh);
        CHECK(std::memcmp(acc.data(), first_acc.data(), acc.size() * sizeof(Vec3d)) == 0);
      }
    }
  }
  omp_set_num_threads(saved);
}

TEST_CASE("the PM's accelerations are bitwise the same for 1 and 2 threads and any particle order") {
  const int saved = omp_get_max_threads();
  auto pos = random_positions(12000, 15);
  const auto clump = random_positions(12000, 16, 20.0, 23.0);
  pos.insert(pos.end(), clump.begin(), clump.end());
  // A permutation that moves every particle far from its place (i -> 7919 i mod N).
  std::vector<std::size_t> perm(pos.size());
  for (std::size_t i = 0; i < pos.size(); ++i) perm[i] = (7919 * i) % pos.size();
  std::vector<Vec3d> permuted(pos.size());
  for (std::size_t i = 0; i < pos.size(); ++i) permuted[i] = pos[perm[i]];
  for (Window w : {Window::cic, Window::tsc})
    for (bool pm_only : {false, true})
      for (bool double_mesh : {false, true}) {
        INFO(orbis::window_name(w) << (pm_only ? " pm-only " : " long range ") << (double_mesh ? "double" : "float"));
        orbis::PmSettings s;
        s.box_mpc_h = kBox;
        s.grid_side = 24;
        s.window = w;
        s.r_s_mpc_h = pm_only ? 0.0 : 1.25 * kBox / s.grid_side;
        s.double_mesh = double_mesh;
        std::vector<Vec3d> one, two, shuffled;
        omp_set_num_threads(1);
        orbis::PmSolver(s).accelerations(pos, 0.7, one);
        omp_set_num_threads(2);
        orbis::PmSolver pm(s);   // transforms planned with two threads
        pm.accelerations(pos, 0.7, two);
        pm.accelerations(permuted, 0.7, shuffled);
        CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(Vec3d)) == 0);
        std::size_t differ = 0;
        for (std::size_t i = 0; i < pos.size(); ++i)
          if (std::memcmp(&shuffled[i], &one[perm[i]], sizeof(Vec3d)) != 0) ++differ;
        CHECK(differ == 0);
        if (!pm_only) {   // the mesh energy too
          omp_set_num_threads(1);
          const double e1 = orbis::PmSolver(s).potential_energy(pos, 0.7);
          omp_set_num_threads(2);
          CHECK(pm.potential_energy(permuted, 0.7) == e1);
        }
      }
  omp_set_num_threads(saved);
}

TEST_CASE("fixed-point weights round to nearest, ties to even, as the GPU's conversion") {
  const double scale = orbis::fixed_point_scale(1000);   // 2^52: 1000 particles need 10 bits
  CHECK(scale == std::ldexp(1.0, 52));
  CHECK(orbis::fixed_point_scale(1024) == std::ldexp(1.0, 52));
  CHECK(orbis::fixed_point_scale(1025) == std::ldexp(1.0, 51));
  // Ties: 0.5, 1.5, 2.5 -> 0, 2, 2 (w * scale with scale = 1).
  CHECK(orbis::fixed_point_round(0.5, 1.0) == 0);
  CHECK(orbis::fixed_point_round(1.5, 1.0) == 2);
  CHECK(orbis::fixed_point_round(2.5, 1.0) == 2);
  CHECK(orbis::fixed_point_round(2.5000000001, 1.0) == 3);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (double sc : {1.0, 1024.0, std::ldexp(1.0, 40), std::ldexp(1.0, 52), std::ldexp(1.0, 58), std::ldexp(1.0, 62)})
    for (int t = 0; t < 2000; ++t) {
      const double w = u(rng);
      const std::uint64_t want = static_cast<std::uint64_t>(std::nearbyint(w * sc));
      REQUIRE(orbis::fixed_point_round(w, sc) == want);
    }
  CHECK(orbis::fixed_point_round(1.0, std::ldexp(1.0, 62)) == std::uint64_t{1} << 62);
  CHECK(orbis::pm_fixed_to_density(10, 4.0, 0.5) == 3.0);
}

TEST_CASE("the principal wavevector of each coset is the mean of its shortest images (brute force)") {
  // Images m + n a with a_x + a_y + a_z even (odd), |a_i| <= 2: the shortest, their mean on ties.
  for (int n : {8, 10})
    for (orbis::Coset coset : {orbis::Coset::even, orbis::Coset::odd}) {
      int checked = 0;
      for (int mx = -n / 2 + 1; mx <= n / 2; ++mx)
        for (int my = -n / 2 + 1; my <= n / 2; ++my)
          for (int mz = -n / 2 + 1; mz <= n / 2; ++mz) {
            long best = -1;
            double mean[3] = {0, 0, 0};
            int ties = 0;
            for (int ax = -2; ax <= 2; ++ax)
              for (int ay = -2; ay <= 2; ++ay)
                for (int az = -2; az <= 2; ++az) {
                  if (((ax + ay + az) % 2 != 0) != (coset == orbis::Coset::odd)) continue;
                  const long v[3] = {mx + n * ax, my + n * ay, mz + n * az};
                  const long len = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
                  if (best >= 0 && len > best) continue;
                  if (len < best || best < 0) ties = 0, mean[0] = mean[1] = mean[2] = 0, best = len;
                  ++ties;
                  for (int d = 0; d < 3; ++d) mean[d] += v[d];
                }
            const int m[3] = {mx, my, mz};
            double kappa[3];
            orbis::principal_wavevector(m, n, coset, kappa);
            for (int d = 0; d < 3; ++d) CHECK(kappa[d] == doctest::Approx(mean[d] / ties));
            ++checked;
          }
      CHECK(checked == n * n * n);
    }
}

TEST_CASE("PmSettings::from_params derives the mesh and the split scale") {
  const std::string base = "[box]\nsize_mpc_h = 64.0\nparticles_per_side = 32\n";
  {
    const auto p = orbis::Params::parse(base + "[gravity]\nsolver = \"pm\"\n", "pm");
    const auto s = orbis::PmSettings::from_params(p);
    CHECK(s.grid_side == 64);   // 2 x particles per side
    CHECK(s.r_s_mpc_h == 0);    // full force
    CHECK(s.box_mpc_h == 64.0);
  }
  {
    const auto p = orbis::Params::parse(base + "[gravity]\nsolver = \"treepm\"\nmass_assignment = \"cic\"\n", "treepm");
    const auto s = orbis::PmSettings::from_params(p);
    CHECK(s.grid_side == 64);   // 2 x particles per side for treepm too
    CHECK(s.window == Window::cic);
    CHECK(s.r_s_mpc_h == doctest::Approx(2.4 * 64.0 / 64));
  }
  {
    const auto p = orbis::Params::parse(base + "[gravity]\npm_grid_side = 33\n", "odd");
    CHECK_THROWS_AS(orbis::PmSettings::from_params(p), orbis::Error);
  }
}
