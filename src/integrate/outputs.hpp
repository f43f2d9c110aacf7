// What the run writes at each output scale factor: the snapshot (GADGET-4 layout), the power
// spectrum (text + HDF5) and the FoF halo catalogue (fof_tab layout), as the parameters ask.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/particles.hpp"

namespace orbis {

class Params;
class Cosmology;

struct OutputContext {
  const Params& params;
  const Cosmology& cosmology;
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
// Collective over comm (each rank passes its own particles and accelerations): writes the
// outputs at context.a and returns the files written (the same list on every rank). Rank 0
// writes the files: the snapshot of the gathered particles, the power spectrum measured on
// the mesh in slabs (analysis/power_spectrum.hpp) and the halo catalogue of groups linked
// across ranks (analysis/fof_ranks.hpp), neither of which gathers the particles.
std::vector<std::string> write_run_outputs(const OutputContext& context, const Particles& particles,
                                           const std::vector<Vec3d>& accelerations, const Comm& comm = Comm::self());

}  // namespace orbis
