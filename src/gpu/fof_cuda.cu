#include "gpu/fof_cuda.cuh"

#include <algorithm>
#include <cmath>
#include <limits>

#include "analysis/fof_grid.hpp"
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

// *outside set when a position is not in [0, box) (or is NaN), as the host grid refuses it.
__global__ void inside_kernel(const double* __restrict__ x, const double* __restrict__ y, const double* __restrict__ z,
                              std::size_t n, double box, unsigned* __restrict__ outside) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const double px = x[i], py = y[i], pz = z[i];
  if (!(px >= 0 && px < box && py >= 0 && py < box && pz >= 0 && pz < box)) *outside = 1;
}

// The host grid's coarse cell of a position (CellGrid's coarse_of: the fine cell divided by m).
__device__ std::uint32_t host_cell(double px, double py, double pz, const Cells& c) {
  const std::int64_t side = c.nc * c.m;
  const std::int64_t cx = fof::fine_axis(px, c.inv_fine, c.fine_limit, side) / c.m;
  const std::int64_t cy = fof::fine_axis(py, c.inv_fine, c.fine_limit, side) / c.m;
  const std::int64_t cz = fof::fine_axis(pz, c.inv_fine, c.fine_limit, side) / c.m;
  return static_cast<std::uint32_t>((cx * c.nc + cy) * c.nc + cz);
}

// Host coarse cell of every particle, and the slot order to be sorted.
__global__ void cell_keys_kernel(const double* __restrict__ x, const double* __restrict__ y,
                                 const double* __restrict__ z, std::size_t n, Cells c,
                                 std::uint32_t* __restrict__ key, std::uint32_t* __restrict__ index) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  key[i] = host_cell(x[i], y[i], z[i], c);
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

// The host's test of particles s and t whose host cells are adjacent at offset o from s's
// (fof.cpp's CellLinker): shift = floor_div(s's cell + o, nc) * box per axis, t's image next
// to s. The host computes a pair once, with a = the particle whose cell has the other's at a
// half-shell offset (o > 0 in (x, y, z) lexicographic order, or o = 0) and b shifted to its
// image next to a: x_a - (x_b + shift_b). With o in the half shell that is x_s - (x_t +
// shift); otherwise the host's a is t and its shift of s is -shift: x_t - (x_s - shift). With
// shift 0 both are +-(x_s - x_t), exactly. The sum of squares in the host's order (norm2:
// (x^2 + y^2) + z^2), each operation rounded on its own (no FMA), compared as there: <= l^2.
__device__ bool within_link(double xs, double ys, double zs, double xt, double yt, double zt, double sx, double sy,
                            double sz, bool half_shell, double l2) {
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
  return __dadd_rn(__dadd_rn(__dmul_rn(ex, ex), __dmul_rn(ey, ey)), __dmul_rn(ez, ez)) <= l2;
}

// The path over the host's own cells: slot s against every later slot t of the 27 neighbour
// cells at unwrapped offset d from s's cell (o = d for within_link); over 1 or 2 cells per side
// several d reach one cell at different periodic images, each of which the host tests too.
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
          if (within_link(xs, ys, zs, sorted[t], sorted[n + t], sorted[2 * n + t], sx, sy, sz, half_shell, c.l2))
            unite(static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(t), parent);
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

// ---------------------------------------------------------------- links over the search grid
// The search grid: cells of side >= l (1 + 1e-6), ns per box side. A pair the host links is
// within l up to the rounding of its positions (~1e-16 box), so it lies in adjacent search
// cells. The pair is then tested as the host tests it: only when their host coarse cells are
// adjacent, and with the host's image and order, derived from those cells (with nc >= 3 each
// two adjacent cells are so in one way only). In dense haloes a search cell holds ~ (nc / ns)^3
// times fewer particles than a host coarse cell (hundreds of times fewer at the default b).
struct Search {
  std::uint64_t ns = 3;   // cells per side
  double inv_side = 0;    // ns / box
};

__device__ std::uint64_t search_axis(double v, const Search& g) {
  const double t = v * g.inv_side;
  const std::uint64_t i = t >= 0 ? static_cast<std::uint64_t>(t) : 0;
  return i < g.ns ? i : g.ns - 1;
}

