// A node of an ORB tree's shape: its particle range, links and depth, no geometry. The shape
// is a function of the particle count and max_leaf alone (OrbTree::shape_nodes), or of the
// group sizes for a forest (OrbTree::forest_shape_nodes); the device tree keeps exactly these
// records (gpu/orb_tree_cuda.cuh). A plain aggregate, so that kernels may hold arrays of it.
#pragma once
#include <cstdint>

namespace orbis {

struct ShapeNode {
  std::uint32_t first, count;   // particles [first, first + count) in tree order
  std::int32_t left, right;     // children (-1 for a leaf)
  std::int32_t leaf;            // leaf index for a leaf, else -1
  std::int32_t depth;           // root: 0
  std::int32_t parent;          // -1: the root
};

}  // namespace orbis
