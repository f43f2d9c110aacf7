// CUDA P2P backend (placeholder until the kernel lands): reports "not usable" so that
// backend = auto falls back to the CPU and backend = cuda fails before any work.
#include "core/error.hpp"
#include "fmm/p2p_cuda_factory.hpp"

namespace orbis {

bool cuda_device_usable(int device, std::string* why) {
  if (why) *why = "the CUDA P2P kernel is not implemented yet (device " + std::to_string(device) + ")";
  return false;
}

std::unique_ptr<P2PEvaluator> make_cuda_p2p_evaluator(int device) {
  fail("[gpu] backend = \"cuda\", but the CUDA P2P kernel is not implemented yet (device {})", device);
}

}  // namespace orbis
