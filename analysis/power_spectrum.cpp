#include "analysis/power_spectrum.hpp"

#include "analysis/power_spectrum_estimator.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <memory>

#include "core/error.hpp"
#include "core/exact_sum.hpp"
#include "core/params.hpp"
#include "core/units.hpp"
#include "pm/fft_mesh.hpp"
#include "pm/fixed_point_mesh.hpp"
#include "pm/slab_routing.hpp"

namespace orbis {
namespace pk {

Binning::Binning(const PowerSpectrumSettings& s, int n) : log(s.log_bins) {
  const double half = n / 2;
  if (log) {
    count = s.num_bins > 0 ? s.num_bins : static_cast<int>(std::ceil(10.0 * std::log10(half)));
    count = std::max(count, 1);
    log_top = std::log(half);
  } else {
    count = s.num_bins > 0 ? s.num_bins : n / 2;
    width = half / count;
  }
}

int Binning::index(double m) const {
  if (log) return std::min(static_cast<int>(count * std::log(m) / log_top), count - 1);
  return static_cast<int>((m - 0.5) / width);
}

double Binning::centre(int b) const {
  if (log) return std::exp((b + 0.5) * log_top / count);
  return 0.5 + (b + 0.5) * width;
}

std::vector<std::int64_t> Binning::squared_edges(int n) const {
  const std::int64_t top = static_cast<std::int64_t>(n / 2) * (n / 2);
  std::vector<std::int64_t> edges(count + 1, top + 1);
  edges[0] = 1;
  int previous = 0;
  for (std::int64_t q = 1; q <= top; ++q) {
    const int b = index(std::sqrt(static_cast<double>(q)));
    if (b < previous || b >= count) fail("internal: P(k) bin {} of |m|^2 = {} is out of order", b, q);
    for (int e = previous + 1; e <= b; ++e) edges[e] = q;
    previous = b;
  }
  return edges;
}

AxisTables::AxisTables(Window window, int n) : w(n), a(n), b(n) {
  const int p = window_order(window);
  for (int i = 0; i < n; ++i) {
    const int m = FftMesh<double>::signed_index(i, n);
    w[i] = window_fourier(window, m, n);
    double sa = 0, sb = 0;
    for (int l = -400; l <= 400; ++l) {
      const double t = units::pi * (m + static_cast<double>(l) * n) / n;
      const double w2 = t == 0 ? 1.0 : std::pow(std::sin(t) / t, 2 * p);
      sa += w2;
      sb += (l % 2 == 0 ? 1.0 : -1.0) * w2;
    }
    a[i] = sa;
    b[i] = sb;
  }
}

PowerSpectrum assemble(const PowerSpectrumSettings& settings, double box_mpc_h, std::uint64_t total,
                       const BinSums& unfolded, const BinSums* folded, const LinearPowerFn& linear) {
  const int n = settings.grid_side;
  PowerSpectrum out;
  out.settings = settings;
  out.box_mpc_h = box_mpc_h;
  out.num_particles = total;
  const Binning binning(settings, n);
  const double k_fundamental = 2.0 * units::pi / box_mpc_h;
  const double k_switch = 0.5 * (n / 2) * k_fundamental;   // half the unfolded Nyquist frequency
  auto append = [&](const BinSums& sums, int fold, bool below_switch) {
    for (int b = 0; b < binning.count; ++b) {
      if (sums.modes[b] == 0) continue;
      const double centre = binning.centre(b) * fold * k_fundamental;
      if (settings.fold_factor > 1 && (centre < k_switch) != below_switch) continue;
      PowerSpectrumBin bin;
      const double modes = static_cast<double>(sums.modes[b]);
      bin.k_mean = sums.k[b] / modes * fold * k_fundamental;
      bin.modes = sums.modes[b];
      bin.shot_noise = sums.shot[b] / modes;
      bin.power = sums.power[b] / modes - (settings.subtract_shot_noise ? bin.shot_noise : 0.0);
      bin.linear = linear ? linear(bin.k_mean) : std::numeric_limits<double>::quiet_NaN();
      bin.fold = fold;
      out.bins.push_back(bin);
    }
  };
  append(unfolded, 1, true);
  if (settings.fold_factor > 1 && folded) append(*folded, settings.fold_factor, false);
  return out;
}

}  // namespace pk

namespace {

using pk::AxisTables;
using pk::BinSums;
using pk::Binning;

// The particle counts of `pos` (this rank's, `total` over all ranks; shift_cells added to
// every coordinate) minus their mean, in 64-bit fixed point (pm/fixed_point_mesh.hpp) as the
// PM assigns: the same bits for any rank count, thread count and particle order. The mean
// only feeds k = 0, which the spectrum leaves out. lo, hi: fixed_point_elements(mesh) each.
void assign_counts(FftMesh<double>& mesh, const std::vector<Vec3d>& pos, double box, Window window,
                   double shift_cells, std::uint64_t total, SortedParticles& sorted, std::uint32_t* lo,
                   std::uint32_t* hi) {
  const int n = mesh.n();
  const double scale = fixed_point_scale(total);
  sort_for_mesh(pos, box, n, window, shift_cells, sorted);
  assign_fixed_point(mesh, sorted, scale, lo, hi);
  if (mesh.distributed()) mesh.add_ghost_planes_fixed(lo, hi);
  fixed_point_to_mesh(lo, hi, pm_fixed_point_mean(total, scale, n), 1.0 / scale, mesh);
}

// The bins summed over the x planes of every rank in plane order, as one rank sums them:
// rank order is plane order (pm/fft_mesh.hpp), so root gathers every rank's plane sums and
// adds them in that order (a reduction over the ranks would add the ranks' partial sums, and
// round differently for each rank count). Mode counts are integers: a reduction suffices.
BinSums sum_planes(const std::vector<BinSums>& planes, int bins, const Comm& comm) {
  const std::size_t per_plane = 3 * static_cast<std::size_t>(bins);
  std::vector<double> mine;
  mine.reserve(planes.size() * per_plane);
  BinSums total(bins);
  for (const auto& p : planes) {
    mine.insert(mine.end(), p.k.begin(), p.k.end());
    mine.insert(mine.end(), p.power.begin(), p.power.end());
    mine.insert(mine.end(), p.shot.begin(), p.shot.end());
    for (int b = 0; b < bins; ++b) total.modes[b] += p.modes[b];
  }
  const std::vector<double> all = comm.gatherv(mine);
  for (std::size_t at = 0; at < all.size(); at += per_plane)
    for (int b = 0; b < bins; ++b) {
      total.k[b] += all[at + b];
      total.power[b] += all[at + bins + b];
      total.shot[b] += all[at + 2 * bins + b];
    }
  comm.broadcast(total.k);
  comm.broadcast(total.power);
  comm.broadcast(total.shot);
  comm.reduce(total.modes, Comm::Op::sum);
  return total;
}

// One spectrum of positions in [0, box) (this rank's; `count` over all ranks): binned sums
// over the modes of the mesh, the same bits for any rank and thread count.
BinSums binned_spectrum(const std::vector<Vec3d>& pos_in, std::uint64_t count, double box,
                        const PowerSpectrumSettings& s, const Binning& binning, const Comm& comm) {
  const int n = s.grid_side, nzc = n / 2 + 1;
  const double volume = box * box * box;
  // Several ranks: the particles go to their stencils' slabs (ghost planes: window order,
  // enough for the half-cell-shifted mesh too).
  const int ghosts = window_order(s.window);
  std::vector<Vec3d> routed;
  if (comm.size() > 1) SlabRouting().route(pos_in, box, n, s.window, comm, routed);
  const std::vector<Vec3d>& pos = comm.size() > 1 ? routed : pos_in;
  // The reproducible transforms (pm/fft_mesh.hpp): the same bits for any decomposition.
  FftMesh<double> mesh(n, comm, FftPlan::reproducible, 0, ghosts);
  std::unique_ptr<FftMesh<double>> shifted;
  if (s.interlacing) shifted = std::make_unique<FftMesh<double>>(n, comm, FftPlan::reproducible, 0, ghosts);
  {
    // The fixed-point sums of one mesh at a time (8 bytes a node), freed before the transforms.
    std::vector<std::uint32_t> fixed(2 * fixed_point_elements(mesh));
    std::uint32_t* const lo = fixed.data();
    std::uint32_t* const hi = lo + fixed.size() / 2;
    SortedParticles sorted;
    assign_counts(mesh, pos, box, s.window, 0.0, count, sorted, lo, hi);
    if (shifted) assign_counts(*shifted, pos, box, s.window, 0.5, count, sorted, lo, hi);
  }
  mesh.forward();
  if (shifted) shifted->forward();
  const double total = static_cast<double>(count);
  const AxisTables axis(s.window, n);
  const int x0 = mesh.local_x0(), nx = mesh.local_nx();

  // Sums per x plane, added in plane order afterwards: the result does not depend on threads.
  std::vector<BinSums> planes(nx, BinSums(binning.count));
#pragma omp parallel for schedule(dynamic, 1)
  for (int i = x0; i < x0 + nx; ++i) {
    BinSums& sums = planes[i - x0];
    const int mx = FftMesh<double>::signed_index(i, n);
    for (int j = 0; j < n; ++j) {
      const int my = FftMesh<double>::signed_index(j, n);
      for (int k = 0; k < nzc; ++k) {
        const int mz = k;
        const double m = std::sqrt(static_cast<double>(mx * mx + my * my + mz * mz));
        if (m == 0 || m > n / 2) continue;
        const int b = binning.index(m);
        if (b < 0 || b >= binning.count) continue;
        std::complex<double> f = mesh.mode(i, j, k);
        const double alias_all = axis.a[i] * axis.a[j] * axis.a[k];
        double alias = alias_all;
        if (shifted) {
          // x -> x + cell/2 multiplied the modes by e^{-i k.s}; undo it and average.
          const double theta = units::pi * (mx + my + mz) / n;
          f = 0.5 * (f + shifted->mode(i, j, k) * std::complex<double>(std::cos(theta), std::sin(theta)));
          alias = 0.5 * (alias_all + axis.b[i] * axis.b[j] * axis.b[k]);
        }
        const double window = axis.w[i] * axis.w[j] * axis.w[k];
        const double power = volume * std::norm(f / (total * window));
        const double weight = (k == 0 || k == n / 2) ? 1.0 : 2.0;   // +k and -k
        sums.k[b] += weight * m;
        sums.power[b] += weight * power;
        sums.shot[b] += weight * volume / total * alias / (window * window);
        sums.modes[b] += static_cast<std::int64_t>(weight);
      }
    }
  }
  return sum_planes(planes, binning.count, comm);
}

}  // namespace

PowerSpectrumSettings PowerSpectrumSettings::from_params(const Params& params) {
  PowerSpectrumSettings s;
  const int grid = static_cast<int>(params.get_int("analysis.pk_grid_side"));
  s.grid_side = grid != 0 ? grid : 2 * static_cast<int>(params.get_int("box.particles_per_side"));
  if (s.grid_side % 2 != 0 || s.grid_side < 4)
    fail("{}: the P(k) mesh must have an even number of cells per side, at least 4; got {}",
         params.describe("analysis.pk_grid_side"), s.grid_side);
  s.window = parse_window(params.get_string("analysis.pk_assignment"));
  s.interlacing = params.get_bool("analysis.pk_interlacing");
  s.fold_factor = static_cast<int>(params.get_int("analysis.pk_fold_factor"));
  s.log_bins = params.get_string("analysis.pk_binning") == "log";
  s.num_bins = static_cast<int>(params.get_int("analysis.pk_num_bins"));
  s.subtract_shot_noise = params.get_bool("analysis.pk_subtract_shot_noise");
  return s;
}

PowerSpectrum measure_power_spectrum(const std::vector<Vec3d>& pos, double box_mpc_h,
                                     const PowerSpectrumSettings& settings,
                                     const LinearPowerFn& linear, const Comm& comm) {
  const int n = settings.grid_side;
  if (n < 4 || n % 2 != 0) fail("P(k): mesh side {} must be even and at least 4", n);
  if (!(box_mpc_h > 0)) fail("P(k): box size {} Mpc/h must be positive", box_mpc_h);
  if (settings.fold_factor < 1) fail("P(k): fold factor {} must be at least 1", settings.fold_factor);
  const std::uint64_t total = comm.sum(static_cast<std::uint64_t>(pos.size()));
  if (total == 0) fail("P(k): no particles");
  const Binning binning(settings, n);
  const BinSums unfolded = binned_spectrum(pos, total, box_mpc_h, settings, binning, comm);
  if (settings.fold_factor == 1) return pk::assemble(settings, box_mpc_h, total, unfolded, nullptr, linear);
  // Positions modulo L/F, stretched back to [0, L): mesh mode m is the box's mode F m.
  const int f = settings.fold_factor;
  std::vector<Vec3d> folded(pos.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t p = 0; p < static_cast<std::ptrdiff_t>(pos.size()); ++p)
    for (int d = 0; d < 3; ++d) folded[p][d] = pk::fold_position(pos[p][d], box_mpc_h, f);
  const BinSums folded_sums = binned_spectrum(folded, total, box_mpc_h, settings, binning, comm);
  return pk::assemble(settings, box_mpc_h, total, unfolded, &folded_sums, linear);
}

}  // namespace orbis
