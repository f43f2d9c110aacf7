#include "integrate/simulation.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/banner.hpp"
#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/timer.hpp"
#include "integrate/kdk.hpp"
#include "integrate/outputs.hpp"
#include "integrate/step_log.hpp"
#include "core/units.hpp"
#include "io/atomic_file.hpp"
#include "io/snapshot.hpp"
#include "ic/ic_power.hpp"
#include "ic/initial_conditions.hpp"
#include "cosmology/linear_power.hpp"

namespace orbis {

namespace {

// [ic] file: the particles of an IC or snapshot file, checked against the parameters.
Particles read_ic_file(const Params& params, double& a_start) {
  std::string path = params.get_string("ic.file");
  if (!path.empty() && path[0] != '/') path = join_path(params.directory(), path);
  const Snapshot snap = read_snapshot(path);
  const double box = params.get_real("box.size_mpc_h");
  const auto n = static_cast<std::uint64_t>(params.get_int("box.particles_per_side"));
  if (std::abs(snap.header.box_mpc_h - box) > 1e-9 * box)
    fail("{}: '{}' has BoxSize {} Mpc/h, but {} = {}", params.describe("ic.file"), path,
         snap.header.box_mpc_h, params.describe("box.size_mpc_h"), box);
  if (snap.particles.size() != n * n * n)
    fail("{}: '{}' holds {} particles, but {} = {} means {}", params.describe("ic.file"), path,
         snap.particles.size(), params.describe("box.particles_per_side"), n, n * n * n);
  const double omega_m = params.get_real("cosmology.omega_m");
  if (snap.header.omega_m > 0 && std::abs(snap.header.omega_m - omega_m) > 1e-4)
    fail("{}: '{}' was made with Omega0 = {}, but {} = {}", params.describe("ic.file"), path,
         snap.header.omega_m, params.describe("cosmology.omega_m"), omega_m);
  const double expected_mass = omega_m * units::rho_crit0 * box * box * box / static_cast<double>(n * n * n);
  if (std::abs(snap.particles.mass / expected_mass - 1) > 1e-3)
    log::warn("'{}': particle mass {} differs from omega_m rho_crit L^3 / N = {} by {:.2g} (its code's G "
              "or units differ); the run uses the file's masses", path, snap.particles.mass, expected_mass,
              snap.particles.mass / expected_mass - 1);
  log::info("initial conditions from '{}': {} particles at z = {}", path, snap.particles.size(), snap.header.redshift);
  a_start = snap.header.a;
  return snap.particles;
}

}  // namespace

Simulation::Simulation(const Params& params)
    : params_(params),
      cosmology_(Cosmology::from_params(params)),
      file_ics_(params.get_string("ic.file").empty() ? Particles{} : read_ic_file(params, file_a_)),
      schedule_(OutputSchedule::from_params(
          params, file_a_ > 0 ? 1.0 / file_a_ - 1.0 : params.get_real("ic.z_init"),
          file_a_ > 0 ? params.get_string("ic.file") : params.describe("ic.z_init"))) {
  limits_.max_dln_a = params.get_real("time.max_dln_a");
  limits_.eta = params.get_real("time.eta");
  gravity_ = make_gravity_solver(params);
  limits_.softening = gravity_->softening();
  out_dir_ = params.get_string("output.directory");
  if (schedule_.a_end > Cosmology::a_max)
    fail("{}: the run would end at a = {}, beyond the growth tables (a <= {})",
         params.describe("time.z_final"), schedule_.a_end, Cosmology::a_max);
  validate_outputs(params);
}

Simulation::~Simulation() = default;

RunSummary Simulation::run() {
  if (file_a_ > 0) return run_from(std::move(file_ics_), file_a_);
  const LinearPower power = LinearPower::from_params(params_);
  const IcSettings settings = IcSettings::from_params(params_);
  log::info("linear P(k): {}; sigma8 of the z = 0 spectrum {:.6f}", power.description(), power.sigma8());
  IcReport report;
  Particles particles = make_initial_conditions(settings, cosmology_, power, &report);
  log_ic_report(settings, report);
  if (settings.self_test) {
    make_directories(out_dir_);
    const std::string path = join_path(out_dir_, "ic_power.txt");
    write_text_atomically(path, ic::power_table_text(report.delta_power, report.displacement_power));
    log::info("IC self-test: wrote {}", path);
  }
  return run_from(std::move(particles), schedule_.a_begin);
}

double Simulation::max_acceleration() const {
  double max2 = 0;
  for (const auto& g : acc_) max2 = std::max(max2, norm2(g));
  return std::sqrt(max2);
}

RunSummary Simulation::run_from(Particles particles, double a) {
  RunSummary summary;
  Stopwatch run_watch;
  particles_ = std::move(particles);
  make_directories(out_dir_);
  write_text_atomically(join_path(out_dir_, "used_parameters.toml"), params_.to_toml());
  log::info("gravity: {}", gravity_->describe());

  ForceStats stats;
  gravity_->accelerations(particles_, acc_, stats);
  if (schedule_.is_output(a)) write_outputs(a, summary);

  const double log_span = std::log(schedule_.a_end / schedule_.a_begin);
  while (a < schedule_.a_end * (1 - 1e-12)) {
    Stopwatch step_watch;
    const double dln = allowed_dln_a(limits_, cosmology_, a, max_acceleration());
    const double a_next = next_scale_factor(a, schedule_.next_after(a), dln);
    const double a_half = std::sqrt(a * a_next);   // half step in ln a

    ForceStats step_stats;
    {
      ScopedPhase phase(step_stats.times, "kdk");
      kick(particles_.mom, acc_, cosmology_.kick_factor(a, a_half));
      drift(particles_.pos, particles_.mom, cosmology_.drift_factor(a, a_next),
            params_.get_real("box.size_mpc_h"));
    }
    gravity_->accelerations(particles_, acc_, step_stats);
    {
      ScopedPhase phase(step_stats.times, "kdk");
      kick(particles_.mom, acc_, cosmology_.kick_factor(a_half, a_next));
    }
    const double da = a_next - a;
    a = a_next;
    ++summary.steps;

    Stopwatch io_watch;
    if (schedule_.is_output(a)) write_outputs(a, summary);
    StepReport report;
    report.step = summary.steps;
    report.a = a;
    report.da = da;
    report.io_seconds = io_watch.seconds();
    report.seconds = step_watch.seconds();
    report.particles = particles_.size();
    report.progress = std::log(a / schedule_.a_begin) / log_span;
    report.elapsed = run_watch.seconds();
    report.force = &step_stats;
    log::info("{}", step_line(report));
    print_progress_bar(report.progress, report.elapsed * (1 - report.progress) / std::max(report.progress, 1e-9));
  }
  summary.a_final = a;
  summary.seconds = run_watch.seconds();
  log::info("finished: {} steps to z = {:.4f} in {:.1f} s; {} files written", summary.steps, 1 / a - 1,
            summary.seconds, summary.outputs.size());
  return summary;
}

void Simulation::write_outputs(double a, RunSummary& summary) {
  OutputContext context{params_, cosmology_, out_dir_, output_count_, a};
  auto files = write_run_outputs(context, particles_, acc_);
  summary.outputs.insert(summary.outputs.end(), files.begin(), files.end());
  ++output_count_;
}

int run_simulation_command(const std::string& file, const std::vector<std::string>& overrides) {
  if (Comm::world().size() > 1)
    fail("orbis run works on one rank for now (domains and ghosts are not written yet); run it without mpirun");
  Params params = Params::load(file, overrides);
  log::info("{}", banner("run " + file));
  Simulation simulation(params);   // every check before any work
  for (const auto& [name, value] : params.flat()) log::info("  {} = {}", name, value);
  simulation.run();
  return 0;
}

}  // namespace orbis
