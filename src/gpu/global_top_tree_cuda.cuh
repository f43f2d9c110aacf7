// The global top tree over ranks (domain/global_top_tree.hpp) from each rank's positions in
// device memory (issue #29): the first piece of a rank-domain update on the device.
//
// GlobalTopTree::build with the device's passes over the members (domain/top_tree_passes.hpp):
// every decision (boxes, axes, the radix selection's digits and thresholds, the tie rule) is
// taken on the host by the same code as the host build, from what the device returns; the
// device reads and moves the members. The keys (ordered_bits of each coordinate, wrapped into
// the box as it is read) are made once; per round one kernel counts the histograms of all
// unfinished nodes of the level (integer atomics: exact in any order), they come down
// (4 bytes a bin) and are reduced over the ranks as the host build reduces its own, and after
// the decisions a kernel sends each member the round decides to its child (the children's
// boxes as integer min/max of the keys: exact) and keeps the undecided ones in a list for the
// next round. Per level the children's boxes come down (48 bytes a child) and the tied
// candidates (members at exactly one position, rare) with their slots; the positions never
// leave the device, and particle_node only at the end (on request).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include <cuda_runtime.h>

#include "core/comm.hpp"
#include "domain/global_top_tree.hpp"

namespace orbis::gpu {

class DeviceGlobalTopTree {
 public:
  DeviceGlobalTopTree();
  ~DeviceGlobalTopTree();
  DeviceGlobalTopTree(const DeviceGlobalTopTree&) = delete;
  DeviceGlobalTopTree& operator=(const DeviceGlobalTopTree&) = delete;

  // Collective over comm. x, y, z: this rank's n positions on the device (Mpc/h, not NaN;
  // possibly none), each coordinate wrapped into [0, box_mpc_h) with periodic_wrap_position
  // (core/vec3.hpp, each operation rounded on its own, as the engine's wraps) as it is read;
  // box 0: read as they are. Returns GlobalTopTree::build(the wrapped positions, max_leaf,
  // depth, comm) bit for bit: the same nodes, particle_node and rounds. with_particle_node
  // false: the result's particle_node() is left empty (device_particle_node() has it). (The
  // wrap never gives -0.0; unwrapped, a -0.0 coordinate may make a root box corner +0.0 where
  // the host's is -0.0: GlobalTopTree promises no sign of zero.)
  // Queued on `stream` and waited for. Throws as GlobalTopTree::build does (on every rank).
  GlobalTopTree build(const double* x, const double* y, const double* z, std::size_t n, double box_mpc_h,
                      int max_leaf, int depth, const Comm& comm, cudaStream_t stream, bool with_particle_node = true);

  // The last build's particle_node on the device (n int32), valid until the next build.
  const std::int32_t* device_particle_node() const;

  // Device bytes a build over n particles keeps (its arrays stay for the next build), besides
  // the later rounds' candidate lists and the histograms (small).
  static std::size_t device_bytes(std::size_t n);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One build with arrays of its own (DeviceGlobalTopTree::build).
GlobalTopTree global_top_tree_cuda(const double* x, const double* y, const double* z, std::size_t n,
                                   double box_mpc_h, int max_leaf, int depth, const Comm& comm, cudaStream_t stream);

}  // namespace orbis::gpu
