// Checkpoints: everything a run needs to continue bitwise where it stopped, written at the
// end of a PM step (every particle synchronised): the particles (positions, momenta, IDs,
// time bins, mass; an isolated system's individual masses and types where it has them), the run loop's state (RunState: scale factor, steps, PM step, output
// index), the ETA's measured step costs (MeasuredCosts), the step engine's rank domains (several ranks) and the
// parameters in force with a hash of the ones that change the trajectory. No accelerations:
// a restart recomputes the forces at the saved positions, which every engine must reproduce
// bit for bit (step_engine.hpp). One checksummed file (io/checked_file.hpp) per rank, written
// atomically: checkpoint_SSSSSSSS.orbis on one rank (SSSSSSSS: the steps), on N ranks one
// share per rank, checkpoint_SSSSSSSS_rank_RRRR_of_NNNN.orbis, each holding its rank's
// particles where they are (no rank gathers them). A checkpoint counts when all its files
// are there and read back whole; the previous complete one is kept until the next one is.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/particles.hpp"
#include "integrate/cost_model.hpp"
#include "integrate/output_schedule.hpp"
#include "integrate/run_state.hpp"

namespace orbis {

class Params;

struct Checkpoint {
  std::string path;           // this rank's file (the first of them; rank 0's when none)
  int rank = 0, ranks = 1;    // the checkpoint of `ranks` ranks, and rank `rank`'s file of it (-1: none, or
                              // several, when this run has another rank count)
  Particles particles;
  RunState state;
  MeasuredCosts costs;        // the ETA's (integrate/run_forecast.hpp)
  std::vector<std::pair<std::string, std::string>> parameters;   // (section.key, value) in force
  std::uint64_t physics_hash = 0;
  std::string domains;        // StepEngine::domain_state() of the rank that wrote it
};

// The file of rank `rank` of `ranks` of the checkpoint `steps` sync points into a run, in
// `directory` (one rank: checkpoint_SSSSSSSS.orbis).
std::string checkpoint_path(const std::string& directory, std::int64_t steps, int rank = 0, int ranks = 1);
// Every checkpoint file in `directory` (whole or not, of any rank count), newest (most
// steps) first.
std::vector<std::string> find_checkpoints(const std::string& directory);

// Collective over comm: each rank writes its file of the checkpoint atomically; once every
// rank's is complete, the checkpoints older than the previous complete one are removed (by
// rank 0). `domains`: StepEngine::domain_state(). Returns this rank's path; an Error on
// every rank when any rank's write failed.
std::string write_checkpoint(const std::string& directory, const Particles& particles, const RunState& state,
                             const MeasuredCosts& costs, const Params& params, const std::string& domains = {},
                             const Comm& comm = Comm::self());
// Reads one checkpoint, its checksum verified (an Error otherwise).
Checkpoint read_checkpoint(const std::string& path);
// Collective over comm: this rank's file of the newest checkpoint in `directory` whose
// files are all there and all read back whole (each newer one that is not is named in a
// warning; files of an interrupted write are ignored); an Error on every rank when there is
// none. A checkpoint of another rank count N is read too: rank r takes the particles of the
// files f with f % comm.size() == r (none when r >= N), the run state and costs of its first file
// (rank 0's when none), and no domains: the run goes on, but not bitwise as it would have
// on N ranks (Checkpoint::ranks tells).
Checkpoint read_newest_checkpoint(const std::string& directory, const Comm& comm = Comm::self());

// The parameters that change the trajectory: all but the output list and z_final ([time]
// output_redshifts, z_final), [output], [analysis], [checkpoint] and where P2P runs ([gpu]
// backend, device, memory_limit_gib). Their hash is what a checkpoint records.
bool is_physics_parameter(const std::string& name);
std::uint64_t physics_hash(const std::vector<std::pair<std::string, std::string>>& parameters);
// An Error naming every physics parameter whose value in `now` differs from the checkpoint's
// (with both values): a restart continues the same run or none.
void check_restart_parameters(const Checkpoint& checkpoint, const Params& now);
// An Error when the output schedule cannot continue the checkpoint's run: z_final at or
// before the checkpoint, or outputs before it that differ in number from those the run wrote
// (their files are numbered; outputs after the checkpoint may change freely).
void check_restart_schedule(const Checkpoint& checkpoint, const OutputSchedule& schedule, const Params& now);

}  // namespace orbis
