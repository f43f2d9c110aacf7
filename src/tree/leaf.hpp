// A leaf of the ORB tree as the walk and the P2P backends see it. It lives with the tree
// (which makes the leaves) so that the tree needs nothing from the FMM layer above it.
#pragma once
#include <cstdint>

#include "core/vec3.hpp"

namespace orbis {

// Particles [first, first + count) in tree order.
struct Leaf {
  std::uint32_t first = 0;
  std::uint32_t count = 0;
  Vec3d centre;   // geometric centre of the leaf's bounding box, Mpc/h
};

}  // namespace orbis
