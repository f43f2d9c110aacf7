// The task lists the dual-tree walk emits and the P2P backends read (PhotoNs-GPU §3).
// Plain structs of fixed size, so the GPU backend can copy the arrays as they are.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/hostdevice.hpp"
#include "core/vec3.hpp"
#include "tree/leaf.hpp"

namespace orbis {

// One interaction between a target (i) and a source (j): two leaves for P2P, two tree nodes
// for M2L. The source is seen in the periodic image x_j + image * BoxSize, which the walk
// chooses once per pair (r_cut < BoxSize/2 makes it unique), so kernels never wrap.
struct InteractionTask {
  std::uint32_t target = 0;
  std::uint32_t source = 0;
  std::int8_t image[3] = {0, 0, 0};
  std::int8_t flags = 0;   // kMutualTask, or 0
};
// In the walk's P2P spans for a backend that expands them itself (P2PInput::task_spans),
// a task with this flag stands for two: (target, source, image) and, right after it,
// (source, target, -image). Task lists elsewhere never carry it.
constexpr std::int8_t kMutualTask = 1;
static_assert(sizeof(InteractionTask) == 12, "InteractionTask is copied to the GPU as is");

// Consecutive tasks of a longer list (the walk's per-subtree buffers, or pieces of one array).
struct TaskSpan {
  const InteractionTask* data = nullptr;
  std::size_t size = 0;
};

// A P2P task's source as the GPU receives it, in one 32-bit word: the source leaf in bits
// 0-25 and image + 1 (0, 1 or 2) in two bits per axis from bit 26 (the walk only emits
// images -1, 0, +1). The target travels apart, as the sort key, with the mutual flag in
// bit 31 (kMutualBit) until the device expands the pair.
constexpr std::uint32_t kMutualBit = std::uint32_t{1} << 31;
constexpr unsigned kPackedLeafBits = 26;
constexpr std::uint32_t kPackedLeafLimit = std::uint32_t{1} << kPackedLeafBits;
// The most leaves a tree may have for its P2P to run on the GPU (leaf indices 0 .. 2^26 - 1).
constexpr std::size_t kMaxPackedLeaves = kPackedLeafLimit;
ORBIS_HD std::uint32_t pack_source(std::uint32_t source, const std::int8_t image[3]) {
  return source | (static_cast<std::uint32_t>(image[0] + 1) << kPackedLeafBits) |
         (static_cast<std::uint32_t>(image[1] + 1) << (kPackedLeafBits + 2)) |
         (static_cast<std::uint32_t>(image[2] + 1) << (kPackedLeafBits + 4));
}
ORBIS_HD std::uint32_t packed_leaf(std::uint32_t w) { return w & (kPackedLeafLimit - 1); }
ORBIS_HD int packed_image(std::uint32_t w, int axis) {
  return static_cast<int>((w >> (kPackedLeafBits + 2 * axis)) & 3u) - 1;
}

struct TaskLists {
  std::vector<InteractionTask> p2p;   // target/source are leaf indices
  std::vector<InteractionTask> m2l;   // target/source are node indices
  // Vacuum boundaries only (WalkSettings::leaf_cell), image 0: the two halves of a leaf-cell
  // pair (fmm/walk_pair.hpp). P2L: target node, source leaf (the leaf's particles into the
  // node's local expansion); M2P: target leaf, source node (the node's multipoles at the
  // leaf's particles). Empty in periodic walks.
  std::vector<InteractionTask> p2l;
  std::vector<InteractionTask> m2p;
};

}  // namespace orbis
