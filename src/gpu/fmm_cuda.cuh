// The far field of the short-range FMM on the device: the operators of fmm/expansions.hpp
// and tree/multipoles.hpp (full Cartesian moments to order p about each node's centre of
// mass, local expansions to p + 1, the truncated kernel psi = erfc(r/2r_s)/r or, for vacuum
// boundaries, the Newtonian 1/r: fmm/kernel_kind.hpp) over the device tree and the device
// walk's M2L lists, so no tree or task list crosses the bus.
//
//   P2M   M_n = sum_j (x_j - z)^n / n!, a thread per leaf, every n in its registers, the
//         particles in tree order, the monomials by the host's recurrence (scaled_monomials);
//         with weights (FmmTreeView::w, individual masses) M_n = sum_j w_j (x_j - z)^n / n!,
//         the product rounded before the sum (w = 1: the unweighted bits);
//   M2M   deepest level first, a thread per node, its two children shifted in host order;
//   M2L   a warp per target node, its tasks in list order: the radial derivatives g_m(|R|)
//         (every lane), the derivative tensor D_n(R) by the McMurchie-Davidson recurrence
//         (a level of the recurrence per step, lanes over its entries), then lane k adds
//         sum_n (-1)^|n| M_n D_(n+k) to its L_k in a register (the truncated kernel: a
//         periodic box's ~1e4 M2L a step); the Newtonian kernel's (vacuum: ~8 a particle) a
//         warp per target node and a lane per task, each lane's D of order p + 1 in registers
//         (gpu/fmm_cuda_tensor.cuh) and its L_k in shared memory, in float (scaled terms,
//         the multipoles in float over their node's radius: fmm_cuda_vacuum.cu), the
//         lanes' sums then added in lane order in double;
//   L2L   top level first, a thread per child of a parent with a local expansion, its terms
//         in host order;
//   L2P   a warp per leaf, a thread per particle, the gradient's terms in host order;
// and, for vacuum boundaries, the leaf-cell pairs of the walk (fmm/walk_pair.hpp):
//   P2L   after M2L, a warp per target node, its tasks in list order, a lane per particle
//         of each source leaf: D_k(z - x_j) of order p + 1 made in the lane's registers
//         (gpu/fmm_cuda_tensor.cuh; times w_j with weights, the product rounded before the
//         sum) and added to the lane's shared-memory expansion, the lanes' sums then added
//         in lane order to the node's M2L expansion;
//   M2P   a warp per target leaf, a lane per particle, its tasks in list order:
//         sum_n (-1)^|n| M_n D_(n+e)(x - z_source), each D entry added as it is made, into
//         a field array of its own, which is added (times G m) after L2P.
//   Both are the Newtonian kernel's only, with the order a template argument, and in float
//   (particle with node, as the P2P's pairs; fmm_cuda_vacuum.cu), summed in double.
// M2L, P2L and M2P in chunks (gpu/fmm_cuda_kernels.cuh): a target with more tasks than a
// chunk (at least 16 tasks; at most 65536 chunks of M2L or P2L in all, M2P's partial fields
// in as much memory) has its chunks done by a warp each first, into partial sums that it then
// adds in chunk order: the few targets with thousands of tasks (an isolated system's core,
// which receives ~1e4 leaves, and the leaves facing it; a sub-step's few active targets)
// would otherwise keep one warp busy while the GPU idles.
// Every sum has a fixed order (no atomics), so the far field is bitwise the same run after
// run. P2M, M2M, L2L and L2P repeat the host's arithmetic term for term, their orders a
// template argument (gpu/fmm_cuda_monomials.cuh); M2L evaluates erfc and exp directly where
// the host reads a table, so the two agree to ~1e-14, not bitwise.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "fmm/kernel_kind.hpp"
#include "fmm/tasks.hpp"
#include "gpu/device_buffer.cuh"
#include "gpu/device_tree.cuh"
#include "tree/shape_node.hpp"

