#include "pm/interlaced_influence.hpp"

#include <cmath>
#include <cstdlib>

#include "core/units.hpp"
#include "pm/mass_assignment.hpp"

namespace orbis {

double reference_smoothing(double k2, int n) {
  const double cutoff = kReferenceCutoff * n / (2 * units::pi);   // K in index units
  const double q = k2 / (cutoff * cutoff);
  return q < 1 ? std::pow(1 - q, kReferencePower) : 0.0;
}

std::vector<double> interlaced_optimal_influence(Window window, int n) {
  static_assert(kReferenceCutoff < 3 * units::pi, "S must vanish beyond the images a_i in {-1, 0, 1}");
  const int h = n / 2 + 1, p = window_order(window);
  struct Image { double j, w2; int parity; };   // alias wavenumber (index units), W_1d^2, a mod 2
  std::vector<std::vector<Image>> axis(h);
  // Per-axis sums of W^2 over all images and with the sign (-1)^a; the coset sum is
  // (prod_d all_d + s prod_d alt_d) / 2 with s = +1 (even) or -1 (odd). With x = pi m / n:
  //   sum_a sinc^4(x + pi a) = 1 - 2/3 sin^2 x,  sum_a (-1)^a sinc^4 = cos x (cos^2 x + 5) / 6  (CIC)
  //   sum_a sinc^6 = 1 - sin^2 x + 2/15 sin^4 x,  sum_a (-1)^a sinc^6 = cos x (cos^4 x + 58 cos^2 x + 61) / 120  (TSC)
  // (the alternating sums are sin^q x times the partial-fraction series of d^(q-1) csc x).
  std::vector<double> all(h), alt(h);
  for (int m = 0; m < h; ++m) {
    for (int a = -1; a <= 1; ++a) {
      const int j = m + a * n;
      const double t = units::pi * j / n;
      const double w = j == 0 ? 1.0 : std::pow(std::sin(t) / t, p);
      axis[m].push_back({static_cast<double>(j), w * w, ((a % 2) + 2) % 2});
    }
    const double x = units::pi * m / n, s2 = std::pow(std::sin(x), 2), c = std::cos(x), c2 = c * c;
    if (window == Window::cic) {
      all[m] = 1 - 2.0 / 3.0 * s2;
      alt[m] = c * (c2 + 5) / 6;
    } else {
      all[m] = 1 - s2 + 2.0 / 15.0 * s2 * s2;
      alt[m] = c * (c2 * c2 + 58 * c2 + 61) / 120;
    }
  }
  std::vector<double> table(2 * static_cast<std::size_t>(h) * h * h, 0.0);
  auto at = [&](int x, int y, int z) { return 2 * ((static_cast<std::size_t>(x) * h + y) * h + z); };
  // G_c has the symmetry of the cube: computed for mx >= my >= mz, copied to the permutations.
#pragma omp parallel for schedule(dynamic)
  for (int mx = 0; mx < h; ++mx)
    for (int my = 0; my <= mx; ++my)
      for (int mz = 0; mz <= my; ++mz) {
        const int m[3] = {mx, my, mz};
        double value[2] = {0, 0};
        for (int c = 0; c < 2; ++c) {
          double kappa[3];
          principal_wavevector(m, n, static_cast<Coset>(c), kappa);
          const double kappa2 = kappa[0] * kappa[0] + kappa[1] * kappa[1] + kappa[2] * kappa[2];
          if (kappa2 == 0) continue;
          double num = 0;
          for (const Image& ix : axis[mx])
            for (const Image& iy : axis[my])
              for (const Image& iz : axis[mz]) {
                if ((ix.parity + iy.parity + iz.parity) % 2 != c) continue;
                const double w2 = ix.w2 * iy.w2 * iz.w2;
                if (w2 == 0) continue;
                const double jj = ix.j * ix.j + iy.j * iy.j + iz.j * iz.j;
                num += w2 * (kappa[0] * ix.j + kappa[1] * iy.j + kappa[2] * iz.j) / jj * reference_smoothing(jj, n);
              }
          const double sign = c == 0 ? 1.0 : -1.0;
          const double den = 0.5 * (all[mx] * all[my] * all[mz] + sign * alt[mx] * alt[my] * alt[mz]);
          value[c] = num / (kappa2 * den * den);
        }
        const int perm[6][3] = {{mx, my, mz}, {mx, mz, my}, {my, mx, mz}, {my, mz, mx}, {mz, mx, my}, {mz, my, mx}};
        for (const auto& q : perm) {
          table[at(q[0], q[1], q[2])] = value[0];
          table[at(q[0], q[1], q[2]) + 1] = value[1];
        }
      }
  return table;
}

}  // namespace orbis