// Search cell of every particle (x-major keys), and the slot order to be sorted.
__global__ void search_keys_kernel(const double* __restrict__ x, const double* __restrict__ y,
                                   const double* __restrict__ z, std::size_t n, Search g,
                                   std::uint64_t* __restrict__ key, std::uint32_t* __restrict__ index) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  key[i] = (search_axis(x[i], g) * g.ns + search_axis(y[i], g)) * g.ns + search_axis(z[i], g);
  index[i] = static_cast<std::uint32_t>(i);
}

// Positions in slot order, every slot its own set, and each slot's host coarse cell.
__global__ void gather_host_cells_kernel(const double* __restrict__ x, const double* __restrict__ y,
                                         const double* __restrict__ z, const std::uint32_t* __restrict__ order,
                                         std::size_t n, Cells c, double* __restrict__ sorted,
                                         std::uint32_t* __restrict__ parent, std::uint32_t* __restrict__ hcell) {
  const std::size_t s = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (s >= n) return;
  const std::uint32_t i = order[s];
  const double px = x[i], py = y[i], pz = z[i];
  sorted[s] = px;
  sorted[n + s] = py;
  sorted[2 * n + s] = pz;
  parent[s] = static_cast<std::uint32_t>(s);
  hcell[s] = host_cell(px, py, pz, c);
}

// The host's offset o (-1, 0, 1) from host cell coordinate hs to ht along one axis and the
// periodic shift of t's image next to s (floor_div(hs + o, nc) * box); false when the cells
// are not adjacent (the host never tests the pair).
__device__ bool host_offset(int hs, int ht, int nc, double box, int& o, double& shift) {
  const int d = ht - hs;
  shift = 0.0;
  if (d >= -1 && d <= 1) {
    o = d;
    return true;
  }
  if (d == -(nc - 1)) {   // s in the last cell, t in the first: t is s's +1 neighbour, one box on
    o = 1;
    shift = box;
    return true;
  }
  if (d == nc - 1) {      // s in the first cell, t in the last: t is s's -1 neighbour, one box back
    o = -1;
    shift = -box;
    return true;
  }
  return false;
}

