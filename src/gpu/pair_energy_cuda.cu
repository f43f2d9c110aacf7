#include "gpu/pair_energy_cuda.cuh"

#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "gpu/cub_counts.cuh"
#include "gpu/cuda_check.cuh"
#include "gpu/device_buffer.cuh"

namespace orbis::gpu {
namespace {

struct PairSumArgs {
  const double *x, *y, *z;          // cell order
  const std::uint8_t* ghost;        // cell order: 1 for another rank's particle (null: none);
                                    // a cell's ghosts follow its own particles
  const std::uint32_t* start;       // cell c: [start[c], start[c + 1])
  std::uint32_t n;
  int side, reach;
  double box, cut2, eps2, inv_two_rs;
  double shift_a = 0, shift_offset = 0;   // the shifted cut (cut_shift_terms; 0: sharp)
};

// One thread per particle of this rank (a ghost's thread writes 0): its partners of this rank
// in the half stencil (in its own cell those after it), the ghosts in the whole stencil with
// their ghost_pair_weight, as pair_potential_sum_cpu. (Sharing the stencil's particles through
// shared memory, a block per cell's chunk, made it slower: 0.40 -> 0.49 s at 256^3.)
__global__ void pair_potential_kernel(PairSumArgs a, double* psi) {
  const std::size_t thread = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (thread >= a.n) return;
  const auto q = static_cast<std::uint32_t>(thread);
  const bool ghosts = a.ghost != nullptr;
  if (ghosts && a.ghost[q]) {
    psi[q] = 0;
    return;
  }
  const double xq = a.x[q], yq = a.y[q], zq = a.z[q];
  const int ci = chaining_cell(xq, a.box, a.side), cj = chaining_cell(yq, a.box, a.side),
            ck = chaining_cell(zq, a.box, a.side);
  double sum = 0;
  for (int di = -a.reach; di <= a.reach; ++di)
    for (int dj = -a.reach; dj <= a.reach; ++dj)
      for (int dk = -a.reach; dk <= a.reach; ++dk) {
        const bool own = di == 0 && dj == 0 && dk == 0;
        const bool forward = own || chaining_forward(di, dj, dk);
        if (!forward && !ghosts) continue;
        double sx, sy, sz;
        const int ni = chaining_neighbour(ci + di, a.side, a.box, sx), nj = chaining_neighbour(cj + dj, a.side, a.box, sy),
                  nk = chaining_neighbour(ck + dk, a.side, a.box, sz);
        const std::size_t c = (static_cast<std::size_t>(ni) * a.side + nj) * a.side + nk;
        const double ox = sx - xq, oy = sy - yq, oz = sz - zq;
        std::uint32_t first = own && !ghosts ? q + 1 : a.start[c];
        if (!forward) {
          // Only the ghosts pair here, and they follow the cell's own particles (the cell
          // order keeps the input's, where the ghosts come last): the first one by bisection.
          std::uint32_t end = a.start[c + 1];
          while (first < end) {
            const std::uint32_t mid = first + (end - first) / 2;
            if (a.ghost[mid]) end = mid;
            else first = mid + 1;
          }
        }
        for (std::uint32_t j = first; j < a.start[c + 1]; ++j) {
          double weight = 1;
          if (ghosts && a.ghost[j]) weight = ghost_pair_weight(Vec3d{xq, yq, zq}, Vec3d{a.x[j], a.y[j], a.z[j]});
          else if (!(own ? j > q : forward)) continue;
          if (weight == 0) continue;
          double dx = a.x[j] + ox, dy = a.y[j] + oy, dz = a.z[j] + oz;
          if (a.side == 1) {   // one cell: the minimal image
            dx -= a.box * rint(dx / a.box);
            dy -= a.box * rint(dy / a.box);
            dz -= a.box * rint(dz / a.box);
          }
          const double r2 = dx * dx + dy * dy + dz * dz;
          if (r2 >= a.cut2) continue;
          const double s = sqrt(r2 + a.eps2);
          if (s > 0) {
            double term = erfc(s * a.inv_two_rs) / s;
            if (a.shift_a != 0) term += a.shift_a * s - a.shift_offset;
            sum += weight * term;
          }
        }
      }
  psi[q] = sum;
}

void launch_pair_potential(const PairSumArgs& a, double* psi, cudaStream_t stream) {
  constexpr unsigned kThreads = 128;
  pair_potential_kernel<<<static_cast<unsigned>((a.n + std::size_t{kThreads} - 1) / kThreads), kThreads, 0, stream>>>(
      a, psi);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

// The particles' sums added in a fixed order: each thread block sums kSumBlock consecutive
// ones (each thread its strided share in order, then a fixed tree in shared memory), and the
// host adds the blocks' sums in order. No atomics: the same bits at every run.
constexpr unsigned kSumThreads = 256;
constexpr std::size_t kSumBlock = std::size_t{kSumThreads} * 16;

__global__ void block_sums_kernel(const double* v, std::size_t n, double* partial) {
  __shared__ double s[kSumThreads];
  const std::size_t begin = blockIdx.x * kSumBlock;
  const std::size_t end = begin + kSumBlock < n ? begin + kSumBlock : n;
  double sum = 0;
  for (std::size_t i = begin + threadIdx.x; i < end; i += kSumThreads) sum += v[i];
  s[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned half = kSumThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

std::size_t sum_block_count(std::size_t n) { return (n + kSumBlock - 1) / kSumBlock; }

// The sum of v[0 .. n) on `stream` (waits for it); the partial sums' memory from the pool.
double sum_in_order(const double* v, std::size_t n, cudaStream_t stream) {
  const std::size_t blocks = sum_block_count(n);
  if (blocks == 0) return 0.0;
  DeviceArray<double> partial;
  partial.ensure_exact(blocks);
  block_sums_kernel<<<static_cast<unsigned>(blocks), kSumThreads, 0, stream>>>(v, n, partial.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  std::vector<double> sums(blocks);
  ORBIS_CUDA_CHECK(
      cudaMemcpyAsync(sums.data(), partial.data(), blocks * sizeof(double), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  partial.release();
  double total = 0;
  for (double s : sums) total += s;
  return total;
}

// The device's chaining mesh (pair_potential_sum_device). Each particle's cell (the key) and
// its index (the value) for the sort.
__global__ void cell_key_kernel(const double* x, const double* y, const double* z, std::size_t n, double box,
                                int side, std::uint32_t* key, std::uint32_t* index) {
  const std::size_t q = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (q >= n) return;
  const int ci = chaining_cell(periodic_wrap_position(x[q], box), box, side),
            cj = chaining_cell(periodic_wrap_position(y[q], box), box, side),
            ck = chaining_cell(periodic_wrap_position(z[q], box), box, side);
  key[q] = static_cast<std::uint32_t>((static_cast<std::size_t>(ci) * side + cj) * side + ck);
  index[q] = static_cast<std::uint32_t>(q);
}

// start[c] = the first position in cell order whose cell is >= c, for c in [0, cells]: the
// thread of position q (0 .. n) writes the cells after its predecessor's up to its own (past
// the end: up to `cells`), so each entry is written once.
__global__ void cell_start_kernel(const std::uint32_t* key, std::size_t n, std::size_t cells, std::uint32_t* start) {
  const std::size_t q = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (q > n) return;
  const std::size_t first = q == 0 ? 0 : static_cast<std::size_t>(key[q - 1]) + 1;
  const std::size_t last = q == n ? cells : static_cast<std::size_t>(key[q]);
  for (std::size_t c = first; c <= last; ++c) start[c] = static_cast<std::uint32_t>(q);
}

// The positions in cell order, x | y | z blocks of n.
// The positions in cell order, wrapped into the box; ghost (null: none) 1 where the particle
// is one of the last n - own (another rank's).
__global__ void gather_kernel(const double* x, const double* y, const double* z, const std::uint32_t* order,
                              std::size_t n, std::size_t own, double box, double* sorted, std::uint8_t* ghost) {
  const std::size_t q = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (q >= n) return;
  const std::uint32_t i = order[q];
  sorted[q] = periodic_wrap_position(x[i], box);
  sorted[n + q] = periodic_wrap_position(y[i], box);
  sorted[2 * n + q] = periodic_wrap_position(z[i], box);
  if (ghost) ghost[q] = i >= own ? 1 : 0;
}

constexpr unsigned kMeshThreads = 256;
unsigned mesh_grid(std::size_t threads) { return static_cast<unsigned>((threads + kMeshThreads - 1) / kMeshThreads); }

// The bits of a cell index (the sort's key width).
int cell_key_bits(std::size_t cells) {
  int bits = 1;
  while ((std::size_t{1} << bits) < cells) ++bits;
  return bits;
}

std::size_t cell_count(const ChainingShape& shape) {
  return static_cast<std::size_t>(shape.side) * shape.side * shape.side;
}

}  // namespace

double pair_potential_sum(const PairPotentialInput& in, int device) {
  const std::vector<Vec3d>& pos = *in.positions;
  const std::size_t n = pos.size();
  if (in.ghosts > n) fail("internal: pair energy: {} ghosts among {} positions", in.ghosts, n);
  if (n == in.ghosts) return 0.0;   // no particle of this rank
  const std::size_t own_count = n - in.ghosts;
  const ChainingMesh mesh(pos, in.box, in.cut);
  std::vector<double> sorted(3 * n);
  std::vector<std::uint8_t> ghost(in.ghosts > 0 ? n : 0);
  for (std::size_t q = 0; q < n; ++q) {
    const Vec3d& p = pos[mesh.order[q]];
    sorted[q] = p.x, sorted[n + q] = p.y, sorted[2 * n + q] = p.z;
    if (!ghost.empty()) ghost[q] = mesh.order[q] >= own_count ? 1 : 0;
  }
  ORBIS_CUDA_CHECK(cudaSetDevice(device));
  DeviceArray<double> xyz, psi;
  DeviceArray<std::uint32_t> start;
  DeviceArray<std::uint8_t> ghost_flags;
  xyz.ensure(3 * n);
  psi.ensure(n);
  start.ensure(mesh.start.size());
  ORBIS_CUDA_CHECK(cudaMemcpy(xyz.data(), sorted.data(), 3 * n * sizeof(double), cudaMemcpyHostToDevice));
  ORBIS_CUDA_CHECK(cudaMemcpy(start.data(), mesh.start.data(), mesh.start.size() * sizeof(std::uint32_t),
                              cudaMemcpyHostToDevice));
  if (!ghost.empty()) {
    ghost_flags.ensure(n);
    ORBIS_CUDA_CHECK(cudaMemcpy(ghost_flags.data(), ghost.data(), n, cudaMemcpyHostToDevice));
  }
  PairSumArgs a{xyz.data(),   xyz.data() + n, xyz.data() + 2 * n, ghost.empty() ? nullptr : ghost_flags.data(),
                start.data(), static_cast<std::uint32_t>(n), mesh.side, mesh.reach, in.box, in.cut * in.cut,
                in.softening * in.softening, 0.5 / in.r_s};
  const CutShiftTerms shift = cut_shift_terms(in);
  a.shift_a = shift.a;
  a.shift_offset = shift.offset;
  launch_pair_potential(a, psi.data(), nullptr);
  return sum_in_order(psi.data(), n, nullptr);
}

std::size_t pair_potential_sum_device_bytes(std::size_t n, double box, double cut) {
  const ChainingShape shape = chaining_mesh_shape(box, cut);
  const std::size_t cells = cell_count(shape);
  // At most at once: the keys' and indices' double buffers with the sort's temporary memory
  // (16 bytes a particle), or the indices with the sorted positions (8 + 24), then the
  // sorted positions with the sums (24 + 8); counted together, with the cell starts.
  const std::size_t sort_temp =
      n > 0 ? radix_sort_pairs_bytes<std::uint32_t, std::uint32_t>(n, 0, cell_key_bits(cells)) : 0;
  return n * 41 + sort_temp + (cells + 1) * sizeof(std::uint32_t) + sum_block_count(n) * sizeof(double);
}

double pair_potential_sum_device(const double* x, const double* y, const double* z, std::size_t n,
                                 const PairPotentialInput& rule, cudaStream_t stream) {
  if (rule.ghosts > n) fail("internal: pair energy on the device: {} ghosts among {} positions", rule.ghosts, n);
  if (n >= (std::size_t{1} << 32)) fail("pair energy: {} particles (at most 2^32 - 1)", n);
  if (n == rule.ghosts) return 0.0;   // no particle of this rank
  const ChainingShape shape = chaining_mesh_shape(rule.box, rule.cut);
  const std::size_t cells = cell_count(shape);
  const int bits = cell_key_bits(cells);
  AllocationStream on_stream(stream);
  // Cells and indices, sorted by cell (stable: ascending indices in each cell, ChainingMesh's
  // order), in double buffers of 2n.
  DeviceArray<std::uint32_t> keys, index;
  keys.ensure_exact(2 * n);
  index.ensure_exact(2 * n);
  const std::size_t temp_bytes = radix_sort_pairs_bytes<std::uint32_t, std::uint32_t>(n, 0, bits);
  DeviceArray<unsigned char> temp;
  temp.ensure_exact(temp_bytes);
  cell_key_kernel<<<mesh_grid(n), kMeshThreads, 0, stream>>>(x, y, z, n, rule.box, shape.side, keys.data(),
                                                              index.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  cub::DoubleBuffer<std::uint32_t> sorted_keys(keys.data(), keys.data() + n), order(index.data(), index.data() + n);
  radix_sort_pairs(temp.data(), temp_bytes, sorted_keys, order, n, 0, bits, stream);
  temp.release();
  DeviceArray<std::uint32_t> start;
  start.ensure_exact(cells + 1);
  cell_start_kernel<<<mesh_grid(n + 1), kMeshThreads, 0, stream>>>(sorted_keys.Current(), n, cells, start.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  DeviceArray<double> sorted;
  sorted.ensure_exact(3 * n);
  DeviceArray<std::uint8_t> ghost;
  if (rule.ghosts > 0) ghost.ensure_exact(n);
  gather_kernel<<<mesh_grid(n), kMeshThreads, 0, stream>>>(x, y, z, order.Current(), n, n - rule.ghosts, rule.box,
                                                           sorted.data(), rule.ghosts > 0 ? ghost.data() : nullptr);
  ORBIS_CUDA_CHECK(cudaGetLastError());
  index.release();
  keys.release();
  DeviceArray<double> psi;
  psi.ensure_exact(n);
  PairSumArgs a{sorted.data(),
                      sorted.data() + n,
                      sorted.data() + 2 * n,
                      rule.ghosts > 0 ? ghost.data() : nullptr,
                      start.data(),
                      static_cast<std::uint32_t>(n),
                      shape.side,
                      shape.reach,
                      rule.box,
                      rule.cut * rule.cut,
                      rule.softening * rule.softening,
                      0.5 / rule.r_s};
  const CutShiftTerms shift = cut_shift_terms(rule);
  a.shift_a = shift.a;
  a.shift_offset = shift.offset;
  launch_pair_potential(a, psi.data(), stream);
  const double total = sum_in_order(psi.data(), n, stream);
  psi.release();
  ghost.release();
  sorted.release();
  start.release();
  return total;
}

}  // namespace orbis::gpu
