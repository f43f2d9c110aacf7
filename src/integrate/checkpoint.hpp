// Checkpoints: everything a run needs to continue bitwise where it stopped, written at the
// end of a PM step (every particle synchronised): the particles (positions, momenta, IDs,
// time bins, mass), the run loop's state (RunState: scale factor, steps, PM step, output
// index, the step-cost history) and the parameters in force with a hash of the ones that
// change the trajectory. No accelerations: a restart recomputes the forces at the saved
// positions, which every engine must reproduce bit for bit (step_engine.hpp). One
// checksummed file each (io/checked_file.hpp), checkpoint_SSSSSSSS.orbis by step count,
// written atomically; the previous one is kept until the next is complete.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/particles.hpp"
#include "integrate/output_schedule.hpp"
#include "integrate/run_state.hpp"

namespace orbis {

class Params;

struct Checkpoint {
  std::string path;
  Particles particles;
  RunState state;
  std::vector<std::pair<std::string, std::string>> parameters;   // (section.key, value) in force
  std::uint64_t physics_hash = 0;
};

// checkpoint_SSSSSSSS.orbis in `directory` for a run `steps` sync points in.
std::string checkpoint_path(const std::string& directory, std::int64_t steps);
// The checkpoints in `directory`, newest (most steps) first.
std::vector<std::string> find_checkpoints(const std::string& directory);

// Writes the checkpoint atomically, then removes the ones older than the previous one.
// Returns its path.
std::string write_checkpoint(const std::string& directory, const Particles& particles, const RunState& state,
                             const Params& params);
// Reads one checkpoint, its checksum verified (an Error otherwise).
Checkpoint read_checkpoint(const std::string& path);
// The newest checkpoint in `directory` that reads back whole; each newer one that does not
// is named in a warning. An Error when there is none.
Checkpoint read_newest_checkpoint(const std::string& directory);

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
