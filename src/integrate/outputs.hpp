// What the run writes at each output scale factor: the snapshot (GADGET-4 layout), the power
// spectrum (text + HDF5) and the FoF halo catalogue (fof_tab layout), as the parameters ask.
#pragma once
#include <string>
#include <vector>

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

// Checks the output settings before any work (the folder can be created, ...).
void validate_outputs(const Params& params);
// Writes the outputs at context.a and returns the files written.
std::vector<std::string> write_run_outputs(const OutputContext& context, const Particles& particles,
                                           const std::vector<Vec3d>& accelerations);

}  // namespace orbis
