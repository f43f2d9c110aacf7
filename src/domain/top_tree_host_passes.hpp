// The global top tree's passes over this rank's particles on the host (OpenMP over fixed
// blocks of the members: the same tree for any thread count), for GlobalTopTree::build.
#pragma once
#include <memory>
#include <vector>

#include "core/vec3.hpp"
#include "domain/top_tree_passes.hpp"

namespace orbis {

// `positions` must outlive the passes (their keys are read once, in start()).
std::unique_ptr<TopTreePasses> host_top_tree_passes(const std::vector<Vec3d>& positions);

}  // namespace orbis
