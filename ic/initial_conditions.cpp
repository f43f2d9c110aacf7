#include "ic/initial_conditions.hpp"


#include <cmath>
#include <exception>
#include <memory>
#include <thread>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "core/units.hpp"
#include "cosmology/cosmology.hpp"
#include "cosmology/linear_power.hpp"
#include "ic/gaussian_field.hpp"
#include "ic/lpt.hpp"
#include "ic/modes.hpp"

namespace orbis {
namespace {

using Complex = std::complex<double>;

// FFTW plans made for more threads or ranks use other algorithms, whose results differ in
// the last bits (measured: a 100^3 transform planned for 8 threads differs from 1 thread,
// 64^3 and 128^3 do not). The IC mesh therefore uses the reproducible transform
// (FftPlan::reproducible: the same one-dimensional transforms of every line), which makes
// the FFTs the same for any thread and rank count. Element-wise work stays multithreaded.

// <delta^2> at D1 = 1 by Parseval: delta(x) = sum_k delta_k e^{ikx} over the full k space;
// delta_k is this rank's slab, the sum is over all ranks.
double field_variance(const std::vector<Complex>& delta_k, int n, const Comm& comm) {
  const int nzc = n / 2 + 1;
  double sum = 0;
  for (std::size_t i = 0; i < delta_k.size(); ++i) {
    const int iz = static_cast<int>(i % nzc);
    sum += (iz == 0 ? 1.0 : 2.0) * std::norm(delta_k[i]);
  }
  return comm.sum(sum);
}

// The power of delta as generated, measured on the grid: delta(x) by a backward transform,
// then forward again and normalised (a round trip through the real-space field).
std::vector<ic::PowerBin> measure_delta_power(const std::vector<Complex>& delta_k, FftMesh<double>& mesh,
                                              double box, double d1, const ic::PowerFunction& p_input) {
  const int n = mesh.n();
  std::copy(delta_k.begin(), delta_k.end(), mesh.complex_data());
  mesh.backward();
  mesh.forward();
  return ic::bin_power(mesh, mesh.complex_data(), box, d1 * d1 / std::pow(static_cast<double>(n), 6), p_input);
}

// The power of -div s, s = x - q the particles' displacement (nearest periodic image),
// computed spectrally into `work` (delta_k's storage, no longer needed).
std::vector<ic::PowerBin> measure_displacement_power(const Particles& particles, FftMesh<double>& mesh, double box,
                                                     std::vector<Complex>& work, const ic::PowerFunction& p_input) {
  const int n = mesh.n(), x0 = mesh.local_x0(), x1 = mesh.local_x0() + mesh.local_nx();
  const double spacing = box / n, k_f = 2.0 * M_PI / box, inv_n3 = 1.0 / (static_cast<double>(n) * n * n);
  std::fill(work.begin(), work.end(), Complex(0.0));
  for (int d = 0; d < 3; ++d) {
#pragma omp parallel for schedule(static)
    for (int ix = x0; ix < x1; ++ix)
      for (int iy = 0; iy < n; ++iy)
        for (int iz = 0; iz < n; ++iz) {
          const std::size_t p = (static_cast<std::size_t>(ix - x0) * n + iy) * n + iz;
          const int q[3] = {ix, iy, iz};
          mesh.real(ix, iy, iz) = periodic_wrap_delta(particles.pos[p][d] - q[d] * spacing, box);
        }
    mesh.forward();
    const Complex* s = mesh.complex_data();
    ic::for_each_mode(mesh, [&](const ic::Mode& m) {
      if (m.dropped) return;
      const double kd = (d == 0 ? m.kx : d == 1 ? m.ky : m.kz) * k_f;
      work[m.index] += Complex(0.0, -kd) * s[m.index] * inv_n3;   // -i k.s
    });
  }
  return ic::bin_power(mesh, work.data(), box, 1.0, p_input);
}

void warn_outside_table(const LinearPower& power, double k_lo, double k_hi) {
  if (k_lo < power.k_min_h_mpc() || k_hi > power.k_max_h_mpc())
    log::warn_root("the ICs need P(k) for k = {:.4g} to {:.4g} h/Mpc, but {} covers {:.4g} to {:.4g} h/Mpc: "
              "beyond, P(k) is extrapolated as a power law", k_lo, k_hi, power.description(),
              power.k_min_h_mpc(), power.k_max_h_mpc());
}

}  // namespace

IcSettings IcSettings::from_params(const Params& params) {
  IcSettings s;
  const std::int64_t n = params.get_int("box.particles_per_side");
  if (n % 2 != 0)
    fail("{}: particles_per_side = {} must be even for the IC generator's FFT grid",
         params.describe("box.particles_per_side"), n);
  s.n = static_cast<int>(n);
  s.box_mpc_h = params.get_real("box.size_mpc_h");
  s.z_init = params.get_real("ic.z_init");
  if (1.0 / (1.0 + s.z_init) < Cosmology::a_min)
    fail("{}: z_init = {} is before a = {}, where the growth tables start", params.describe("ic.z_init"), s.z_init,
         Cosmology::a_min);
  s.seed = static_cast<std::uint64_t>(params.get_int("ic.seed"));
  s.lpt_order = static_cast<int>(params.get_int("ic.lpt_order"));
  s.fixed_amplitude = params.get_bool("ic.fixed_amplitude");
  s.paired = params.get_bool("ic.paired");
  s.self_test = params.get_bool("ic.self_test");
  return s;
}

Particles make_initial_conditions(const IcSettings& settings, const Cosmology& cosmology, const LinearPower& power,
                                  IcReport* report, const Comm& comm) {
  IcReport local;
  IcReport& r = report ? *report : local;
  const int n = settings.n;
  const double box = settings.box_mpc_h;
  if (n < 2 || n % 2 != 0) fail("initial conditions: {} particles per side, expected an even number >= 2", n);
  if (!(box > 0)) fail("initial conditions: box size {} Mpc/h must be positive", box);

  r.a_init = 1.0 / (1.0 + settings.z_init);
  const double a = r.a_init;
  r.d1 = cosmology.growth(a), r.d2 = cosmology.growth2(a);
  r.f1 = cosmology.growth_rate(a), r.f2 = cosmology.growth_rate2(a);
  r.hubble = cosmology.hubble(a);
  const double k_f = 2.0 * M_PI / box, k_nyquist = M_PI * n / box;
  warn_outside_table(power, k_f, std::sqrt(3.0) * k_nyquist);
  const ic::PowerFunction p_z0 = [&power](double k) { return power(k); };
  const double d1_sq = r.d1 * r.d1;
  const ic::PowerFunction p_init = [&power, d1_sq](double k) { return power(k) * d1_sq; };

  // Bitwise-identical ICs for any thread and rank count: the reproducible transform.
  FftMesh<double> mesh(n, comm, FftPlan::reproducible);
  // The particle arrays (56 bytes a particle) are zero-filled by one thread as std::vector
  // makes them, 0.4 s at 256^3: they are made while the field is drawn, each of the two
  // large ones (positions, momenta) on a thread of its own and the rest on a third (one
  // thread for all kept the grid phase waiting 0.2 s), and filled with the grid after.
  Particles particles;
  const std::size_t count = static_cast<std::size_t>(mesh.local_nx()) * n * n;
  std::exception_ptr allocation_errors[3];
  const auto make = [&allocation_errors](int k, auto&& resize) {
    return std::thread([k, resize, &allocation_errors] {
      try {
        resize();
      } catch (...) {
        allocation_errors[k] = std::current_exception();
      }
    });
  };
  std::thread allocations[3] = {
      make(0, [&particles, count] { particles.pos.resize(count); }),
      make(1, [&particles, count] { particles.mom.resize(count); }),
      make(2, [&particles, count] {
        particles.id.resize(count);
        particles.time_bin.resize(count);
      })};
  struct JoinAtExit {   // also when the field throws: a joinable thread must not be destroyed
    std::thread (&threads)[3];
    ~JoinAtExit() {
      for (std::thread& t : threads)
        if (t.joinable()) t.join();
    }
  } join_at_exit{allocations};
  std::vector<Complex> delta_k;
  {
    ScopedPhase phase(r.times, "field");
    ic::make_gaussian_field(mesh, box, p_z0, {settings.seed, settings.fixed_amplitude, settings.paired});
    const Complex* modes = mesh.complex_data();
    delta_k.assign(modes, modes + static_cast<std::size_t>(mesh.local_nx()) * n * mesh.nz_complex());
    r.delta_rms = std::sqrt(field_variance(delta_k, n, comm)) * r.d1;
  }
  {
    ScopedPhase phase(r.times, "grid");
    for (std::thread& t : allocations) t.join();
    for (const std::exception_ptr& e : allocation_errors)
      if (e) std::rethrow_exception(e);
    ic::make_grid_particles(n, box, particles, mesh.local_x0(), mesh.local_nx());
    particles.mass = cosmology.params().omega_m * units::rho_crit0 * box * box * box / (double(n) * n * n);
  }
  if (settings.self_test) {
    ScopedPhase phase(r.times, "self-test");
    r.delta_power = measure_delta_power(delta_k, mesh, box, r.d1, p_init);
  }
  {
    ScopedPhase phase(r.times, settings.lpt_order == 2 ? "2LPT" : "Zel'dovich");
    const double a2h = a * a * r.hubble;
    const ic::LptCoefficients c{r.d1, r.d2, a2h * r.f1 * r.d1, a2h * r.f2 * r.d2};
    ic::displace_particles(delta_k, mesh, box, settings.lpt_order, c, particles);
  }
  if (settings.self_test) {
    ScopedPhase phase(r.times, "self-test");
    r.displacement_power = measure_displacement_power(particles, mesh, box, delta_k, p_init);
  }
  {
    ScopedPhase phase(r.times, "statistics");
    const double spacing = box / n;
    double s2 = 0, p2 = 0, s_max = 0;
    const auto count = static_cast<std::ptrdiff_t>(particles.size());
    const int x0 = mesh.local_x0();
#pragma omp parallel for schedule(static) reduction(+ : s2, p2) reduction(max : s_max)
    for (std::ptrdiff_t p = 0; p < count; ++p) {
      const int ix = x0 + static_cast<int>(p / (std::ptrdiff_t(n) * n)), iy = static_cast<int>(p / n % n),
                iz = static_cast<int>(p % n);
      const Vec3d q{ix * spacing, iy * spacing, iz * spacing};
      Vec3d s;
      for (int d = 0; d < 3; ++d) s[d] = periodic_wrap_delta(particles.pos[p][d] - q[d], box);
      const double s_sq = norm2(s);
      s2 += s_sq, p2 += norm2(particles.mom[p]);
      s_max = std::max(s_max, std::sqrt(s_sq));
    }
    const double total = static_cast<double>(n) * n * n;
    r.displacement_rms_mpc_h = std::sqrt(comm.sum(s2) / total);
    r.displacement_max_mpc_h = comm.max(s_max);
    r.momentum_rms_km_s = std::sqrt(comm.sum(p2) / total);
  }
  return particles;
}

Particles make_initial_conditions(const Params& params, const Cosmology& cosmology, const LinearPower& power,
                                  const Comm& comm) {
  IcSettings settings = IcSettings::from_params(params);
  settings.self_test = false;
  IcReport report;
  Particles particles = make_initial_conditions(settings, cosmology, power, &report, comm);
  log_ic_report(settings, report);
  return particles;
}

void log_ic_report(const IcSettings& s, const IcReport& r) {
  const double spacing = s.box_mpc_h / s.n;
  log::info("ICs: {}^3 particles in {} Mpc/h, z = {} (a = {:.6g}), {}, seed {}{}{}", s.n, s.box_mpc_h, s.z_init,
            r.a_init, s.lpt_order == 2 ? "2LPT" : "Zel'dovich", s.seed, s.fixed_amplitude ? ", fixed amplitude" : "",
            s.paired ? ", paired (phases flipped)" : "");
  log::info("ICs: D1 = {:.6e}, D2 / D1^2 = {:.6f}, f1 = {:.6f}, f2 = {:.6f}, H = {:.6g} km/s/(Mpc/h)", r.d1,
            r.d2 / (r.d1 * r.d1), r.f1, r.f2, r.hubble);
  log::info("ICs: grid delta rms {:.4g}; displacement rms {:.4g} Mpc/h ({:.3g} spacings), max {:.4g} Mpc/h "
            "({:.3g} spacings); momentum p = a^2 dx/dt rms {:.4g} km/s (peculiar velocity p/a: {:.4g} km/s)",
            r.delta_rms, r.displacement_rms_mpc_h,
            r.displacement_rms_mpc_h / spacing, r.displacement_max_mpc_h, r.displacement_max_mpc_h / spacing,
            r.momentum_rms_km_s, r.momentum_rms_km_s / r.a_init);
  if (r.displacement_max_mpc_h > spacing)
    log::warn_root("ICs: the largest displacement is {:.3g} grid spacings: shell crossing may already have happened "
              "in the ICs; consider a higher ic.z_init", r.displacement_max_mpc_h / spacing);
  const double k_half_nyquist = 0.5 * M_PI * s.n / s.box_mpc_h;
  for (const auto& [name, bins] : {std::pair{"delta", &r.delta_power}, std::pair{"-div(x - q)", &r.displacement_power}}) {
    if (bins->empty()) continue;
    const ic::PowerCheck c = ic::check_power(*bins, k_half_nyquist, s.fixed_amplitude);
    if (s.fixed_amplitude && s.lpt_order == 2 && bins == &r.displacement_power) {
      // The D2 psi2 term makes -div(x - q) differ from D1 delta at second order: no exact match.
      log::info("ICs self-test, P(k) of {} vs P_lin D1^2 for k < k_Nyq/2: max |P/P_input - 1| = {:.3g} "
                "(includes the 2LPT term)", name, c.max_relative_deviation);
      continue;
    }
    const auto msg = s.fixed_amplitude
                         ? fmt::format("max |P/P_input - 1| = {:.3g} over {} bins", c.max_relative_deviation, c.dof)
                         : fmt::format("chi^2/dof = {:.3f} for {} bins (accepted 1 +- {:.3f})", c.chi2_per_dof(),
                                       c.dof, c.tolerance);
    if (c.consistent) log::info("ICs self-test, P(k) of {} vs P_lin D1^2 for k < k_Nyq/2: {}", name, msg);
    else log::warn_root("ICs self-test, P(k) of {} vs P_lin D1^2 for k < k_Nyq/2: {}: NOT consistent", name, msg);
  }
  std::string times;
  for (const auto& [phase, seconds] : r.times.all()) times += fmt::format(" {} {:.3f} s,", phase, seconds);
  if (!times.empty()) times.pop_back();
  log::info("ICs: time per phase:{}", times);
}

}  // namespace orbis
