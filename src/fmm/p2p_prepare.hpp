// What every P2P backend does before its kernel: check the call, and express positions
// relative to their leaf's centre (docs/design.md, "Positions and precision"). A float relative
// position keeps ~1e-7 of the leaf size instead of ~1e-7 of the box (1 Gpc/h: 0.1 kpc/h
// absolute), and a source enters a target's frame through one shift per task,
//   shift = centre_j + image * box - centre_i   (computed in double, then rounded),
// so the separation x_j - x_i = (rel_j + shift) - rel_i carries an error of ~1e-7 of the
// leaf pair's distance, never of the box.
#pragma once
#include <cstdint>
#include <vector>

#include "core/vec3.hpp"
#include "fmm/p2p.hpp"
#include "fmm/p2p_kernel.hpp"
#include "fmm/tasks.hpp"

namespace orbis {

// The pair code's Order template argument for these settings (fmm/p2p_kernel.hpp): the
// Taylor order, kExactTruncation, or kNoTruncation for the Newtonian kernel.
inline int p2p_order_of(const P2PSettings& s) {
  return s.kernel == KernelKind::newtonian ? kNoTruncation : s.taylor_order;
}
// The pair constants for these settings (either kernel).
template <typename R>
P2PPairConstants<R> pair_constants_of(const P2PSettings& s) {
  if (s.kernel == KernelKind::newtonian) return make_newtonian_pair_constants<R>(s.r_cut, s.softening, s.g_mass);
  return make_pair_constants<R>(s.r_s, s.r_cut, s.softening, s.g_mass, s.table_size, s.taylor_order >= 0,
                                s.cut_shift);
}

// Fails (orbis::Error) on settings or inputs the kernels cannot honour: r_s, r_cut or the
// box not positive, r_cut >= box/2, taylor_order outside -1..4, a table of < 2 nodes (the
// truncated kernel; the Newtonian one needs r_cut > 0 alone),
// missing arrays, a leaf outside the particle array or larger than max_leaf_count, a task
// referring to a leaf that does not exist (tasks checked in parallel).
void check_p2p_call(const P2PSettings& settings, const P2PInput& input,
                    std::uint32_t max_leaf_count);
// The same without the per-task check (for a backend that checks tasks as it packs them:
// pack_p2p_tasks). Accepts input.task_spans in place of input.tasks.
void check_p2p_settings(const P2PSettings& settings, const P2PInput& input,
                        std::uint32_t max_leaf_count);

// Fails (orbis::Error) when a tree of n_leaves leaves is too large for the GPU's packed P2P
// format (more than kMaxPackedLeaves), naming the parameter that lowers the count
// ([gravity] max_leaf). `who` names the caller in the message.
void check_packed_leaves(std::size_t n_leaves, const char* who);

// The task list of a call as spans: input.task_spans, or one span over *input.tasks.
std::vector<TaskSpan> task_spans_of(const P2PInput& input);
// Entries of the spans (a kMutualTask entry is one entry and two tasks).
std::size_t span_entries(const std::vector<TaskSpan>& spans);

struct PackedCount {
  std::uint64_t pairs = 0;     // particle pairs, sum of count_target * count_source per task
  std::uint64_t tasks = 0;     // tasks, a mutual entry counted twice
};

// The GPU upload format: entries [begin, end) of the concatenation of `spans` as
// targets[q - begin] (kMutualBit set for a mutual entry, which the device expands) and
// packed sources packed[q - begin] (pack_source, tasks.hpp). OpenMP. Fails on a target or
// source >= leaves.size(), leaves beyond 2^26, or an image outside -1..1.
PackedCount pack_p2p_tasks(const std::vector<TaskSpan>& spans, std::size_t begin, std::size_t end,
                           const std::vector<Leaf>& leaves, std::uint32_t* targets, std::uint32_t* packed);
// All tasks, expanded (no kMutualBit) and reordered by chunk of targets: chunk c holds the
// tasks whose target lies in [bounds[c], bounds[c + 1]), in expanded input order, at
// [offsets[c], offsets[c + 1]).
PackedCount pack_p2p_tasks_chunked(const std::vector<TaskSpan>& spans, const std::vector<Leaf>& leaves,
                                   const std::vector<std::uint32_t>& bounds, std::uint32_t* targets,
                                   std::uint32_t* packed, std::vector<std::size_t>& offsets);
// Tasks per target leaf, expanded (targets >= n_leaves are not counted; pack_p2p_tasks*
// fail on them).
std::vector<std::uint64_t> tasks_per_target(const std::vector<TaskSpan>& spans, std::size_t n_leaves);

// Structure of arrays in tree order; particles in no leaf get 0.
template <typename R>
struct LeafRelativePositions {
  std::vector<R> x, y, z;
};

// Fills out (resized to positions.size()) with float/double positions relative to the
// centre of the leaf that holds each particle, times scale (P2PPairConstants::length_scale;
// applied in double before the one rounding). OpenMP over leaves.
template <typename R>
void leaf_relative_positions(const std::vector<Vec3d>& positions, const std::vector<Leaf>& leaves,
                             double scale, LeafRelativePositions<R>& out);
// The same into caller-owned arrays of positions.size() (e.g. pinned upload buffers).
template <typename R>
void leaf_relative_positions(const std::vector<Vec3d>& positions, const std::vector<Leaf>& leaves,
                             double scale, R* x, R* y, R* z);

// The source leaf's frame shift into the target leaf's frame, Mpc/h (double).
inline Vec3d task_shift(const std::vector<Leaf>& leaves, const InteractionTask& t, double box) {
  const Vec3d& ci = leaves[t.target].centre;
  const Vec3d& cj = leaves[t.source].centre;
  return {cj.x + t.image[0] * box - ci.x, cj.y + t.image[1] * box - ci.y,
          cj.z + t.image[2] * box - ci.z};
}

// acc = n accelerations stored as x, y, z doubles one particle after the other (a device
// download); OpenMP copy, here because nvcc-compiled files do not get OpenMP.
void copy_accelerations(const double* xyz, std::size_t n, std::vector<Vec3d>& acc);

// Pairs evaluated: sum over tasks of count_i * count_j (exact integer sum, OpenMP); with
// `targets` (tree order flags) count_i is the flagged particles of the target leaf.
double p2p_interaction_count(const std::vector<Leaf>& leaves, const std::vector<InteractionTask>& tasks,
                             const std::vector<std::uint8_t>* targets = nullptr);

// The largest leaf count (sizes per-thread buffers and GPU shared memory).
std::uint32_t max_leaf_count(const std::vector<Leaf>& leaves);

}  // namespace orbis
