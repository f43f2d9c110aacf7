// What the run writes at each output scale factor: the snapshot (GADGET-4 layout), the power
// spectrum (text + HDF5) and the FoF halo catalogue (fof_tab layout), as the parameters ask.
#pragma once
#include <cstdint>
#include <future>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/fof_ranks.hpp"
#include "analysis/power_spectrum.hpp"
#include "core/comm.hpp"
#include "core/particles.hpp"

namespace orbis {

class Params;
class Cosmology;
class StepEngine;

struct OutputContext {
  const Params& params;
  const Cosmology* cosmology;   // null: an isolated system (no power spectrum, no haloes; `a` is the time t)
  const std::string& directory;
  int index;      // 0, 1, ... : snapshot_000.hdf5, ...
  double a;
};

// Checks the output settings before any work: the estimators' settings, and that the folder
// can be created and written.
void validate_outputs(const Params& params);
// The files output number `index` writes in `directory`, as the parameters ask: the one list
// (write_run_outputs writes exactly these), so that a run can check them before any work.
std::vector<std::string> output_file_names(const Params& params, const std::string& directory, int index);
// The bytes of one output's files for `particles` particles, an upper estimate (the snapshot
// dominates).
double output_file_bytes(const Params& params, std::uint64_t particles);
// One particle's bytes in a snapshot and in the copy the background writer takes: position
// and velocity in double, a 64-bit ID, the acceleration when [output] accelerations, the
// potential when [output] potential, and an isolated system's mass (it may have individual
// masses).
double particle_record_bytes(const Params& params);
// Whether the snapshots hold each particle's potential ([output] potential, an isolated
// system's key: false in a box, which has no value for it).
bool snapshot_potentials(const Params& params);

// An output's per-particle fields beside the particles, in their order: the accelerations
// when [output] accelerations, the gravitational potentials when [output] potential (an
// isolated system's); otherwise empty, and not written.
struct ParticleFields {
  std::vector<Vec3d> accelerations;
  std::vector<double> potentials;
};

// Collective over comm (each rank passes its own particles and fields): writes the
// outputs at context.a and returns the files written (the same list on every rank): the
// snapshot in ID order, each file written by one rank from its share (io/snapshot.hpp); the
// power spectrum measured on the mesh in slabs (analysis/power_spectrum.hpp) and the halo
// catalogue of groups linked across ranks (analysis/fof_ranks.hpp), both written by rank 0.
// No rank gathers the particles. `measured`: the power spectrum already measured where the
// particles are (engine_power_spectrum), written instead of measuring it here (its
// linear column filled in here). `fof_links`: the groups linked already where the particles
// are (engine_fof_links: on one rank every particle's group, over ranks each rank's particles
// and ghosts linked on its GPU), from which the catalogue is made instead of linking here.
std::vector<std::string> write_run_outputs(const OutputContext& context, const Particles& particles,
                                           const ParticleFields& fields, const Comm& comm = Comm::self(),
                                           const PowerSpectrum* measured = nullptr,
                                           const fof::LocalLinks* fof_links = nullptr);

// The output's power spectrum measured by the engine where the particles are, when the
// parameters ask for one and the engine measures it (StepEngine::power_spectrum: the CUDA
// engine, from the device positions, on one GPU or over the ranks' GPUs, in milliseconds
// instead of the host thread's seconds); else nullopt, and write_run_outputs measures it from
// its copy. Over ranks collective over the engine's ranks, the same answer on every rank.
std::optional<PowerSpectrum> engine_power_spectrum(const Params& params, StepEngine& engine);

// The output's friends-of-friends links made by the engine where the particles are, when the
// parameters ask for a halo catalogue and the engine links them; else nullopt, and
// write_run_outputs links them from its copy. The catalogue is the same either way.
// One rank: every particle's group (StepEngine::fof_labels: the CUDA engine, on its GPU).
// Over ranks (collective over comm, the run's: this is called on the main thread, before the
// output's thread starts, while the steps' device work is not running): the ghosts imported
// (fof::import_ghosts), then this rank's particles and ghosts linked by the engine
// (StepEngine::fof_labels_with_ghosts: the CUDA engine, on the rank's GPU); where a rank's
// engine cannot (not enough device memory) its links stay empty and the output's thread links
// them on the host; the merge across ranks and the gather stay on the output's thread.
std::optional<fof::LocalLinks> engine_fof_links(const Params& params, StepEngine& engine,
                                                const Comm& comm = Comm::self());

// Writes one output at a time on a host thread, from its own copy of the particles, while the
// run goes on (the snapshot, P(k) and FoF of a 256^3 run take seconds of host time that the
// steps on a GPU do not need). The files stay atomic (write_run_outputs). An output's error
// comes back from the next poll() or finish(). The run calls finish() before every checkpoint
// and at its end, so a checkpoint never stands for an output that is not complete on disk.
// The context's references must outlive the output (the Simulation's members).
class BackgroundOutputs {
 public:
  BackgroundOutputs() = default;
  BackgroundOutputs(const BackgroundOutputs&) = delete;
  BackgroundOutputs& operator=(const BackgroundOutputs&) = delete;
  ~BackgroundOutputs();   // waits for the output in progress (its error, if any, is logged)

  // Starts output context.index once the one in progress has finished (its files go to
  // `files`); power_spectrum: measured already (engine_power_spectrum), written as it is.
  // Over several ranks `comm` is a communicator of the outputs' own (Comm::split of the run's,
  // made by every rank), whose collectives the writer threads make while the main threads
  // make theirs (MPI_THREAD_MULTIPLE: parallel::concurrent_mpi); every rank starts, finishes
  // and checkpoints the same outputs, so the collectives match.
  // fof_links: the groups linked already (engine_fof_links), made into the catalogue as they
  // are; over ranks made on a comm of the same ranks as `comm`, for these particles.
  void start(const OutputContext& context, Particles particles, ParticleFields fields,
             std::vector<std::string>& files, std::optional<PowerSpectrum> power_spectrum = std::nullopt,
             const Comm& comm = Comm::self(), std::optional<fof::LocalLinks> fof_links = std::nullopt);
  // Appends the files of an output that has finished to `files`; never waits.
  void poll(std::vector<std::string>& files);
  // Waits for the output in progress, if any, and appends its files to `files`.
  void finish(std::vector<std::string>& files);
  bool busy() const { return pending_.valid(); }
  // The particles of the last output finished (empty if none or taken): for the engine to
  // reuse (StepEngine::recycle).
  Particles take_spent() { return std::exchange(spent_, Particles{}); }
  // The outputs finished so far and their mean wall seconds on the writer's thread (the ETA's
  // wait for the last one).
  int timed() const { return timed_; }
  double mean_seconds() const { return timed_ > 0 ? seconds_ / timed_ : 0.0; }

 private:
  struct Written {
    std::vector<std::string> files;
    double seconds = 0;
    Particles spent;   // the particles written, handed back
  };
  std::future<Written> pending_;
  Particles spent_;
  double seconds_ = 0;
  int timed_ = 0;
};

}  // namespace orbis
