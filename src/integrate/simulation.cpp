#include "integrate/simulation.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/banner.hpp"
#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/host_memory.hpp"
#include "core/log.hpp"
#include "core/parallel.hpp"
#include "core/timer.hpp"
#include "core/gravity_mode.hpp"
#include "core/physical_units.hpp"
#include "integrate/checkpoint.hpp"
#include "integrate/energy.hpp"
#include "integrate/outputs.hpp"
#include "integrate/pm_mesh_choice.hpp"
#include "integrate/run_memory.hpp"
#include "integrate/step_log.hpp"
#include "integrate/stop_signals.hpp"
#include "core/units.hpp"
#include "fmm/p2p.hpp"
#include "io/atomic_file.hpp"
#include "io/output_guard.hpp"
#include "io/gadget_binary.hpp"
#include "io/snapshot.hpp"
#include "ic/ic_power.hpp"
#include "ic/initial_conditions.hpp"
#include "ic/isolated_ics.hpp"
#include "integrate/newtonian_clock.hpp"
#include "cosmology/linear_power.hpp"
#include "integrate/time_bins.hpp"
#include "pm/pm_solver.hpp"

namespace orbis {

namespace {

// [ic] file: the particles of an IC or snapshot file, checked against the parameters; this
// rank's share of them, read by this rank alone: the particles [r N / P, (r + 1) N / P) in file
// order (read_snapshot). Grid ICs and orbis's snapshots are in ID order, the Lagrangian grid's
// x-major order, so each rank starts with a slab of the grid, mostly inside its domain already
// (the engine moves the rest at its first domain update).
Particles read_ic_file(const Params& params, double& a_start, const Comm& comm) {
  std::string path = params.get_string("ic.file");
  if (!path.empty() && path[0] != '/') path = join_path(params.directory(), path);
  const double binary_length_unit = params.get_string("ic.file_length_unit") == "kpc/h" ? 1e-3 : 1.0;
  const Snapshot snap = read_snapshot(path, comm, binary_length_unit);   // collective
  const double box = params.get_real("box.size_mpc_h");
  const auto n = static_cast<std::uint64_t>(params.get_int("box.particles_per_side"));
  if (std::abs(snap.header.box_mpc_h - box) > 1e-9 * box)
    fail("{}: '{}' has BoxSize {} Mpc/h, but {} = {}{}", params.describe("ic.file"), path,
         snap.header.box_mpc_h, params.describe("box.size_mpc_h"), box,
         GadgetBinaryFile::detect(snapshot_first_file(path))
             ? fmt::format(" (a GADGET binary file, its lengths read in {} = {})", params.describe("ic.file_length_unit"),
                           params.get_string("ic.file_length_unit"))
             : std::string());
  if (snap.header.num_total != n * n * n)   // the whole set's, on every rank
    fail("{}: '{}' holds {} particles, but {} = {} means {}", params.describe("ic.file"), path,
         snap.header.num_total, params.describe("box.particles_per_side"), n, n * n * n);
  const double omega_m = params.get_real("cosmology.omega_m");
  if (snap.header.omega_m > 0 && std::abs(snap.header.omega_m - omega_m) > 1e-4)
    fail("{}: '{}' was made with Omega0 = {}, but {} = {}", params.describe("ic.file"), path,
         snap.header.omega_m, params.describe("cosmology.omega_m"), omega_m);
  const double expected_mass = omega_m * units::rho_crit0 * box * box * box / static_cast<double>(n * n * n);
  if (std::abs(snap.particles.mass / expected_mass - 1) > 1e-3)
    log::warn("'{}': particle mass {} differs from omega_m rho_crit L^3 / N = {} by {:.2g} (its code's G "
              "or units differ); the run uses the file's masses", path, snap.particles.mass, expected_mass,
              snap.particles.mass / expected_mass - 1);
  log::info("initial conditions from '{}': {} particles at z = {}", path, snap.header.num_total, snap.header.redshift);
  a_start = snap.header.a;
  return snap.particles;
}

bool periodic_run(const Params& params) { return gravity_mode(params).periodic(); }

bool has_ic_file(const Params& params) { return params.has("ic.file") && !params.get_string("ic.file").empty(); }

// A cosmological run from its starting redshift (or its IC file's) to z_final; an isolated
// system from t_begin to t_end.
OutputSchedule run_schedule(const Params& params, double file_a) {
  if (!periodic_run(params)) return OutputSchedule::from_times(params);
  return OutputSchedule::from_params(params, file_a > 0 ? 1.0 / file_a - 1.0 : params.get_real("ic.z_init"),
                                     file_a > 0 ? params.get_string("ic.file") : params.describe("ic.z_init"));
}

// The ICs that are read before any work: [ic] file's (file_start: a cosmological file's scale
// factor, an isolated system's start time); none for built-in ICs. An isolated system's
// [time] t_begin is set where not given (the file's Time, else 0), so that the schedule, the
// files' /Parameters, used_parameters.toml and a restart all see the time the run starts at.
Particles initial_file(Params& params, double& file_start, const Comm& comm) {
  if (periodic_run(params)) return has_ic_file(params) ? read_ic_file(params, file_start, comm) : Particles{};
  Particles particles;
  if (has_ic_file(params)) particles = read_isolated_ics(params);   // built-in ICs: checked by the constructor
  if (!params.has("time.t_begin")) params.set("time.t_begin", ParamValue(0.0), params.source() + " (default)");
  file_start = params.get_real("time.t_begin");
  return particles;
}

}  // namespace

// Which CUDA device each rank takes, in the log when there are several ranks. The step engine
// and the energy check choose by the same rule (gpu_device_for_rank: a function of the rank's
// place on its node), so the parameters keep the value as configured (-1 stays -1 in
// used_parameters.toml, and a rerun from it spreads its ranks over the GPUs again).
void Simulation::log_gpus() const {
  if (comm_.size() == 1 || params_.get_string("gpu.backend") == "cpu") return;
  const int device = gpu_device_for_rank(params_.get_int("gpu.device"), comm_);
  const std::vector<int> devices = comm_.allgather(device);
  log::info("CUDA device of each rank (when P2P runs on CUDA): {}", fmt::join(devices, " "));
}

Simulation::Simulation(const Params& params, const RunOptions& options, const Comm& comm)
    : Simulation(params, options, comm, nullptr) {}

Simulation::Simulation(const Params& params, const RunOptions& options, const Comm& comm,
                       std::unique_ptr<StepEngine> engine)
    : params_(params),
      comm_(comm),
      cosmology_(periodic_run(params) ? std::optional<Cosmology>(Cosmology::from_params(params)) : std::nullopt),
      file_ics_(initial_file(params_, file_a_, comm_)),
      schedule_(run_schedule(params_, file_a_)) {
  std::uint64_t particles = 0;
  if (!cosmology_) {
    particles = has_ic_file(params_) ? file_ics_.size() : check_isolated_ics(params_);
  } else {
    const auto side = static_cast<std::uint64_t>(params.get_int("box.particles_per_side"));
    particles = has_ic_file(params_) ? comm_.sum<std::uint64_t>(file_ics_.size()) : side * side * side;
  }
  if (cosmology_ && params_.get_string("gravity.solver") != "pm" && params_.get_int("gravity.pm_grid_side") == 0) {
    // "auto": the mesh the run takes (integrate/pm_mesh_choice.hpp), set in the parameters every
    // part of the run reads (and used_parameters.toml records).
    const PmMeshChoice mesh = choose_pm_grid_side(params_, comm_);
    const std::string key = params_.describe("gravity.pm_grid_side");
    params_.set("gravity.pm_grid_side", ParamValue(static_cast<std::int64_t>(mesh.grid_side)));
    log::info("PM mesh: {}^3 ({} = 0, auto: {})", mesh.grid_side, key, mesh.why);
  }
  check_host_memory(params_, particles / static_cast<std::uint64_t>(comm_.size()));   // each rank's share
  log_gpus();
  engine_ = engine ? std::move(engine) : make_step_engine(params_, comm_);
  check_potential_output(particles);
  hierarchical_ = params.get_string("time.stepping") == "hierarchical" && engine_->has_short_range();
  make_clock();
  stepper_ = std::make_unique<BlockStepper>(*engine_, *clock_, hierarchical_ ? kDeepestBin : 0);
  out_dir_ = params.get_string("output.directory");
  validate_outputs(params_);
  if (comm_.size() > 1) {   // every rank the same answer, and the same communicator
    outputs_in_background_ = comm_.min<std::uint64_t>(parallel::concurrent_mpi() ? 1 : 0) == 1;
    if (outputs_in_background_) output_comm_ = comm_.split(0, comm_.rank());
    log::info("outputs over {} ranks: {}", comm_.size(),
              outputs_in_background_ ? "written on a host thread of each rank beside the steps"
                                     : "written between the steps (the MPI library does not provide "
                                       "MPI_THREAD_MULTIPLE)");
  }
  if (cosmology_) energy_ = std::make_unique<EnergyCheck>(params_, comm_);
  options_ = options;
  if (options.restart) {
    // Each rank its own file of the checkpoint (collective: every rank takes the same one).
    restart_ = std::make_unique<Checkpoint>(read_newest_checkpoint(out_dir_, comm_));
    const std::uint64_t saved = comm_.sum<std::uint64_t>(restart_->particles.size());
    run_collectively(comm_, [&] {
      if (saved != particles)
        fail("--restart: the checkpoint '{}'{} holds {} particles, this run has {}", restart_->path,
             restart_->ranks > 1 ? fmt::format(" (with the other files of its {} ranks)", restart_->ranks) : "", saved,
             particles);
      check_restart_parameters(*restart_, params_);
      check_restart_schedule(*restart_, schedule_, params_);
      if (restart_->state.tick != kPmTicks)
        fail("'{}' was not written at the end of a PM step (tick {})", restart_->path, restart_->state.tick);
    });
  } else {
    run_collectively(comm_, [&] {
      if (comm_.is_root()) check_output_folder(options, particles);
    });
  }
}

// The run's clock (integrate/run_clock.hpp): the scale factor with the cosmology's step
// criteria, or an isolated system's Newtonian time.
void Simulation::make_clock() {
  if (!cosmology_) {
    NewtonianLimits limits;
    limits.max_dt = params_.get_real("time.max_dt");
    limits.eta = params_.get_real("time.eta");
    limits.softening = engine_->softening();
    clock_ = std::make_unique<NewtonianClock>(limits);
    return;
  }
  limits_.max_dln_a = params_.get_real("time.max_dln_a");
  limits_.eta = params_.get_real("time.eta");
  limits_.softening = engine_->softening();
  limits_.pm_rms_displacement = params_.get_real("time.pm_rms_displacement");
  limits_.growth_weighted_kicks = params_.get_bool("time.growth_weighted_kicks");
  limits_.growth_weighted_drifts = params_.get_bool("time.growth_weighted_drifts");
  const double spacing = params_.get_real("box.size_mpc_h") / static_cast<double>(params_.get_int("box.particles_per_side"));
  limits_.pm_length = std::min(spacing, PmSettings::from_params(params_).r_s_mpc_h);
  clock_ = std::make_unique<CosmicTimeline>(*cosmology_, limits_);
  if (schedule_.a_end > Cosmology::a_max)
    fail("{}: the run would end at a = {}, beyond the growth tables (a <= {})",
         params_.describe("time.z_final"), schedule_.a_end, Cosmology::a_max);
}

// Before any work: the run never replaces a file it did not write (another run's outputs, a
// GADGET-4 catalogue) unless told to, and the folder's disk takes at least its first output.
void Simulation::check_output_folder(const RunOptions& options, std::uint64_t particles) const {
  std::vector<std::string> files = find_checkpoints(out_dir_);   // another run's (--restart continues it)
  files.push_back(join_path(out_dir_, "used_parameters.toml"));
  if (!has_ic_file(params_) && cosmology_ && params_.get_bool("ic.self_test"))
    files.push_back(join_path(out_dir_, "ic_power.txt"));
  for (int index = 0; index < static_cast<int>(schedule_.a_outputs.size()); ++index)
    for (auto& file : output_file_names(params_, out_dir_, index)) files.push_back(std::move(file));
  refuse_to_replace(files, options.overwrite, fmt::format("orbis run (output folder '{}')", out_dir_),
                    "pass --restart to continue the run that wrote them, --overwrite to replace them, or choose "
                    "another [output] directory");
  check_free_disk(out_dir_, static_cast<std::uint64_t>(output_file_bytes(params_, particles)),
                  fmt::format("one output of {} particles", particles),
                  cosmology_                ? "[box] particles_per_side (or turn off [output] snapshots)"
                  : has_ic_file(params_) ? "turn off [output] snapshots, or choose another [output] directory"
                                         : "[ic] particles (or turn off [output] snapshots)");
}

Simulation::~Simulation() = default;

RunSummary Simulation::run() {
  if (restart_) return resume();
  if (has_ic_file(params_)) return run_from(std::move(file_ics_), file_a_);
  if (!cosmology_) return run_from(make_isolated_ics(params_), schedule_.a_begin);
  const LinearPower power = LinearPower::from_params(params_);
  const IcSettings settings = IcSettings::from_params(params_);
  log::info("linear P(k): {}; sigma8 of the z = 0 spectrum {:.6f}", power.description(), power.sigma8());
  IcReport report;
  Particles particles = make_initial_conditions(settings, *cosmology_, power, &report, comm_);
  log_ic_report(settings, report);
  if (settings.self_test)
    run_collectively(comm_, [&] {
      if (!comm_.is_root()) return;
      make_directories(out_dir_);
      const std::string path = join_path(out_dir_, "ic_power.txt");
      write_text_atomically(path, ic::power_table_text(report.delta_power, report.displacement_power));
      log::info("IC self-test: wrote {}", path);
    });
  ic_power_ = &power;
  RunSummary summary = run_from(std::move(particles), schedule_.a_begin);
  ic_power_ = nullptr;
  return summary;
}

// What every run does first: the output folder, the parameters in force, the engine, the
// ETA's forecast (n_particles_ set).
void Simulation::start(const std::string& how) {
  run_collectively(comm_, [&] {
    if (!comm_.is_root()) return;
    make_directories(out_dir_);
    if (options_.overwrite && !options_.restart)   // another run's checkpoints: --restart would take them for this run's
      for (const auto& old : find_checkpoints(out_dir_)) std::filesystem::remove(old);
    write_text_atomically(join_path(out_dir_, "used_parameters.toml"), params_.to_toml());
  });
  log::info("{}", how);
  log::info("gravity: {}", engine_->describe());
  forecast_ = RunForecast(schedule_, n_particles_, OutputGuess::for_run(params_, n_particles_, comm_.size()),
                          energy_ ? energy_->every() : 0);
  if (!energy_ && !params_.get_bool("analysis.energy_check")) {
    log::info("conservation check off: {} = false", params_.describe("analysis.energy_check"));
    return;
  }
  if (!energy_) {   // an isolated system
    log::info("conservation check: E = K + W, P and L at the start and at every output (W: the direct sum over "
              "every pair, for at most {} = {} particles on the host, {} = {} where the particles are on a GPU)",
              params_.describe("analysis.energy_pairs_max_particles"),
              params_.get_int("analysis.energy_pairs_max_particles"),
              params_.describe("analysis.energy_pairs_max_particles_gpu"),
              params_.get_int("analysis.energy_pairs_max_particles_gpu"));
    return;
  }
  if (hierarchical_)
    forecast_.expect_clustering(clustering_forecast(params_, *cosmology_, schedule_, *engine_, comm_.size(), ic_power_));
  if (energy_->enabled())
    log::info("energy check: the Layzer-Irvine equation d[a(K+W)]/da = -K at the ends of PM steps (every particle "
              "synchronised there): K at each, W at the start, at the outputs{}", energy_->every() > 0 ?
              fmt::format(" and every {} PM steps", energy_->every()) : std::string());
  else
    log::info("energy check off: {}", energy_->why_off());
}

RunSummary Simulation::run_from(Particles particles, double a) {
  Stopwatch run_watch;
  n_particles_ = comm_.sum<std::uint64_t>(particles.size());   // every rank's
  particle_mass_ = particles.mass;
  start("run from " + clock_->describe(a));
  engine_->load(std::move(particles));
  state_ = RunState{};
  state_.a = a;

  ForceStats stats;
  engine_->expect_potential_energy(w_due(a));
  engine_->compute_forces(true, 0, stats);
  check_energy();   // the budget's start
  RunSummary summary;
  if (schedule_.is_output(a)) write_outputs(summary);
  return advance(std::move(summary), run_watch);
}

// The checkpoint's state, and the forces at its positions: every engine computes them from
// the positions alone, bit for bit as the run that wrote it did (step_engine.hpp), so the run
// goes on exactly as it would have.
RunSummary Simulation::resume() {
  Stopwatch run_watch;
  Checkpoint checkpoint = std::move(*restart_);
  restart_.reset();
  run_collectively(comm_, [&] {
    if (!comm_.is_root()) return;
    if (const int removed = remove_stale_temporaries(out_dir_))
      log::info("removed {} temporary file(s) that the interrupted run left in '{}'", removed, out_dir_);
  });
  const std::string from =
      checkpoint.ranks == 1 ? fmt::format("'{}'", checkpoint.path)
                            : fmt::format("the {} files of step {} ('{}', ...)", checkpoint.ranks, checkpoint.state.steps,
                                          checkpoint_path(out_dir_, checkpoint.state.steps, 0, checkpoint.ranks));
  n_particles_ = comm_.sum<std::uint64_t>(checkpoint.particles.size());   // every rank's
  particle_mass_ = checkpoint.particles.mass;
  start(fmt::format("restart from {}: step {}, {}, next output {:03d}", from, checkpoint.state.steps,
                    clock_->describe(checkpoint.state.a),
                    checkpoint.state.output_index));
  forecast_.restore(std::move(checkpoint.costs));
  // The domains before the particles: each rank holds what it held when the checkpoint was
  // written, in the same order, and the first force computation moves none of them.
  // On another rank count, no domains: the first force computation builds them afresh.
  const bool same_ranks = checkpoint.ranks == comm_.size();
  if (!same_ranks)
    log::warn_root("the checkpoint was written by {} rank(s), this run has {}: it continues, but not bitwise as it would "
                   "have on {} (new rank domains, other sums); restart with mpirun -np {} for that", checkpoint.ranks,
                   comm_.size(), checkpoint.ranks, checkpoint.ranks);
  run_collectively(comm_, [&] {
    engine_->restore_domain_state(same_ranks ? checkpoint.domains : std::string(), "'" + checkpoint.path + "'");
  });
  engine_->load(std::move(checkpoint.particles));
  state_ = checkpoint.state;
  ForceStats stats;
  engine_->expect_potential_energy(!state_.energy.started && w_due(state_.a));
  engine_->compute_forces(true, 0, stats);
  if (!state_.energy.started) check_energy();   // the check was off, or the checkpoint older: it starts here
  return advance(RunSummary{}, run_watch);
}

// When [checkpoint] asks for the next checkpoint (every_steps, every_minutes), and the stop
// signals that ask for one at once (installed while the run advances).
struct Simulation::CheckpointClock {
  CheckpointClock(const Params& params, std::int64_t steps)
      : every_steps(params.get_int("checkpoint.every_steps")),
        every_seconds(60 * params.get_real("checkpoint.every_minutes")),
        steps_at_last(steps) {}
  StopSignals signals;
  std::int64_t every_steps = 0;
  double every_seconds = 0;
  std::int64_t steps_at_last = 0;   // the steps at the last checkpoint (or the run's start)
  Stopwatch since_last;
  bool waiting = false;   // a checkpoint is due, but the tree was not fresh
};

// PM steps to a_end, each: its sync points (sync_step: the step, the outputs, the log line),
// then, at its end, a checkpoint where one is asked for (checkpoint_if_asked).
RunSummary Simulation::advance(RunSummary summary, const Stopwatch& run_watch) {
  CheckpointClock clock(params_, state_.steps);
  while (state_.a < schedule_.a_end * (1 - 1e-12)) {
    begin_pm_step();
    while (state_.tick < kPmTicks) sync_step(summary, run_watch.seconds());
    if (state_.a >= schedule_.a_end * (1 - 1e-12)) break;
    if (checkpoint_if_asked(clock, summary)) break;   // a stop signal's: the run stops there
  }
  end_run(summary, run_watch);
  return summary;
}

// At the end of a PM step (every particle synchronised) a checkpoint is written when
// [checkpoint] asks for one, or when a stop signal came (true: the run then stops).
// Over several ranks the ranks decide together, at the end of every PM step: a signal that
// reached any rank, or a checkpoint due on any rank's clock, is one for all (one small
// reduction per PM step), so that every rank writes its file at the same step and all
// stop together. A restart computes the forces at the checkpoint's positions on a fresh
// tree: where the engine's last forces came from a refitted one (the CUDA engine's tree
// policy), the checkpoint waits for the next PM step that builds its tree (the policy's own
// decision, at most [gpu] tree_rebuild_every - 1 PM steps later; asking for a build would
// change the trajectory, and the run would no longer end as one never stopped or
// checkpointed on another clock), and a signal's stop waits with it.
bool Simulation::checkpoint_if_asked(CheckpointClock& clock, RunSummary& summary) {
  int signal = clock.signals.received();
  bool due = (clock.every_steps > 0 && state_.steps - clock.steps_at_last >= clock.every_steps) ||
             (clock.every_seconds > 0 && clock.since_last.seconds() >= clock.every_seconds);
  if (comm_.size() > 1) {
    signal = comm_.max(signal);   // any rank's (the largest number, when several differ)
    due = comm_.any(due);
  }
  if (signal == 0 && !due) return false;
  const bool fresh = comm_.all(engine_->forces_from_fresh_tree());
  if (!fresh) {
    if (!clock.waiting)
      log::info("checkpoint{} due at {}, but this PM step's short-range forces came from a refitted tree, "
                "which a restart would not have: it waits for the next PM step that builds the tree",
                signal != 0 ? fmt::format(" ({} received)", StopSignals::name(signal)) : std::string(),
                clock_->describe(state_.a));
    clock.waiting = true;
    return false;
  }
  clock.waiting = false;
  outputs_.finish(summary.outputs);   // a checkpoint stands for every output before it
  Stopwatch write_watch;
  const std::string path = write_checkpoint(out_dir_, engine_->particles(), state_, forecast_.costs(), params_,
                                            engine_->domain_state(), comm_);
  const std::string what =
      comm_.size() == 1 ? fmt::format("'{}'", path)
                        : fmt::format("the checkpoint of step {} ({} files, one per rank: '{}', ...)", state_.steps,
                                      comm_.size(), checkpoint_path(out_dir_, state_.steps, 0, comm_.size()));
  log::info("{}{} written in {:.2f} s", comm_.size() == 1 ? "checkpoint " : "", what, write_watch.seconds());
  clock.steps_at_last = state_.steps;
  clock.since_last.restart();
  if (signal == 0) return false;
  summary.stopped_by = StopSignals::name(signal);
  log::info("{} received: stopped at {} after writing {}; `orbis run FILE --restart` continues{}",
            summary.stopped_by, clock_->describe(state_.a), what,
            comm_.size() > 1 ? fmt::format(" (on {} ranks)", comm_.size()) : std::string());
  return true;
}

// The run's end (or its stop): the last output on disk, the summary and its log line.
void Simulation::end_run(RunSummary& summary, const Stopwatch& run_watch) {
  if (outputs_.busy()) {
    Stopwatch wait_watch;
    outputs_.finish(summary.outputs);
    log::info("waited {:.2f} s for the last output", wait_watch.seconds());
  }
  const double n = static_cast<double>(n_particles_);
  summary.steps = state_.steps;
  summary.a_final = state_.a;
  summary.seconds = run_watch.seconds();
  summary.particle_steps = state_.particle_steps;
  summary.full_step_equivalents = n > 0 ? state_.particle_steps / n : 0;
  log::info("{}: {} steps to {} in {:.1f} s; {:.2g} particle-steps ({:.0f} full-step equivalents); "
            "{} files written", summary.stopped_by.empty() ? "finished" : "stopped", summary.steps,
            cosmology_ ? fmt::format("z = {:.4f}", 1 / state_.a - 1) : fmt::format("t = {:.6g}", state_.a),
            summary.seconds, summary.particle_steps, summary.full_step_equivalents, summary.outputs.size());
  if (const std::string tree = engine_->tree_summary(); !tree.empty()) log::info("{}", tree);
}

// A PM step begins with every particle synchronised. Its length: hierarchical steps take the
// PM step's own criterion (the particles' criterion sets their bins); a global step the most
// accelerated particle's criterion.
void Simulation::begin_pm_step() {
  const double a = state_.a;
  stepper_->begin_pm_step(state_, clock_->next_pm_end(a, schedule_.next_after(a), *engine_, hierarchical_));
  engine_->expect_potential_energy(w_due(state_.pm_a_end));   // its end's forces, then the check
  if (clock_->comoving()) forecast_.pm_step_begun(a, state_.pm_a_end);   // the ETA's model is in ln a
}

// One sync point: the step (BlockStepper), the outputs due at its PM step's end, the log line,
// and at a PM step's end the energy check. (Checkpoints: advance(), between PM steps.)
void Simulation::sync_step(RunSummary& summary, double elapsed_seconds) {
  outputs_.poll(summary.outputs);   // an output's error stops the run here
  Stopwatch step_watch;
  reset_peak_resident_bytes();   // the log's peak is this step's
  ForceStats stats;
  const double a_old = state_.a;
  const SyncPoint sync = stepper_->sync_step(state_, stats);
  const double step_seconds = step_watch.seconds();
  state_.seconds += step_seconds;
  forecast_.sync_point(step_seconds, sync, deepest_bin(state_.bins), stats.times);

  Stopwatch io_watch;
  if (sync.pm_end && schedule_.is_output(state_.a)) write_outputs(summary);
  const double eta = log_step(sync, stats, state_.a - a_old, io_watch.seconds(), step_watch.seconds(), elapsed_seconds);
  if (sync.pm_end) check_energy();
  const double progress = clock_->progress(state_.a, schedule_.a_begin, schedule_.a_end);
  if (comm_.is_root()) print_progress_bar(progress, eta);
}

// The step's log line (integrate/step_log.hpp), with the ETA, which it returns.
double Simulation::log_step(const SyncPoint& sync, const ForceStats& stats, double da, double io_seconds,
                          double step_seconds, double elapsed_seconds) const {
  StepReport report;
  report.step = state_.steps;
  report.a = state_.a;
  report.da = da;
  report.io_seconds = io_seconds;
  report.seconds = step_seconds;
  report.particles = n_particles_;
  report.active = sync.active;
  report.bins = state_.bins;
  report.particle_steps = state_.particle_steps;
  report.elapsed = elapsed_seconds + report.seconds;
  report.comoving = clock_->comoving();
  if (clock_->comoving()) {
    report.eta_seconds = forecast_.remaining_seconds(state_, outputs_.timed(), outputs_.mean_seconds());
  } else {   // the forecast's model is in ln a: an isolated system's ETA is the pace so far
    const double done = clock_->progress(state_.a, schedule_.a_begin, schedule_.a_end);
    report.eta_seconds = done > 0 ? report.elapsed * (1 - done) / done : -1;
  }
  report.force = &stats;
  report.host_peak_bytes = peak_resident_bytes();
  if (sync.pm_end) {   // every particle synchronised: the total momentum means something
    const Vec3d p = engine_->total_momentum();
    const double p_rms = engine_->rms_momentum();
    if (std::isfinite(p.x) && p_rms > 0) report.momentum_ratio = norm(p) / (static_cast<double>(n_particles_) * p_rms);
  }
  log::info("{}", step_line(report));
  return report.eta_seconds;
}

// Whether the energy check at scale factor a (the start, or the end of PM step
// state_.pm_steps) computes W: where the budget starts, at the outputs and the run's end, and
// every [analysis] energy_check_every PM steps.
bool Simulation::w_due(double a) const {
  if (!energy_ || !energy_->enabled()) return false;
  const bool landmark = schedule_.is_output(a) || a >= schedule_.a_end * (1 - 1e-12);
  return !state_.energy.started || energy_->due(state_.pm_steps, landmark);
}

// At the start and at the ends of PM steps (every particle synchronised): K into the
// Layzer-Irvine budget, and where due W and the residual, logged (integrate/energy.hpp).
// Over several ranks K and W are reduced over the ranks (W collectively: every rank takes
// the same decision from the same global state), so every rank keeps the same budget.
void Simulation::check_energy() {
  if (!energy_) return check_conservation();
  if (!energy_->enabled()) return;
  const bool with_w = w_due(state_.a);
  const double p_rms = engine_->rms_momentum();
  const double sum_p2 = p_rms * p_rms * static_cast<double>(n_particles_);
  Stopwatch watch;
  PotentialEnergy w;
  if (with_w) {
    w = energy_->potential(*engine_);
    forecast_.energy_check_timed(watch.seconds());
  }
  const bool starting = !state_.energy.started;
  const double residual = EnergyCheck::update(state_.energy, state_.a, sum_p2, particle_mass_, with_w ? &w : nullptr);
  if (!with_w) return;
  const double ak = scaled_kinetic_energy(sum_p2, particle_mass_, state_.a);
  log::info("energy check at a = {:.6g} (PM step {}{}): aK = {:.6e}, aW = {:.6e} (mesh {:.4e}, pairs {:.4e}, self "
            "{:.4e}, background {:.4e}), int K da = {:.6e}; Layzer-Irvine residual {:+.3e} of |aW| ({:.2f} s)",
            state_.a, state_.pm_steps, starting ? ", the budget starts" : "", ak, w.total(), w.mesh, w.pairs, w.self,
            w.background, state_.energy.k_integral, residual, watch.seconds());
  energy_checks_.push_back(EnergyCheckRecord{state_.pm_steps, state_.a, ak, w.total(), residual});
  energy_checks_from_forces_ += energy_->last_mesh_from_forces();
  if (std::abs(residual) > energy_->warning_threshold() && !energy_warned_) {
    energy_warned_ = true;
    log::warn_root("the Layzer-Irvine residual {:+.3e} exceeds [analysis] energy_drift_warning = {} of |aW| at a = "
                   "{:.6g}: the time steps ([time] eta, max_dln_a) or the force accuracy may be too coarse",
                   residual, energy_->warning_threshold(), state_.a);
  }
}

// An isolated system's check (integrate/conservation.hpp), at its start and at every output
// (the end is one): E = K + W, P and L, and their drifts from the start, in the log and in
// conservation_checks(). W from the direct pair sum, for up to [analysis]
// energy_pairs_max_particles particles.
void Simulation::check_conservation() {
  const bool landmark = conservation_checks_.empty() || schedule_.is_output(state_.a) ||
                        state_.a >= schedule_.a_end * (1 - 1e-12);
  if (!params_.get_bool("analysis.energy_check") || !landmark) return;
  Stopwatch watch;
  // W where the particles are (the CUDA engine's device) when the engine sums it, else on
  // the host from their copy; each within its own particle limit.
  std::optional<double> pairs;
  const Particles& particles = engine_->particles();
  const std::vector<double> weights = mass_weights(particles);
  const std::vector<double>* w = weights.empty() ? nullptr : &weights;
  if (const std::optional<std::vector<double>> phi = engine_potentials()) pairs = pair_sum_of_potentials(*phi, w);
  if (!pairs && n_particles_ <= static_cast<std::uint64_t>(params_.get_int("analysis.energy_pairs_max_particles")))
    pairs = softened_pair_sum(particles.pos, engine_->softening(), w);
  const bool with_w = pairs.has_value();
  const ConservedQuantities now = conserved_quantities(particles, physical_units(params_).g, pairs);
  const ConservationRecord r =
      conservation_record(state_.a, now, conservation_checks_.empty() ? nullptr : &conservation_checks_.front().now);
  conservation_checks_.push_back(r);
  log::info("{} ({:.2f} s)", conservation_line(r), watch.seconds());
  const double warning = params_.get_real("analysis.energy_drift_warning");
  if (with_w && std::abs(r.energy_drift) > warning && !energy_warned_) {
    energy_warned_ = true;
    log::warn_root("the energy drift {:+.3e} exceeds [analysis] energy_drift_warning = {} at t = {:.6g}: the time "
                   "steps ([time] eta, max_dt) or the force accuracy ([gravity] theta) may be too coarse",
                   r.energy_drift, warning, state_.a);
  }
}

// The softened potential sums where the particles are (StepEngine::softened_potentials), when
// the engine makes them and the run is within [analysis] energy_pairs_max_particles_gpu; else
// nullopt (the caller sums on the host): W's and the snapshots' Potential's one rule.
std::optional<std::vector<double>> Simulation::engine_potentials() {
  if (n_particles_ > static_cast<std::uint64_t>(params_.get_int("analysis.energy_pairs_max_particles_gpu")))
    return std::nullopt;
  return engine_->softened_potentials();
}

void Simulation::check_potential_output(std::uint64_t particles) const {
  if (!snapshot_potentials(params_)) return;
  const auto host = static_cast<std::uint64_t>(params_.get_int("analysis.energy_pairs_max_particles"));
  const auto gpu = engine_->sums_potentials()
                       ? static_cast<std::uint64_t>(params_.get_int("analysis.energy_pairs_max_particles_gpu"))
                       : 0;
  if (particles <= std::max(host, gpu)) return;
  fail("{} = true: each particle's potential is the direct sum over every other particle at every output, which "
       "this run allows for at most {} particles ({} = {}{}), and it has {}; raise that limit (the sum costs N^2 "
       "pair terms an output) or set output.potential = false",
       params_.describe("output.potential"), std::max(host, gpu), params_.describe("analysis.energy_pairs_max_particles"),
       host,
       engine_->sums_potentials()
           ? fmt::format(", {} = {} where the particles are on the GPU",
                         params_.describe("analysis.energy_pairs_max_particles_gpu"), gpu)
           : std::string(),
       particles);
}

// [output] potential: each particle's -G m phi~_i (integrate/conservation.hpp) where the
// particles are when the engine sums them within its limit, else on the host (the run's
// start checked that one of the two limits holds).
std::vector<double> Simulation::particle_potentials() {
  Stopwatch watch;
  const Particles& particles = engine_->particles();
  const std::vector<double> weights = mass_weights(particles);
  std::optional<std::vector<double>> phi = engine_potentials();
  const bool on_engine = phi.has_value();
  if (!phi) phi = softened_potentials(particles.pos, engine_->softening(), weights.empty() ? nullptr : &weights);
  const double g_m = physical_units(params_).g * particles.mass;
  for (double& v : *phi) v *= -g_m;
  log::info("particle potentials for the snapshot: the direct sum over every pair {} ({:.2f} s)",
            on_engine ? "where the particles are" : "on the host", watch.seconds());
  return std::move(*phi);
}

void Simulation::write_outputs(RunSummary& summary) {
  Stopwatch watch;
  OutputContext context{params_, cosmology_ ? &*cosmology_ : nullptr, out_dir_, state_.output_index, state_.a};
  const bool with_acc = params_.get_bool("output.accelerations");
  ParticleFields fields;
  if (snapshot_potentials(params_)) fields.potentials = particle_potentials();
  std::vector<std::string> files;
  if (outputs_in_background_) {
    // On a host thread, from a copy, while the steps go on (integrate/outputs.hpp); P(k) and
    // the FoF links from the engine where it can make them where the particles are, here on
    // the main thread (over ranks the FoF ghost import is collective on comm_), before the
    // output's thread starts. Over ranks each rank's thread writes its share, collectively on
    // output_comm_ (the same ranks in the same order as comm_).
    // The last output's particles, if it is done, for the engine's next host copy.
    outputs_.poll(summary.outputs);
    engine_->recycle(outputs_.take_spent());
    std::optional<PowerSpectrum> pk = engine_power_spectrum(params_, *engine_);
    std::optional<fof::LocalLinks> fof_links = engine_fof_links(params_, *engine_, comm_);
    if (with_acc) fields.accelerations = engine_->accelerations();
    outputs_.start(context, engine_->particles_copy(), std::move(fields), summary.outputs, std::move(pk), output_comm_,
                   std::move(fof_links));
  } else {
    // Collective: each rank's particles where they are (integrate/outputs.hpp); P(k) and the
    // FoF links from the engine where it can make them where the particles are (collective too).
    const std::optional<PowerSpectrum> pk = engine_power_spectrum(params_, *engine_);
    const std::optional<fof::LocalLinks> fof_links = engine_fof_links(params_, *engine_, comm_);
    if (with_acc) fields.accelerations = engine_->accelerations();
    files = write_run_outputs(context, engine_->particles(), fields, comm_, pk ? &*pk : nullptr,
                              fof_links ? &*fof_links : nullptr);
  }
  summary.outputs.insert(summary.outputs.end(), files.begin(), files.end());
  ++state_.output_index;
  forecast_.output_written(watch.seconds());
}

int run_simulation_command(const std::string& file, const std::vector<std::string>& overrides,
                           const RunOptions& options) {
  Params params = Params::load(file, overrides);
  log::info("{}", banner("run " + file));
  Simulation simulation(params, options);   // every check before any work
  for (const auto& [name, value] : params.flat()) log::info("  {} = {}", name, value);
  simulation.run();
  return 0;
}

}  // namespace orbis
