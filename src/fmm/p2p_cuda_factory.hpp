// The CUDA backend as the rest of the engine sees it: two functions that src/gpu defines
// when the build has CUDA. Only p2p_backend.cpp calls them, and only under ORBIS_HAVE_CUDA,
// so a CPU-only build never needs their definitions.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "fmm/p2p.hpp"

namespace orbis {

// True when CUDA device `device` exists and can run the P2P kernel; otherwise false with
// the reason in *why ("no CUDA device", "driver too old: ...", "device 3 of 1").
bool cuda_device_usable(int device, std::string* why);

// CUDA devices present (0 when there are none or the driver cannot say).
int cuda_device_count();

// Free memory of a usable CUDA device now, bytes (0 when it cannot say).
std::size_t cuda_device_free_memory(int device);

// The CUDA P2P evaluator on `device` (call cuda_device_usable first; fails otherwise).
std::unique_ptr<P2PEvaluator> make_cuda_p2p_evaluator(int device);

}  // namespace orbis
