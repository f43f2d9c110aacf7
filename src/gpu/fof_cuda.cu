#include "gpu/fof_cuda.cuh"

#include <algorithm>
#include <limits>

#include "core/error.hpp"
#include "gpu/cub_counts.cuh"
#include "gpu/cuda_check.cuh"
#include "gpu/device_buffer.cuh"

namespace orbis::gpu {
namespace {

constexpr unsigned kThreads = 256;
unsigned blocks_for(std::size_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

// What the kernels need of the host grid (fof::GridShape) and the box.
struct Cells {
  int nc = 1;                 // coarse cells per side
  std::int64_t m = 2;         // fine cells per coarse side
  double inv_fine = 0, fine_limit = 0;
  double box = 0, l2 = 0;     // l2: the linking length squared, as the host's link * link
};

// The radix sort's key bits for cell indices below `cells`.
int key_bits(std::size_t cells) {
  int bits = 1;
  while (bits < 32 && (std::size_t{1} << bits) < cells) ++bits;
  return bits;
}

// Coarse cell of every particle (CellGrid's coarse_of: the fine cell divided by m), and the
// slot order to be sorted; *outside set when a position is not in [0, box) (or NaN).
__global__ void cell_keys_kernel(const double* __restrict__ x, const double* __restrict__ y,
                                 const double* __restrict__ z, std::size_t n, Cells c,
                                 std::uint32_t* __restrict__ key, std::uint32_t* __restrict__ index,
                                 unsigned* __restrict__ outside) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const double px = x[i], py = y[i], pz = z[i];
  if (!(px >= 0 && px < c.box && py >= 0 && py < c.box && pz >= 0 && pz < c.box)) *outside = 1;
  const std::int64_t side = c.nc * c.m;
  const std::int64_t cx = fof::fine_axis(px, c.inv_fine, c.fine_limit, side) / c.m;
  const std::int64_t cy = fof::fine_axis(py, c.inv_fine, c.fine_limit, side) / c.m;
  const std::int64_t cz = fof::fine_axis(pz, c.inv_fine, c.fine_limit, side) / c.m;
  key[i] = static_cast<std::uint32_t>((cx * c.nc + cy) * c.nc + cz);
  index[i] = static_cast<std::uint32_t>(i);
}

// Each cell's slot range [begin, end) from the sorted keys (empty cells keep 0, 0).
__global__ void cell_bounds_kernel(const std::uint32_t* __restrict__ key, std::size_t n,
                                   std::uint32_t* __restrict__ begin, std::uint32_t* __restrict__ end) {
  const std::size_t s = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (s >= n) return;
  const std::uint32_t c = key[s];
  if (s == 0 || key[s - 1] != c) begin[c] = static_cast<std::uint32_t>(s);
  if (s == n - 1 || key[s + 1] != c) end[c] = static_cast<std::uint32_t>(s + 1);
}

// Positions in slot order (x | y | z blocks of n), and every slot its own set.
__global__ void gather_kernel(const double* __restrict__ x, const double* __restrict__ y,
                              const double* __restrict__ z, const std::uint32_t* __restrict__ order, std::size_t n,
                              double* __restrict__ sorted, std::uint32_t* __restrict__ parent) {
  const std::size_t s = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (s >= n) return;
  const std::uint32_t i = order[s];
  sorted[s] = x[i];
  sorted[n + s] = y[i];
  sorted[2 * n + s] = z[i];
  parent[s] = static_cast<std::uint32_t>(s);
}

// The root of s's set, halving the path on the way (ECL-CC's "intermediate pointer
// jumping"). A slot's parent is never larger than the slot, and only slots that are not
// roots are written here (a root changes only by the CAS in unite), each to an ancestor, so
// the sets stay what the unions made them while other threads unite.
__device__ std::uint32_t find_root(std::uint32_t s, std::uint32_t* parent) {
  std::uint32_t curr = __ldcg(parent + s);
  if (curr != s) {
    std::uint32_t prev = s, next;
    while (curr > (next = __ldcg(parent + curr))) {
      parent[prev] = next;
      prev = curr;
      curr = next;
    }
  }
  return curr;
}

// Joins the sets of a and b: the larger root is hooked onto the smaller by a CAS that
// succeeds only while it is still a root; a failed CAS gives its new parent, and the walk
// goes on from there (ECL-CC's hooking). Terminates: each retry moves to a smaller slot.
__device__ void unite(std::uint32_t a, std::uint32_t b, std::uint32_t* parent) {
  std::uint32_t ra = find_root(a, parent), rb = find_root(b, parent);
  while (ra != rb) {
    if (ra < rb) {
      const std::uint32_t old = atomicCAS(parent + rb, rb, ra);
      if (old == rb) return;
      rb = old;
    } else {
      const std::uint32_t old = atomicCAS(parent + ra, ra, rb);
      if (old == ra) return;
      ra = old;
    }
  }
}

// Slot s against every later slot t of the 27 neighbour cells (unwrapped offset d from s's
// cell; over 1 or 2 cells per side several d reach one cell at different periodic images, as
// on the host). The host computes a pair once, with a = the particle whose cell has the other's
// at a half-shell offset (fof.cpp: d > 0 in (x, y, z) lexicographic order, or d = 0) and b
// shifted to its image next to a: x_a - (x_b + shift_b). For d in the half shell that is
// x_s - (x_t + shift(d)); for the other half the host's a is t and its shift of s is
// -shift(d): x_t - (x_s - shift(d)). With shift 0 both are +-(x_s - x_t), exactly. The sum of
// squares in the host's order, each operation rounded on its own (no FMA).
__global__ void link_kernel(const double* __restrict__ sorted, const std::uint32_t* __restrict__ key,
                            const std::uint32_t* __restrict__ begin, const std::uint32_t* __restrict__ end,
                            std::size_t n, Cells c, std::uint32_t* parent) {
  const std::size_t s = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (s >= n) return;
  const int nc = c.nc;
  const std::uint32_t cell = key[s];
  const int cx = static_cast<int>(cell / (static_cast<std::uint32_t>(nc) * nc));
  const int cy = static_cast<int>((cell / nc) % nc);
  const int cz = static_cast<int>(cell % nc);
  const double xs = sorted[s], ys = sorted[n + s], zs = sorted[2 * n + s];
  const auto wrap = [nc](int u, double box, double& shift) {
    // u in [-1, nc]: the wrapped cell coordinate and floor(u / nc) * box (host: floor_div * box).
    if (u < 0) {
      shift = -box;
      return u + nc;
    }
    if (u >= nc) {
      shift = box;
      return u - nc;
    }
    shift = 0.0;
    return u;
  };
  for (int dx = -1; dx <= 1; ++dx) {
    double sx;
    const int bx = wrap(cx + dx, c.box, sx);
    for (int dy = -1; dy <= 1; ++dy) {
      double sy;
      const int by = wrap(cy + dy, c.box, sy);
      for (int dz = -1; dz <= 1; ++dz) {
        double sz;
        const int bz = wrap(cz + dz, c.box, sz);
        const bool half_shell = dx > 0 || (dx == 0 && (dy > 0 || (dy == 0 && dz >= 0)));
        const std::uint32_t b = (static_cast<std::uint32_t>(bx) * nc + by) * nc + bz;
        const std::size_t t_end = end[b];
        for (std::size_t t = begin[b] > s ? begin[b] : s + 1; t < t_end; ++t) {
          const double xt = sorted[t], yt = sorted[n + t], zt = sorted[2 * n + t];
          double ex, ey, ez;
          if (half_shell) {
            ex = __dsub_rn(xs, __dadd_rn(xt, sx));
            ey = __dsub_rn(ys, __dadd_rn(yt, sy));
            ez = __dsub_rn(zs, __dadd_rn(zt, sz));
          } else {
            ex = __dsub_rn(xt, __dsub_rn(xs, sx));
            ey = __dsub_rn(yt, __dsub_rn(ys, sy));
            ez = __dsub_rn(zt, __dsub_rn(zs, sz));
          }
          const double r2 = __dadd_rn(__dadd_rn(__dmul_rn(ex, ex), __dmul_rn(ey, ey)), __dmul_rn(ez, ez));
          if (r2 <= c.l2) unite(static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(t), parent);
        }
      }
    }
  }
}

// Every slot straight at its root (after linking: no unions any more).
__global__ void flatten_kernel(std::uint32_t* parent, std::size_t n) {
  const std::size_t s = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (s >= n) return;
  std::uint32_t r = parent[s];
  while (parent[r] != r) r = parent[r];
  parent[s] = r;
}

// Each root's smallest member particle index.
__global__ void smallest_member_kernel(const std::uint32_t* __restrict__ root, const std::uint32_t* __restrict__ order,
                                       std::size_t n, std::uint32_t* __restrict__ smallest) {
  const std::size_t s = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (s >= n) return;
  atomicMin(smallest + root[s], order[s]);
}

// Each particle's label: its root's smallest member.
__global__ void label_kernel(const std::uint32_t* __restrict__ root, const std::uint32_t* __restrict__ order,
                             const std::uint32_t* __restrict__ smallest, std::size_t n,
                             std::uint32_t* __restrict__ label) {
  const std::size_t s = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (s >= n) return;
  label[order[s]] = smallest[root[s]];
}

std::size_t cube(std::int64_t v) { return static_cast<std::size_t>(v) * static_cast<std::size_t>(v) * static_cast<std::size_t>(v); }

}  // namespace

std::size_t fof_device_bytes(std::size_t count, const fof::GridShape& shape) {
  const std::size_t cells = cube(shape.coarse_side);
  const std::size_t sort_temp =
      radix_sort_pairs_bytes<std::uint32_t, std::uint32_t>(std::max<std::size_t>(count, 1), 0, key_bits(cells));
  const std::size_t keys = 4 * count * sizeof(std::uint32_t);   // keys and values, twice
  // The sort's space is given back before the positions and the cell ranges are taken.
  return keys + std::max(sort_temp, 3 * count * sizeof(double) + 2 * cells * sizeof(std::uint32_t)) + 256;
}

std::vector<std::uint32_t> fof_labels(const double* x, const double* y, const double* z, std::size_t n,
                                      double box, double link, cudaStream_t stream) {
  if (n == 0) fail("fof_cuda.cu: friends-of-friends on an empty particle set");
  if (n >= std::numeric_limits<std::uint32_t>::max())
    fail("fof_cuda.cu: {} particles in one friends-of-friends set; at most 2^32 - 2 are supported per rank", n);
  const fof::GridShape shape = fof::grid_shape(box, link, n);   // checks box and link as the host grid
  Cells c;
  c.nc = static_cast<int>(shape.coarse_side);
  c.m = shape.fine_per_coarse;
  c.inv_fine = shape.inv_fine;
  c.fine_limit = shape.fine_limit;
  c.box = box;
  c.l2 = link * link;
  const std::size_t cells = cube(shape.coarse_side);
  const int bits = key_bits(cells);
  AllocationStream scope(stream);

  DeviceArray<std::uint32_t> key_a, key_b, value_a, value_b;
  key_a.ensure_exact(n);
  key_b.ensure_exact(n);
  value_a.ensure_exact(n);
  value_b.ensure_exact(n);
  DeviceArray<unsigned> outside;
  outside.ensure_exact(1);
  ORBIS_CUDA_CHECK(cudaMemsetAsync(outside.data(), 0, sizeof(unsigned), stream));
  cell_keys_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, z, n, c, key_a.data(), value_a.data(), outside.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  unsigned outside_host = 0;
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(&outside_host, outside.data(), sizeof(unsigned), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  outside.release();
  if (outside_host)
    fail("fof_cuda.cu: a particle position lies outside [0, {}) Mpc/h; expected positions wrapped into the "
         "periodic box", box);

  // Slots by cell (stable: by particle index within a cell).
  cub::DoubleBuffer<std::uint32_t> keys(key_a.data(), key_b.data());
  cub::DoubleBuffer<std::uint32_t> values(value_a.data(), value_b.data());
  {
    const std::size_t temp_bytes = radix_sort_pairs_bytes<std::uint32_t, std::uint32_t>(n, 0, bits);
    DeviceArray<unsigned char> temp;
    temp.ensure_exact(temp_bytes);
    radix_sort_pairs(temp.data(), temp_bytes, keys, values, n, 0, bits, stream);
    temp.release();
  }
  std::uint32_t* const key = keys.Current();
  std::uint32_t* const order = values.Current();
  std::uint32_t* const parent = keys.Alternate();     // free after the sort
  std::uint32_t* const smallest = values.Alternate();

  DeviceArray<std::uint32_t> begin, end;
  begin.ensure_exact(cells);
  end.ensure_exact(cells);
  ORBIS_CUDA_CHECK(cudaMemsetAsync(begin.data(), 0, cells * sizeof(std::uint32_t), stream));
  ORBIS_CUDA_CHECK(cudaMemsetAsync(end.data(), 0, cells * sizeof(std::uint32_t), stream));
  cell_bounds_kernel<<<blocks_for(n), kThreads, 0, stream>>>(key, n, begin.data(), end.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  DeviceArray<double> sorted;
  sorted.ensure_exact(3 * n);
  gather_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, z, order, n, sorted.data(), parent);
  ORBIS_CUDA_CHECK(cudaGetLastError());

  link_kernel<<<blocks_for(n), kThreads, 0, stream>>>(sorted.data(), key, begin.data(), end.data(), n, c, parent);
  ORBIS_CUDA_CHECK(cudaGetLastError());
  sorted.release();
  begin.release();
  end.release();

  flatten_kernel<<<blocks_for(n), kThreads, 0, stream>>>(parent, n);
  ORBIS_CUDA_CHECK(cudaGetLastError());
  ORBIS_CUDA_CHECK(cudaMemsetAsync(smallest, 0xff, n * sizeof(std::uint32_t), stream));
  smallest_member_kernel<<<blocks_for(n), kThreads, 0, stream>>>(parent, order, n, smallest);
  ORBIS_CUDA_CHECK(cudaGetLastError());
  std::uint32_t* const label = key;   // the cell keys are not needed any more
  label_kernel<<<blocks_for(n), kThreads, 0, stream>>>(parent, order, smallest, n, label);
  ORBIS_CUDA_CHECK(cudaGetLastError());

  std::vector<std::uint32_t> out(n);
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(out.data(), label, n * sizeof(std::uint32_t), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  key_a.release();
  key_b.release();
  value_a.release();
  value_b.release();
  return out;
}

}  // namespace orbis::gpu
