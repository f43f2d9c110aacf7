#include "ic/gaussian_field.hpp"

#include <cmath>

#include "core/error.hpp"
#include "ic/modes.hpp"
#include "ic/white_noise.hpp"

namespace orbis::ic {

std::vector<double> mode_amplitudes(int n, double box_mpc_h, const PowerFunction& power) {
  const long max_m2 = 3L * (n / 2) * (n / 2);
  const double k_f = 2.0 * M_PI / box_mpc_h, volume = box_mpc_h * box_mpc_h * box_mpc_h;
  std::vector<double> amplitude(max_m2 + 1, 0.0);
  bool bad = false;
#pragma omp parallel for schedule(dynamic, 256) reduction(|| : bad)
  for (long m2 = 1; m2 <= max_m2; ++m2) {
    const double p = power(k_f * std::sqrt(static_cast<double>(m2)));
    if (!(p >= 0) || !std::isfinite(p)) bad = true;
    else amplitude[m2] = std::sqrt(p / volume);
  }
  if (bad) fail("initial conditions: P(k) is negative or not finite somewhere in k = {} to {} h/Mpc",
                k_f, k_f * std::sqrt(static_cast<double>(max_m2)));
  return amplitude;
}

void make_gaussian_field(FftMesh<double>& mesh, double box_mpc_h, const PowerFunction& power,
                         const FieldOptions& options) {
  const int n = mesh.n();
  const std::vector<double> amplitude = mode_amplitudes(n, box_mpc_h, power);
  fill_white_noise(mesh, options.seed);
  mesh.forward();
  const double noise_norm = 1.0 / std::pow(static_cast<double>(n), 1.5);   // <|FFT[w]|^2> = N^3
  const double sign = options.paired ? -1.0 : 1.0;
  auto* modes = mesh.complex_data();
  for_each_mode(mesh, [&](const Mode& m) {
    std::complex<double>& v = modes[m.index];
    if (m.dropped) {
      v = 0.0;
      return;
    }
    const double a = sign * amplitude[m.k2()];
    if (options.fixed_amplitude) {
      const double r = std::abs(v);
      v = r > 0 ? v * (a / r) : std::complex<double>(a, 0.0);
    } else {
      v *= a * noise_norm;
    }
  });
}

}  // namespace orbis::ic
