// The task lists the dual-tree walk emits and the P2P backends read (PhotoNs-GPU §3).
// Plain structs of fixed size, so the GPU backend can copy the arrays as they are.
#pragma once
#include <cstdint>
#include <vector>

#include "core/vec3.hpp"

namespace orbis {

// A leaf of the ORB tree: particles [first, first + count) in tree order.
struct Leaf {
  std::uint32_t first = 0;
  std::uint32_t count = 0;
  Vec3d centre;   // geometric centre of the leaf's bounding box, Mpc/h
};

// One interaction between a target (i) and a source (j): two leaves for P2P, two tree nodes
// for M2L. The source is seen in the periodic image x_j + image * BoxSize, which the walk
// chooses once per pair (r_cut < BoxSize/2 makes it unique), so kernels never wrap.
struct InteractionTask {
  std::uint32_t target = 0;
  std::uint32_t source = 0;
  std::int8_t image[3] = {0, 0, 0};
  std::int8_t pad = 0;
};
static_assert(sizeof(InteractionTask) == 12, "InteractionTask is copied to the GPU as is");

struct TaskLists {
  std::vector<InteractionTask> p2p;   // target/source are leaf indices
  std::vector<InteractionTask> m2l;   // target/source are node indices
};

}  // namespace orbis
