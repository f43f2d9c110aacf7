#include "gpu/pair_energy_cuda.cuh"

#include <cstdint>
#include <vector>

#include "gpu/cuda_check.cuh"
#include "gpu/device_buffer.cuh"

namespace orbis::gpu {
namespace {

struct PairSumArgs {
  const double *x, *y, *z;          // cell order
  const std::uint32_t* start;       // cell c: [start[c], start[c + 1])
  std::uint32_t n;
  int side, reach;
  double box, cut2, eps2, inv_two_rs;
};

__global__ void pair_potential_kernel(PairSumArgs a, double* psi) {
  const std::uint32_t q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= a.n) return;
  const double xq = a.x[q], yq = a.y[q], zq = a.z[q];
  const int ci = chaining_cell(xq, a.box, a.side), cj = chaining_cell(yq, a.box, a.side),
            ck = chaining_cell(zq, a.box, a.side);
  double sum = 0;
  for (int di = -a.reach; di <= a.reach; ++di)
    for (int dj = -a.reach; dj <= a.reach; ++dj)
      for (int dk = -a.reach; dk <= a.reach; ++dk) {
        const bool own = di == 0 && dj == 0 && dk == 0;
        if (!own && !chaining_forward(di, dj, dk)) continue;
        double sx, sy, sz;
        const int ni = chaining_neighbour(ci + di, a.side, a.box, sx), nj = chaining_neighbour(cj + dj, a.side, a.box, sy),
                  nk = chaining_neighbour(ck + dk, a.side, a.box, sz);
        const std::size_t c = (static_cast<std::size_t>(ni) * a.side + nj) * a.side + nk;
        const double ox = sx - xq, oy = sy - yq, oz = sz - zq;
        for (std::uint32_t j = own ? q + 1 : a.start[c]; j < a.start[c + 1]; ++j) {
          double dx = a.x[j] + ox, dy = a.y[j] + oy, dz = a.z[j] + oz;
          if (a.side == 1) {   // one cell: the minimal image
            dx -= a.box * rint(dx / a.box);
            dy -= a.box * rint(dy / a.box);
            dz -= a.box * rint(dz / a.box);
          }
          const double r2 = dx * dx + dy * dy + dz * dz;
          if (r2 >= a.cut2) continue;
          const double s = sqrt(r2 + a.eps2);
          if (s > 0) sum += erfc(s * a.inv_two_rs) / s;
        }
      }
  psi[q] = sum;
}

}  // namespace

double pair_potential_sum(const PairPotentialInput& in, int device) {
  const std::vector<Vec3d>& pos = *in.positions;
  const std::size_t n = pos.size();
  if (n == 0) return 0.0;
  const ChainingMesh mesh(pos, in.box, in.cut);
  std::vector<double> sorted(3 * n);
  for (std::size_t q = 0; q < n; ++q) {
    const Vec3d& p = pos[mesh.order[q]];
    sorted[q] = p.x, sorted[n + q] = p.y, sorted[2 * n + q] = p.z;
  }
  ORBIS_CUDA_CHECK(cudaSetDevice(device));
  DeviceArray<double> xyz, psi;
  DeviceArray<std::uint32_t> start;
  xyz.ensure(3 * n);
  psi.ensure(n);
  start.ensure(mesh.start.size());
  ORBIS_CUDA_CHECK(cudaMemcpy(xyz.data(), sorted.data(), 3 * n * sizeof(double), cudaMemcpyHostToDevice));
  ORBIS_CUDA_CHECK(cudaMemcpy(start.data(), mesh.start.data(), mesh.start.size() * sizeof(std::uint32_t),
                              cudaMemcpyHostToDevice));
  PairSumArgs a{xyz.data(), xyz.data() + n, xyz.data() + 2 * n, start.data(), static_cast<std::uint32_t>(n),
                mesh.side, mesh.reach, in.box, in.cut * in.cut, in.softening * in.softening, 0.5 / in.r_s};
  constexpr int kThreads = 128;
  pair_potential_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads>>>(a, psi.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  std::vector<double> sums(n);
  ORBIS_CUDA_CHECK(cudaMemcpy(sums.data(), psi.data(), n * sizeof(double), cudaMemcpyDeviceToHost));
  double total = 0;
  for (double s : sums) total += s;
  return total;
}

}  // namespace orbis::gpu