namespace orbis::gpu {

class DeviceOrbTree;
namespace fmm_detail {
struct Pass;
struct ChunkArrays;
}  // namespace fmm_detail

// What the FMM reads of the device tree (DeviceOrbTree's arrays, tree order).
struct FmmTreeView {
  std::size_t n_nodes = 0, n_leaves = 0, n_particles = 0;
  const ShapeNode* nodes = nullptr;
  const DeviceNodeGeometry* geometry = nullptr;
  const std::int32_t* leaf_node = nullptr;     // leaf -> node
  const std::int32_t* level_nodes = nullptr;   // nodes by depth, increasing index in a depth
  const std::vector<std::size_t>* level_offset = nullptr;   // host: depth d at [off[d], off[d+1])
  const double* x = nullptr;                   // positions in tree order, Mpc/h
  const double* y = nullptr;
  const double* z = nullptr;
  // Individual masses (vacuum boundaries): each particle's weight m_i / m in tree order, or
  // null when all weigh 1. P2M and P2L weigh their particles by it; M2M, M2L, L2L, L2P and
  // M2P then need nothing more, since the moments are full (the dipole about the node's
  // centre, the mean of its positions, is kept, whatever the masses).
  const double* w = nullptr;
};

// The view of a device tree's arrays (valid until its next build or refit).
FmmTreeView fmm_tree_view(const DeviceOrbTree& tree);

// The walk's leaf-cell pairs (gpu/walk_cuda.cuh: DeviceWalk's P2L tasks grouped by target
// node, M2P tasks by target leaf), or none (count 0).
struct LeafCellLists {
  const InteractionTask* p2l = nullptr;
  const std::uint64_t* p2l_offsets = nullptr;   // [n_nodes + 1]
  const InteractionTask* m2p = nullptr;
  const std::uint64_t* m2p_offsets = nullptr;   // [n_leaves + 1]
  std::size_t count = 0;                        // tasks in each list
};

class DeviceFmm {
 public:
  // multipole_order p in 1..6; the truncated kernel needs r_s > 0 (Mpc/h), the Newtonian one
  // reads none.
  // cut_shift: the truncated kernel's shifted cut (fmm/kernel_derivatives.hpp; 0: sharp).
  // softening: the Newtonian kernel's Plummer eps, expanded as 1/sqrt(r^2 + eps^2) (the host's
  // FmmOperators likewise).
  DeviceFmm(int multipole_order, double r_s, KernelKind kernel = KernelKind::truncated, double cut_shift = 0,
            double softening = 0);
  ~DeviceFmm();
  DeviceFmm(const DeviceFmm&) = delete;
  DeviceFmm& operator=(const DeviceFmm&) = delete;

  // Queues on `stream`: multipoles of the M2L sources and their subtrees, M2L over the
  // walk's m2l_count tasks (grouped by target node: m2l_offsets[n_nodes + 1]), L2L and L2P;
  // acc[3 t + d] += g_mass * grad phi of every particle of a leaf that has a local
  // expansion (tree order). With leaf-cell lists (vacuum): P2L into the locals before L2L,
  // and M2P (its sources' multipoles computed too) added to the target leaves' particles.
  void compute(const FmmTreeView& tree, const InteractionTask* m2l, const std::uint64_t* m2l_offsets,
               std::size_t m2l_count, double box, double g_mass, double* acc, cudaStream_t stream,
               const LeafCellLists& leaf_cell = {});
  // Every node's multipoles (P2M, M2M; in vacuum their float copy too), queued on `stream`:
  // they need the tree alone, so the vacuum step makes them while the walk runs.
  void multipoles(const FmmTreeView& tree, cudaStream_t stream);
  // compute() in parts. prepare(): which nodes need multipoles (the M2L and M2P sources of
  // these lists and their subtrees, or every node when the tasks outnumber the nodes:
  // every_node_wanted) and, in a box, which need local expansions (the M2L targets and their
  // subtrees), and where each node's expansions go in arrays of those nodes alone, queued on
  // `stream`. The parts after it wait for it (an event) to size their arrays: the short-range
  // step queues it after the walk and before the P2P, so the wait costs nothing.
  // source_multipoles(): the multipoles prepare() flagged.
  void prepare(const FmmTreeView& tree, const InteractionTask* m2l, const std::uint64_t* m2l_offsets,
               std::size_t m2l_count, cudaStream_t stream, const LeafCellLists& leaf_cell = {});
  void source_multipoles(const FmmTreeView& tree, cudaStream_t stream);
  // Then, after the multipoles, two parts which may be queued on different streams
  // (the second's stream waiting for the first's): expand() the expansions (M2L, P2L, L2L)
  // and the leaf-cell pairs' M2P field (into an array of its own, 3 doubles a particle),
  // which read the tree, the multipoles and the task lists only, and evaluate() what is
  // added to acc (L2P, then G m times the M2P field: the bits of adding each in turn).
  // Between them the caller may fill acc: the short-range step runs the P2P, which stores
  // the accelerations, meanwhile.
  void expand(const FmmTreeView& tree, const InteractionTask* m2l, const std::uint64_t* m2l_offsets,
              std::size_t m2l_count, double box, cudaStream_t stream, const LeafCellLists& leaf_cell = {});
  void evaluate(const FmmTreeView& tree, double g_mass, double* acc, cudaStream_t stream,
                const LeafCellLists& leaf_cell = {});

