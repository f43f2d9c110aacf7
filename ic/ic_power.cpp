#include "ic/ic_power.hpp"

#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"

namespace orbis::ic {

std::vector<PowerBin> bin_power(const FftMesh<double>& layout, const std::complex<double>* modes, double box_mpc_h,
                                double scale, const PowerFunction& p_input) {
  const int n = layout.n(), half = n / 2;
  const int x0 = layout.local_x0(), x1 = layout.local_x0() + layout.local_nx();
  const double k_f = 2.0 * M_PI / box_mpc_h, volume = box_mpc_h * box_mpc_h * box_mpc_h;
  const int num_bins = static_cast<int>(std::sqrt(3.0) * half) + 2;
  // P_input at each integer |k|^2: O(n^2) evaluations instead of n^3.
  const long max_m2 = 3L * half * half;
  std::vector<double> p_of_m2(max_m2 + 1, 0.0);
#pragma omp parallel for schedule(dynamic, 256)
  for (long m2 = 1; m2 <= max_m2; ++m2) p_of_m2[m2] = p_input(k_f * std::sqrt(static_cast<double>(m2)));

  // One row of partial sums per x plane, added in plane order: the same result for any
  // number of threads.
  struct Sums { double k = 0, p = 0, pin = 0, pin2 = 0; std::int64_t count = 0; };
  std::vector<std::vector<Sums>> planes(x1 - x0, std::vector<Sums>(num_bins));
#pragma omp parallel for schedule(static)
  for (int ix = x0; ix < x1; ++ix) {
    if (ix == half) continue;
    const long kx = ix <= half ? ix : ix - n;
    auto& sums = planes[ix - x0];
    for (int iy = 0; iy < n; ++iy) {
      if (iy == half) continue;
      const long ky = iy <= half ? iy : iy - n;
      for (int iz = 0; iz < half; ++iz) {
        const long m2 = kx * kx + ky * ky + static_cast<long>(iz) * iz;
        if (m2 == 0) continue;
        const double k = std::sqrt(static_cast<double>(m2));
        const int b = static_cast<int>(std::floor(k + 0.5));
        const int w = iz == 0 ? 1 : 2;
        const std::complex<double> v = modes[layout.complex_index(ix, iy, iz)];
        const double pin = p_of_m2[m2];
        Sums& s = sums[b];
        s.k += w * k * k_f;
        s.p += w * std::norm(v) * volume * scale;
        s.pin += w * pin;
        s.pin2 += w * pin * pin;
        s.count += w;
      }
    }
  }
  // Per bin: k, P, P_in, P_in^2 and the mode count, summed over this rank's planes in plane
  // order, then over the ranks.
  std::vector<double> totals(5 * static_cast<std::size_t>(num_bins), 0.0);
  for (const auto& plane : planes)
    for (int b = 0; b < num_bins; ++b) {
      const Sums& s = plane[b];
      double* t = &totals[5 * static_cast<std::size_t>(b)];
      t[0] += s.k, t[1] += s.p, t[2] += s.pin, t[3] += s.pin2, t[4] += static_cast<double>(s.count);
    }
  layout.comm().reduce(totals, Comm::Op::sum);
  std::vector<PowerBin> bins(num_bins);
  for (int b = 0; b < num_bins; ++b) {
    const double* t = &totals[5 * static_cast<std::size_t>(b)];
    bins[b].k_mean = t[0], bins[b].p_measured = t[1], bins[b].p_input = t[2], bins[b].p2_input = t[3];
    bins[b].modes = static_cast<std::int64_t>(t[4]);
  }
  for (auto& bin : bins)
    if (bin.modes > 0) {
      const double c = static_cast<double>(bin.modes);
      bin.k_mean /= c, bin.p_measured /= c, bin.p_input /= c, bin.p2_input /= c;
    }
  return bins;
}

PowerCheck check_power(const std::vector<PowerBin>& bins, double k_max_h_mpc, bool fixed_amplitude) {
  PowerCheck check;
  for (const auto& bin : bins) {
    if (bin.modes == 0 || !(bin.k_mean < k_max_h_mpc)) continue;
    if (!(bin.p_input > 0)) fail("IC power check: the input P(k) is {} at k = {} h/Mpc", bin.p_input, bin.k_mean);
    const double d = bin.p_measured - bin.p_input;
    check.chi2 += d * d / bin.variance();
    check.max_relative_deviation = std::max(check.max_relative_deviation, std::abs(d / bin.p_input));
    ++check.dof;
  }
  if (check.dof == 0) return check;
  if (fixed_amplitude) {
    check.tolerance = 1e-6;
    check.consistent = check.max_relative_deviation < 1e-6;
  } else {
    check.tolerance = 5.0 * std::sqrt(2.0 / check.dof);
    check.consistent = std::abs(check.chi2_per_dof() - 1.0) < check.tolerance;
  }
  return check;
}

std::string power_table_text(const std::vector<PowerBin>& delta, const std::vector<PowerBin>& displacement) {
  std::string out =
      "# k_mean [h/Mpc]  P_measured [(Mpc/h)^3]  P_input = P_lin(k) D(z_init)^2  N_modes  "
      "k_mean_disp [h/Mpc]  P_measured_disp  P_input_disp  N_modes_disp"
      "   (delta as generated; disp: -div of the particles' displacement x - q)\n";
  for (std::size_t b = 0; b < delta.size(); ++b) {
    if (delta[b].modes == 0) continue;
    const PowerBin& s = b < displacement.size() ? displacement[b] : PowerBin{};
    out += fmt::format("{:.8e} {:.8e} {:.8e} {} {:.8e} {:.8e} {:.8e} {}\n", delta[b].k_mean, delta[b].p_measured,
                       delta[b].p_input, delta[b].modes, s.k_mean, s.p_measured, s.p_input, s.modes);
  }
  return out;
}

}  // namespace orbis::ic
