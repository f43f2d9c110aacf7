#include "integrate/simulation.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/banner.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/timer.hpp"
#include "integrate/kdk.hpp"
#include "integrate/outputs.hpp"
#include "integrate/step_log.hpp"
#include "io/atomic_file.hpp"
#include "ic/ic_power.hpp"
#include "ic/initial_conditions.hpp"
#include "cosmology/linear_power.hpp"

namespace orbis {

Simulation::Simulation(const Params& params)
    : params_(params),
      cosmology_(Cosmology::from_params(params)),
      schedule_(OutputSchedule::from_params(params)) {
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
  Params params = Params::load(file, overrides);
  log::info("{}", banner("run " + file));
  Simulation simulation(params);   // every check before any work
  for (const auto& [name, value] : params.flat()) log::info("  {} = {}", name, value);
  simulation.run();
  return 0;
}

}  // namespace orbis
