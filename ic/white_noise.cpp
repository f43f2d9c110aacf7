#include "ic/white_noise.hpp"

#include <cmath>

#include "pm/fft_mesh.hpp"

namespace orbis::ic {

Philox4x32 philox4x32_10(Philox4x32 ctr, std::array<std::uint32_t, 2> key) {
  constexpr std::uint32_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u;   // multipliers
  constexpr std::uint32_t w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;   // Weyl key increments
  for (int round = 0; round < 10; ++round) {
    if (round > 0) key[0] += w0, key[1] += w1;
    const std::uint64_t p0 = static_cast<std::uint64_t>(m0) * ctr[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(m1) * ctr[2];
    const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
  }
  return ctr;
}

double white_noise(std::uint64_t seed, std::uint32_t ix, std::uint32_t iy, std::uint32_t iz) {
  const Philox4x32 r = philox4x32_10({ix, iy, iz, 0u}, {static_cast<std::uint32_t>(seed),
                                                        static_cast<std::uint32_t>(seed >> 32)});
  const double u1 = uniform_open0((static_cast<std::uint64_t>(r[0]) << 32) | r[1]);
  const double u2 = uniform_open0((static_cast<std::uint64_t>(r[2]) << 32) | r[3]);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

void fill_white_noise(FftMesh<double>& mesh, std::uint64_t seed) {
  const int n = mesh.n();
  const int x0 = mesh.local_x0(), x1 = mesh.local_x0() + mesh.local_nx();
#pragma omp parallel for schedule(static)
  for (int ix = x0; ix < x1; ++ix)
    for (int iy = 0; iy < n; ++iy) {
      double* row = &mesh.real(ix, iy, 0);
      for (int iz = 0; iz < n; ++iz) row[iz] = white_noise(seed, ix, iy, iz);
      for (int iz = n; iz < mesh.nz_padded(); ++iz) row[iz] = 0.0;
    }
}

}  // namespace orbis::ic
