// Device memory that the ranks take beside the steps at the same time (the outputs' P(k)
// meshes over ranks): several ranks may share one GPU (the tests over ranks, runs of 2 ranks
// on one H200), and then they share its free memory, so each rank's check must count the
// others' asks too.
#pragma once
#include <cstddef>

#include "core/comm.hpp"

namespace orbis::gpu {

// Whether every rank of comm can take `bytes` (its own ask) from its device pool at the same
// time: each rank's pool serves what it holds unused (gpu/device_buffer.cuh), the rest comes
// from the device's free memory, which the ranks on one GPU (the same device UUID) share.
// Collective; the same answer on every rank. `device` is this rank's (made current).
bool fits_on_gpus(const Comm& comm, int device, std::size_t bytes);

}  // namespace orbis::gpu