  // Device bytes compute() holds for a tree of n_nodes nodes.
  static std::size_t bytes_for(int multipole_order, std::size_t n_nodes);
  // Gives the expansions and flags back to the device pool, queued on the allocation stream
  // (after compute(): the next compute() allocates them again).
  void release();
  int multipole_size() const { return nm_; }
  int local_size() const { return nl_; }
  // The last compute()'s multipoles (tests; waits for the device), node-major, of the nodes
  // flagged in wanted() (M2L and M2P sources and their subtrees, or every node:
  // every_node_wanted); zeros for the others.
  std::vector<double> node_multipoles(std::size_t n_nodes) const;
  const std::uint8_t* wanted() const { return wanted_.data(); }
  // Whether the last prepare() kept the needed nodes' expansions alone (tests).
  bool compact() const { return compact_; }
  // Test hook: every chunk of M2L, P2L and M2P tasks at least this many tasks (0: the
  // default, kMinChunk), so that a small system takes the chunked paths.
  void set_min_chunk_tasks(std::uint64_t tasks) { min_chunk_ = tasks; }
  // The chunks of the last compute() (tests; waits for the device): targets done whole
  // are none.
  struct ChunkCounts {
    std::uint32_t m2l = 0, p2l = 0, m2p = 0;
  };
  ChunkCounts last_chunk_counts() const;

  // Whether compute() makes every node's multipoles instead of flagging the sources and their
  // subtrees: when the M2L and M2P tasks outnumber the nodes 16 to 1 (an isolated system's
  // whole evaluation: ~120 M2L tasks a node at 10^6 particles) nearly every node is a source,
  // and a byte store per task to flag them costs more than the few nodes that are none.
  static bool every_node_wanted(std::size_t tasks, std::size_t nodes) { return tasks > 16 * nodes; }

 private:
  // The chunked passes' launch settings and shared arrays (fmm_cuda_kernels.cuh).
  fmm_detail::Pass pass_of(const FmmTreeView& tree, cudaStream_t stream) const;
  fmm_detail::ChunkArrays chunk_arrays();
  // The multipoles of the nodes flagged in wanted_.
  void make_multipoles(const FmmTreeView& tree, cudaStream_t stream);
  // flags[child] = 1 for every child of a flagged node, down the levels.
  static void flag_subtrees(const FmmTreeView& tree, std::uint8_t* flags, cudaStream_t stream);
  // slots: the flagged nodes numbered in node order, and their count into *count (host).
  void number_flagged(const std::uint8_t* flags, std::size_t n, DeviceArray<std::uint32_t>& slots,
                      std::uint32_t* count, cudaStream_t stream);
  // The expansions to allocate (0: multipoles, 1: locals): the prepared count, or every node.
  std::size_t expansion_slots(int which, std::size_t n_nodes) const;
  std::uint64_t min_chunk_tasks() const { return min_chunk_ > 0 ? min_chunk_ : kMinChunk; }

  int order_, nm_, nl_;
  double r_s_;
  KernelKind kernel_;
  double cut_shift_;
  double eps2_;   // the Newtonian kernel's softening squared
  // Index tables, built on the host from the multi-index layout (tree/multi_index.hpp).
  DeviceArray<int> tables_;
  std::vector<int> table_offsets_;
  DeviceArray<double> m_, l_;
  DeviceArray<std::uint8_t> active_, wanted_;
  // In a box (compact_): each node's place in m_ and l_, and how many places each has (host).
  bool compact_ = false;
  DeviceArray<std::uint32_t> m_slot_, l_slot_;
  PinnedArray<std::uint32_t> slot_counts_;
  cudaEvent_t numbered_ = nullptr;
  // The targets with many tasks, in chunks (fmm_cuda_kernels.cuh): chunk counts, then their
  // scan; M2P's partial entries per leaf and its leaves' work, scanned; the chunks' partial
  // sums; the scans' temporaries; the last compute()'s chunks (M2L, P2L, M2P).
  DeviceArray<std::uint32_t> chunk_start_, entry_start_;
  DeviceArray<std::uint64_t> leaf_work_;
  DeviceArray<double> partial_;
  DeviceArray<double> m2p_field_;   // vacuum: the M2P field of each particle (tree order, 3 n)
  DeviceArray<float> m_float_;      // vacuum: the multipoles in float, for M2P
  DeviceArray<unsigned char> scan_temp_;
  DeviceArray<std::uint32_t> chunk_totals_;
  std::size_t partial_doubles_ = 0;   // partial_'s doubles in use (set by expand())
  std::uint64_t min_chunk_ = 0;
  static constexpr std::size_t kMaxChunks = 65536, kMinChunk = 16;
};

}  // namespace orbis::gpu
