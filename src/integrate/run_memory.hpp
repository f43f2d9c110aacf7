// The host memory a run needs, checked before any work: the particle arrays, the engine's
// accelerations and the PM mesh, a lower bound (the tree, the ICs' fields and the analysis
// meshes come on top). A run that cannot have even that stops with the bytes needed, the
// bytes available and the parameters that lower the need, instead of failing hours in.
#pragma once
#include <cstdint>

namespace orbis {

class Params;

// Bytes of the arrays named above for `particles` particles under `params`.
double run_host_bytes(const Params& params, std::uint64_t particles);
// An Error when run_host_bytes exceeds what the host (or the process's cgroup) has available.
void check_host_memory(const Params& params, std::uint64_t particles);

}  // namespace orbis