// The first slot in [from, n) whose key is >= v.
__device__ std::size_t lower_bound(const std::uint64_t* __restrict__ key, std::size_t from, std::size_t n,
                                   std::uint64_t v) {
  std::size_t lo = from, hi = n;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (key[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// Slot s against every later slot t of the 27 neighbour search cells: a neighbour column's
// three z cells are one key range (two at a z face), and a range wholly below s's key holds
// only earlier slots. Each pair is tested with link_test's host arithmetic.
__global__ void search_link_kernel(const double* __restrict__ sorted, const std::uint64_t* __restrict__ key,
                                   const std::uint32_t* __restrict__ hcell, std::size_t n, Search g, Cells c,
                                   std::uint32_t* parent) {
  const std::size_t s = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (s >= n) return;
  const std::uint64_t ns = g.ns, own = key[s];
  const std::uint64_t iz = own % ns, iy = (own / ns) % ns, ix = own / (ns * ns);
  const int nc = c.nc;
  const std::uint32_t hs = hcell[s];
  const int hx = static_cast<int>(hs / (static_cast<std::uint32_t>(nc) * nc));
  const int hy = static_cast<int>((hs / nc) % nc);
  const int hz = static_cast<int>(hs % nc);
  const double xs = sorted[s], ys = sorted[n + s], zs = sorted[2 * n + s];
  const auto wrap = [ns](std::uint64_t i, int d) {   // the neighbour cell's coordinate (ns >= 3)
    return d < 0 ? (i == 0 ? ns - 1 : i - 1) : d > 0 ? (i + 1 == ns ? 0 : i + 1) : i;
  };
  for (int dx = -1; dx <= 1; ++dx) {
    const std::uint64_t bx = wrap(ix, dx);
    for (int dy = -1; dy <= 1; ++dy) {
      const std::uint64_t base = (bx * ns + wrap(iy, dy)) * ns;
      // The column's z cells iz-1 .. iz+1 as key ranges [lo, hi].
      std::uint64_t lo[2], hi[2];
      int ranges = 1;
      if (iz == 0) {
        lo[0] = base, hi[0] = base + 1, lo[1] = hi[1] = base + ns - 1, ranges = 2;
      } else if (iz == ns - 1) {
        lo[0] = base + ns - 2, hi[0] = base + ns - 1, lo[1] = hi[1] = base, ranges = 2;
      } else {
        lo[0] = base + iz - 1, hi[0] = base + iz + 1;
      }
      for (int r = 0; r < ranges; ++r) {
        if (hi[r] < own) continue;   // only earlier slots there
        std::size_t t = lo[r] <= own ? s + 1 : lower_bound(key, s + 1, n, lo[r]);
        for (; t < n && key[t] <= hi[r]; ++t) {
          const std::uint32_t ht = hcell[t];
          int ox, oy, oz;
          double sx, sy, sz;
          if (!host_offset(hx, static_cast<int>(ht / (static_cast<std::uint32_t>(nc) * nc)), nc, c.box, ox, sx) ||
              !host_offset(hy, static_cast<int>((ht / nc) % nc), nc, c.box, oy, sy) ||
              !host_offset(hz, static_cast<int>(ht % nc), nc, c.box, oz, sz))
            continue;
          const bool half_shell = ox > 0 || (ox == 0 && (oy > 0 || (oy == 0 && oz >= 0)));
          if (within_link(xs, ys, zs, sorted[t], sorted[n + t], sorted[2 * n + t], sx, sy, sz, half_shell, c.l2))
            unite(static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(t), parent);
        }
      }
    }
  }
}

// ---------------------------------------------------------------- a rank's share and its ghosts
// periodic_wrap_position (core/vec3.hpp) with each operation rounded on its own: this file is
// built with FMA contraction, which would round x - box * floor(x / box) once instead of twice.
__device__ double wrap_position(double x, double box) {
  const double y = __dsub_rn(x, __dmul_rn(box, floor(__ddiv_rn(x, box))));
  return y >= box ? __dsub_rn(y, box) : y;
}

// The own particles (x | y | z blocks of n) wrapped into the set (x | y | z blocks of stride).
__global__ void wrap_own_kernel(const double* __restrict__ x, const double* __restrict__ y,
                                const double* __restrict__ z, std::size_t n, double box, std::size_t stride,
                                double* __restrict__ set) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  set[i] = wrap_position(x[i], box);
  set[stride + i] = wrap_position(y[i], box);
  set[2 * stride + i] = wrap_position(z[i], box);
}

// The ghosts (x, y, z interleaved) wrapped into the set after its `first` own particles.
__global__ void wrap_ghosts_kernel(const double* __restrict__ xyz, std::size_t count, double box, std::size_t first,
                                   std::size_t stride, double* __restrict__ set) {
  const std::size_t j = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (j >= count) return;
  set[first + j] = wrap_position(xyz[3 * j], box);
  set[stride + first + j] = wrap_position(xyz[3 * j + 1], box);
  set[2 * stride + first + j] = wrap_position(xyz[3 * j + 2], box);
}

std::size_t cube(std::int64_t v) {
  const auto u = static_cast<std::size_t>(v);
  return u * u * u;
}

// The search grid for a linking length, or ns < 3 when it cannot be used.
Search search_grid(double box, double link) {
  Search g;
  const double cells = std::floor(box / (link * (1.0 + 1e-6)));
  g.ns = static_cast<std::uint64_t>(std::clamp(cells, 1.0, static_cast<double>((1u << 21) - 1)));
  g.inv_side = static_cast<double>(g.ns) / box;
  return g;
}
bool use_search_grid(const fof::GridShape& shape, const Search& g) { return shape.coarse_side >= 3 && g.ns >= 3; }

void check_inside(const double* x, const double* y, const double* z, std::size_t n, double box, cudaStream_t stream) {
  DeviceArray<unsigned> outside;
  outside.ensure_exact(1);
  ORBIS_CUDA_CHECK(cudaMemsetAsync(outside.data(), 0, sizeof(unsigned), stream));
  inside_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, z, n, box, outside.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  unsigned outside_host = 0;
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(&outside_host, outside.data(), sizeof(unsigned), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  outside.release();
  if (outside_host)
    fail("fof_cuda.cu: a particle position lies outside [0, {}) Mpc/h; expected positions wrapped into the "
         "periodic box", box);
}

// After linking: `label` (by particle) from the slots' sets; `smallest` is scratch.
void labels_from_sets(std::uint32_t* parent, const std::uint32_t* order, std::uint32_t* smallest, std::size_t n,
                      std::uint32_t* label, cudaStream_t stream) {
  flatten_kernel<<<blocks_for(n), kThreads, 0, stream>>>(parent, n);
  ORBIS_CUDA_CHECK(cudaGetLastError());
  ORBIS_CUDA_CHECK(cudaMemsetAsync(smallest, 0xff, n * sizeof(std::uint32_t), stream));
  smallest_member_kernel<<<blocks_for(n), kThreads, 0, stream>>>(parent, order, n, smallest);
  ORBIS_CUDA_CHECK(cudaGetLastError());
  label_kernel<<<blocks_for(n), kThreads, 0, stream>>>(parent, order, smallest, n, label);
  ORBIS_CUDA_CHECK(cudaGetLastError());
}

std::vector<std::uint32_t> download_labels(const std::uint32_t* label, std::size_t n, cudaStream_t stream) {
  std::vector<std::uint32_t> out(n);
  ORBIS_CUDA_CHECK(cudaMemcpyAsync(out.data(), label, n * sizeof(std::uint32_t), cudaMemcpyDeviceToHost, stream));
  ORBIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  return out;
}

// Over the host's own coarse cells, each neighbour at every periodic image the host tests
// (the path for 1 or 2 cells per side, where images alias; fine for few particles).
std::vector<std::uint32_t> labels_by_host_cells(const double* x, const double* y, const double* z, std::size_t n,
                                                const Cells& c, cudaStream_t stream) {
  const std::size_t cells = cube(c.nc);
  const int bits = key_bits(cells);
  DeviceArray<std::uint32_t> key_a, key_b, value_a, value_b;
  key_a.ensure_exact(n);
  key_b.ensure_exact(n);
  value_a.ensure_exact(n);
  value_b.ensure_exact(n);
  cell_keys_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, z, n, c, key_a.data(), value_a.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
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
  labels_from_sets(parent, order, smallest, n, key, stream);   // the cell keys are not needed any more
  std::vector<std::uint32_t> out = download_labels(key, n, stream);
  key_a.release();
  key_b.release();
  value_a.release();
  value_b.release();
  return out;
}

// Over the search grid (see Search).
std::vector<std::uint32_t> labels_by_search_cells(const double* x, const double* y, const double* z, std::size_t n,
                                                  const Cells& c, const Search& g, cudaStream_t stream) {
  const int bits = 3 * key_bits(static_cast<std::size_t>(g.ns));
  DeviceArray<std::uint64_t> key_a, key_b;
  DeviceArray<std::uint32_t> value_a, value_b;
  key_a.ensure_exact(n);
  key_b.ensure_exact(n);
  value_a.ensure_exact(n);
  value_b.ensure_exact(n);
  search_keys_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, z, n, g, key_a.data(), value_a.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  cub::DoubleBuffer<std::uint64_t> keys(key_a.data(), key_b.data());
  cub::DoubleBuffer<std::uint32_t> values(value_a.data(), value_b.data());
  {
    const std::size_t temp_bytes = radix_sort_pairs_bytes<std::uint64_t, std::uint32_t>(n, 0, bits);
    DeviceArray<unsigned char> temp;
    temp.ensure_exact(temp_bytes);
    radix_sort_pairs(temp.data(), temp_bytes, keys, values, n, 0, bits, stream);
    temp.release();
  }
  const std::uint64_t* const key = keys.Current();
  std::uint32_t* const order = values.Current();
  // Free after the sort: the other key buffer holds the sets and the labels' scratch.
  std::uint32_t* const parent = reinterpret_cast<std::uint32_t*>(keys.Alternate());
  std::uint32_t* const smallest = parent + n;
  std::uint32_t* const label = values.Alternate();

  DeviceArray<double> sorted;
  DeviceArray<std::uint32_t> hcell;
  sorted.ensure_exact(3 * n);
  hcell.ensure_exact(n);
  gather_host_cells_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, z, order, n, c, sorted.data(), parent,
                                                                   hcell.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  search_link_kernel<<<blocks_for(n), kThreads, 0, stream>>>(sorted.data(), key, hcell.data(), n, g, c, parent);
  ORBIS_CUDA_CHECK(cudaGetLastError());
  sorted.release();
  hcell.release();
  labels_from_sets(parent, order, smallest, n, label, stream);
  std::vector<std::uint32_t> out = download_labels(label, n, stream);
  key_a.release();
  key_b.release();
  value_a.release();
  value_b.release();
  return out;
}

}  // namespace

std::size_t fof_device_bytes(std::size_t count, double box, double link) {
  const fof::GridShape shape = fof::grid_shape(box, link, std::max<std::size_t>(count, 1));
  const Search g = search_grid(box, link);
  const std::size_t n = std::max<std::size_t>(count, 1);
  const std::size_t positions = 3 * n * sizeof(double);
  if (use_search_grid(shape, g)) {
    const int bits = 3 * key_bits(static_cast<std::size_t>(g.ns));
    const std::size_t sort_temp = radix_sort_pairs_bytes<std::uint64_t, std::uint32_t>(n, 0, bits);
    const std::size_t keys = 2 * n * (sizeof(std::uint64_t) + sizeof(std::uint32_t));   // keys and values, twice
    // The sort's space is given back before the positions and the host cells are taken.
    return keys + std::max(sort_temp, positions + n * sizeof(std::uint32_t)) + 1024;
  }
  const std::size_t cells = cube(shape.coarse_side);
  const std::size_t sort_temp = radix_sort_pairs_bytes<std::uint32_t, std::uint32_t>(n, 0, key_bits(cells));
  const std::size_t keys = 4 * n * sizeof(std::uint32_t);
  return keys + std::max(sort_temp, positions + 2 * cells * sizeof(std::uint32_t)) + 1024;
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
  AllocationStream scope(stream);
  check_inside(x, y, z, n, box, stream);
  const Search g = search_grid(box, link);
  if (use_search_grid(shape, g)) return labels_by_search_cells(x, y, z, n, c, g, stream);
  return labels_by_host_cells(x, y, z, n, c, stream);
}

std::size_t fof_with_ghosts_device_bytes(std::size_t own, std::size_t ghosts, double box, double link) {
  const std::size_t total = own + ghosts;
  if (total == 0) return 0;
  // The set's positions for the whole call; beside them first the ghosts' upload, then the linker's arrays.
  return 3 * total * sizeof(double) + std::max(3 * ghosts * sizeof(double), fof_device_bytes(total, box, link));
}

std::vector<std::uint32_t> fof_labels_with_ghosts(const double* x, const double* y, const double* z, std::size_t own,
                                                  const Vec3d* ghosts, std::size_t ghost_count, double box,
                                                  double link, cudaStream_t stream) {
  static_assert(sizeof(Vec3d) == 3 * sizeof(double), "Vec3d: three doubles, uploaded as they lie");
  const std::size_t total = own + ghost_count;
  if (total == 0) return {};
  AllocationStream scope(stream);
  DeviceArray<double> set;
  set.ensure_exact(3 * total);
  if (own > 0) {
    wrap_own_kernel<<<blocks_for(own), kThreads, 0, stream>>>(x, y, z, own, box, total, set.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
  }
  if (ghost_count > 0) {
    DeviceArray<double> uploaded;
    uploaded.ensure_exact(3 * ghost_count);
    uploaded.upload(reinterpret_cast<const double*>(ghosts), 3 * ghost_count);
    wrap_ghosts_kernel<<<blocks_for(ghost_count), kThreads, 0, stream>>>(uploaded.data(), ghost_count, box, own,
                                                                         total, set.data());
    ORBIS_CUDA_CHECK(cudaGetLastError());
    uploaded.release();
  }
  std::vector<std::uint32_t> labels =
      fof_labels(set.data(), set.data() + total, set.data() + 2 * total, total, box, link, stream);
  set.release();
  return labels;
}

}  // namespace orbis::gpu
