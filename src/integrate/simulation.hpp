// The run: ICs, the KDK loop with block time steps (or one global step), and the outputs
// (snapshot, power spectrum, halo catalogue) at every output redshift. It owns the run's
// state (RunState) and the step engine that holds the particles; no global state.
//
// The same loop runs an isolated system ([gravity] boundary = "vacuum"): its clock
// (integrate/run_clock.hpp) is Newtonian time instead of the scale factor (RunState::a then
// holds t), its engine the vacuum one (integrate/vacuum_engine.hpp), its ICs the built-in
// spheres or a GADGET file of any types and masses (ic/isolated_ics.hpp), its outputs snapshots alone, and its check the conserved
// quantities (integrate/conservation.hpp) instead of the Layzer-Irvine equation.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/params.hpp"
#include "core/particles.hpp"
#include "cosmology/cosmology.hpp"
#include "integrate/block_stepper.hpp"
#include "integrate/conservation.hpp"
#include "integrate/run_clock.hpp"
#include "integrate/run_forecast.hpp"
#include "integrate/output_schedule.hpp"
#include "integrate/outputs.hpp"
#include "integrate/run_state.hpp"
#include "integrate/step_engine.hpp"
#include "integrate/timestep.hpp"
#include "core/timer.hpp"

namespace orbis {

class LinearPower;

struct RunSummary {
  std::int64_t steps = 0;           // sync points
  double a_final = 0;
  double seconds = 0;
  double particle_steps = 0;        // force evaluations (active particles summed over steps)
  double full_step_equivalents = 0; // particle_steps / particles
  std::vector<std::string> outputs; // files written
  std::string stopped_by;           // the signal that stopped the run at a checkpoint ("" : ran to the end)
};

struct Checkpoint;
class EnergyCheck;

// One Layzer-Irvine check as the log gives it (integrate/energy.hpp), the same on every rank.
struct EnergyCheckRecord {
  std::int64_t pm_steps = 0;   // at the end of this PM step (0: the run's start)
  double a = 0;
  double ak = 0, aw = 0;       // a K and a W, (km/s)^2 times 1e10 Msun/h
  double residual = 0;         // (C(a) - C(a0)) / max(|a W|, a K)
};

// How `orbis run` was asked to treat the output folder.
struct RunOptions {
  bool overwrite = false;   // replace files of the folder that this run writes (else: refuse before any work)
  bool restart = false;     // continue from the newest complete checkpoint in the output folder
};

class Simulation {
 public:
  // Validates every parameter and their combinations, and checks the output folder (writable,
  // room for an output, no file the run would replace unless `options.overwrite`); with
  // `options.restart`, reads the newest complete checkpoint and checks its parameters against
  // these. No work. Over several ranks (comm): each holds its share of the particles
  // (step_engine.hpp, the host engine); ICs are made in shares, outputs gathered on rank 0,
  // logs from rank 0; each rank writes its own file of a checkpoint (checkpoint.hpp).
  explicit Simulation(const Params& params, const RunOptions& options = {}, const Comm& comm = Comm::world());
  // The same with a given step engine, made for these parameters (tests: an engine that
  // wraps another one).
  Simulation(const Params& params, const RunOptions& options, const Comm& comm, std::unique_ptr<StepEngine> engine);
  ~Simulation();

  // Generates the ICs (built-in, or [ic] file), or takes the checkpoint's state, and runs to
  // z_final; checkpoints as [checkpoint] asks, and on SIGTERM, SIGINT, SIGUSR1 (then stops).
  RunSummary run();
  // Runs from the given state at scale factor a (tests, restarts).
  RunSummary run_from(Particles particles, double a);

  // This rank's particles now (on the host: the CUDA engine downloads them).
  const Particles& particles() { return engine_->particles(); }
  const Cosmology& cosmology() const { return *cosmology_; }   // periodic runs only
  const RunState& state() const { return state_; }
  // The energy checks this Simulation logged, in order (a restart's from the restart on).
  const std::vector<EnergyCheckRecord>& energy_checks() const { return energy_checks_; }
  // How many of them took W's mesh term from the force pass before (the engine's, announced
  // by StepEngine::expect_potential_energy) rather than a pass of their own.
  std::int64_t energy_checks_from_forces() const { return energy_checks_from_forces_; }
  // An isolated system's conservation checks (the start, then every output), in order.
  const std::vector<ConservationRecord>& conservation_checks() const { return conservation_checks_; }

 private:
  RunSummary resume();
  void start(const std::string& how);
  // The run loop: PM steps of sync points to a_end, a checkpoint at a PM step's end where
  // one is asked for (true: a stop signal's, the run stops), the run's end.
  RunSummary advance(RunSummary summary, const Stopwatch& run_watch);
  struct CheckpointClock;
  bool checkpoint_if_asked(CheckpointClock& clock, RunSummary& summary);
  void end_run(RunSummary& summary, const Stopwatch& run_watch);
  void begin_pm_step();
  // One sync point: the step, its outputs, its log line (log_step: returns the ETA).
  void sync_step(RunSummary& summary, double elapsed_seconds);
  double log_step(const SyncPoint& sync, const ForceStats& stats, double da, double io_seconds, double step_seconds,
                  double elapsed_seconds) const;
  void write_outputs(RunSummary& summary);
  // [output] potential: each particle's gravitational potential (the direct sum), and the
  // start's check that the run's particles are within its limits.
  std::vector<double> particle_potentials();
  std::optional<std::vector<double>> engine_potentials();
  void check_potential_output(std::uint64_t particles) const;
  void log_gpus() const;
  void check_energy();
  bool w_due(double a) const;
  void check_conservation();
  void make_clock();
  void check_output_folder(const RunOptions& options, std::uint64_t particles) const;

  Params params_;
  Comm comm_;
  std::optional<Cosmology> cosmology_;   // periodic runs
  double file_a_ = 0;        // [ic] file's scale factor, or an isolated system's start time; before
  Particles file_ics_;       // file_ics_, whose initialiser sets it (members initialise in this order)
  OutputSchedule schedule_;
  StepLimits limits_;
  const LinearPower* ic_power_ = nullptr;   // the P(k) of the ICs run() made (during run() only)
  bool hierarchical_ = true;   // time.stepping (a PM-only run steps globally)
  std::unique_ptr<StepEngine> engine_;
  std::unique_ptr<RunClock> clock_;
  std::unique_ptr<BlockStepper> stepper_;
  RunState state_;
  std::size_t n_particles_ = 0;
  double particle_mass_ = 0;
  std::unique_ptr<EnergyCheck> energy_;   // the Layzer-Irvine check (integrate/energy.hpp); periodic runs
  std::vector<ConservationRecord> conservation_checks_;   // isolated systems
  bool energy_warned_ = false;
  std::vector<EnergyCheckRecord> energy_checks_;
  std::int64_t energy_checks_from_forces_ = 0;
  std::string out_dir_;
  RunOptions options_;
  std::unique_ptr<Checkpoint> restart_;   // with --restart, until run() takes it
  RunForecast forecast_;                  // the step log's ETA (integrate/run_forecast.hpp)
  // Outputs on a host thread beside the steps: always on one rank; over ranks when MPI lets a
  // rank's threads make collectives at once, on a communicator of their own.
  bool outputs_in_background_ = true;
  Comm output_comm_;
  BackgroundOutputs outputs_;   // last: it waits for an output, which reads the members above
};

// `orbis run FILE [--set ...]`: everything above, with the banner and the parameter echo.
int run_simulation_command(const std::string& file, const std::vector<std::string>& overrides,
                           const RunOptions& options = {});

}  // namespace orbis
