#include "gpu/pair_energy_cuda.cuh"

#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "gpu/cuda_check.cuh"
#include "gpu/device_buffer.cuh"

namespace orbis::gpu {
namespace {

struct PairSumArgs {
  const double *x, *y, *z;          // cell order
  const std::uint8_t* ghost;        // cell order: 1 for another rank's particle (null: none)
  const std::uint32_t* start;       // cell c: [start[c], start[c + 1])
  std::uint32_t n;
  int side, reach;
  double box, cut2, eps2, inv_two_rs;
};

// One thread per particle of this rank (a ghost's thread writes 0): its partners of this rank
// in the half stencil (in its own cell those after it), the ghosts in the whole stencil with
// their ghost_pair_weight, as pair_potential_sum_cpu.
__global__ void pair_potential_kernel(PairSumArgs a, double* psi) {
  const std::uint32_t q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= a.n) return;
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
        for (std::uint32_t j = own && !ghosts ? q + 1 : a.start[c]; j < a.start[c + 1]; ++j) {
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
          if (s > 0) sum += weight * (erfc(s * a.inv_two_rs) / s);
        }
      }
  psi[q] = sum;
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
