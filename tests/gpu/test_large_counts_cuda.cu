// The 32-bit limits of the device short-range step at scale: a tree build and one P2P step
// of N particles run twice, once as a run would and once with every CUB call limited to a
// small number of items (the tree's scans and sorts, the M2L sort and the P2P chunks then
// take their split paths); the tree (order, geometry) and the forces must be bitwise the
// same. A third run lowers the walk's 32-bit launch outputs below what one launch emits: the
// walk has no split path there, and stops with a message naming the limit. The
// particle count comes from ORBIS_LARGE_COUNTS_N (default 2^18, so that ctest runs it in
// seconds); on a GPU machine, e.g. ORBIS_LARGE_COUNTS_N=134217728 (512^3) runs the split
// paths of a 1024^3 run at the size one GPU holds. Returns 77 without a usable GPU.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "fmm/short_range.hpp"
#include "gpu/device_buffer.cuh"
#include "gpu/short_range_cuda.cuh"
#include "support/gpu_skip.hpp"

using namespace orbis;

namespace {

// A uniform random set, made on the device (a 64-bit hash of the index and axis: the same
// positions for every run, no host memory, no ties in practice).
__global__ void hashed_positions(std::size_t n, double box, double* soa) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  for (int d = 0; d < 3; ++d) {
    std::uint64_t h = (i * 3 + d) * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 32;
    soa[d * n + i] = box * static_cast<double>(h >> 11) * 0x1.0p-53;
  }
}

struct StepResult {
  std::vector<float> forces;
  std::vector<std::uint32_t> order;
  std::vector<gpu::DeviceNodeGeometry> geometry;
  gpu::DeviceShortRangeStats stats;
  double seconds = 0;
};

StepResult run_step(const double* soa, std::size_t n, const ShortRangeSettings& s, std::size_t cub_items,
                    std::uint64_t launch_outputs) {
  StepResult r;
  gpu::DeviceShortRange sr(s, 0);
  if (cub_items > 0) sr.set_max_cub_items(cub_items);
  if (launch_outputs > 0) sr.set_max_launch_outputs(launch_outputs);
  gpu::DeviceArray<float> out;
  out.ensure_exact(3 * n);
  const auto start = std::chrono::steady_clock::now();
  sr.compute(soa, n, nullptr, 0, out.data(), nullptr);
  r.stats = sr.stats();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.forces.resize(3 * n);
  ORBIS_CUDA_CHECK(cudaMemcpy(r.forces.data(), out.data(), 3 * n * sizeof(float), cudaMemcpyDeviceToHost));
  r.order.resize(n);
  ORBIS_CUDA_CHECK(cudaMemcpy(r.order.data(), sr.tree().order(), n * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
  r.geometry.resize(sr.tree().n_nodes());
  ORBIS_CUDA_CHECK(cudaMemcpy(r.geometry.data(), sr.tree().geometry(),
                              r.geometry.size() * sizeof(gpu::DeviceNodeGeometry), cudaMemcpyDeviceToHost));
  return r;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

}  // namespace

TEST_CASE("device tree and P2P step with the 32-bit limits lowered: bitwise the unlowered step") {
  test::require_gpu_or_skip();
  const char* env = std::getenv("ORBIS_LARGE_COUNTS_N");
  const std::size_t n = env ? std::strtoull(env, nullptr, 10) : (std::size_t{1} << 18);
  REQUIRE(n >= 1000);
  // The default run's scene: r_s = 1.2 mean spacings, r_cut = 5.5 r_s (the P2P pairs per
  // particle of a real run), float P2P, max_leaf 32.
  const double box = 100;
  const double spacing = box / std::cbrt(static_cast<double>(n));
  ShortRangeSettings s;
  s.box_mpc_h = box;
  s.r_s = 1.2 * spacing;
  s.r_cut = 5.5 * s.r_s;
  s.softening = 0.025 * spacing;
  s.g_mass = 43.0071;

  gpu::DeviceArray<double> soa;
  soa.ensure_exact(3 * n);
  hashed_positions<<<static_cast<unsigned>((n + 255) / 256), 256>>>(n, box, soa.data());
  ORBIS_CUDA_CHECK(cudaGetLastError());
  ORBIS_CUDA_CHECK(cudaDeviceSynchronize());

  const StepResult plain = run_step(soa.data(), n, s, 0, 0);
  // About 1/16 of the tree's 3N-item scans, the P2P tasks in chunks of the same size.
  const std::size_t items = std::max<std::size_t>(3 * n / 16, 1000);
  const StepResult lowered = run_step(soa.data(), n, s, items, 0);

  MESSAGE(n << " particles, " << plain.stats.leaves << " leaves, " << plain.stats.p2p_tasks << " P2P tasks, "
          << plain.stats.p2p_interactions << " pairs; unlowered: " << plain.stats.p2p_chunks << " chunk(s), "
          << plain.stats.walk_launches << " walk launches, " << plain.seconds << " s; CUB items <= " << items
          << ": " << lowered.stats.p2p_chunks << " chunks, " << lowered.seconds << " s");
  CHECK(lowered.stats.p2p_chunks > plain.stats.p2p_chunks);
  CHECK(lowered.stats.p2p_tasks == plain.stats.p2p_tasks);
  CHECK(same_bits(lowered.order, plain.order));
  CHECK(same_bits(lowered.geometry, plain.geometry));
  CHECK(same_bits(lowered.forces, plain.forces));
  // The forces are forces: finite, and not all zero.
  double sum2 = 0;
  for (float f : plain.forces) sum2 += static_cast<double>(f) * f;
  CHECK(std::isfinite(sum2));
  CHECK(sum2 > 0);

  // The walk's launch outputs below one launch's P2P entries: a clear stop, not a wrong count.
  std::string message;
  try {
    run_step(soa.data(), n, s, 0, plain.stats.p2p_tasks / 64 + 1);
  } catch (const Error& e) {
    message = e.what();
  }
  MESSAGE(message);
  CHECK(message.find("32-bit offsets") != std::string::npos);
  CHECK(message.find("max_leaf") != std::string::npos);
}
