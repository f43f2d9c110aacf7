// The short-range step on the device from device positions (gpu/short_range_cuda): the same
// forces as the host solver (fmm/short_range.hpp) with the CPU P2P in the same arithmetic;
// bitwise the same on a second run; and for an active subset (hierarchical time steps)
// the forces of the full computation (bitwise where a whole leaf is active; the P2P packs a
// leaf's active particles and so sums in another order elsewhere), with fewer pairs and the
// inactive particles' forces left as they were; and weights (individual masses) refused by
// the periodic kernels, which assume one mass. Returns 77 without a usable GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "fmm/p2p_cpu.hpp"
#include "fmm/short_range.hpp"
#include "gpu/device_buffer.cuh"
#include "gpu/short_range_cuda.cuh"
#include "support/clustered_particles.hpp"
#include "support/gpu_skip.hpp"
#include "support/whole_leaf_targets.hpp"

using namespace orbis;

namespace {

ShortRangeSettings scene_settings(double box, int n_side) {
  ShortRangeSettings s;
  s.box_mpc_h = box;
  s.r_s = 1.2 * box / n_side;
  s.r_cut = 5.5 * s.r_s;
  s.softening = 0.025 * box / n_side;
  s.g_mass = 43.0071;
  return s;
}

// x | y | z on the device.
struct DevicePositions {
  gpu::DeviceArray<double> soa;
  explicit DevicePositions(const std::vector<Vec3d>& pos) {
    const std::size_t n = pos.size();
    std::vector<double> h(3 * n);
    for (std::size_t i = 0; i < n; ++i)
      for (int d = 0; d < 3; ++d) h[d * n + i] = pos[i][d];
    soa.ensure(3 * n);
    ORBIS_CUDA_CHECK(cudaMemcpy(soa.data(), h.data(), 3 * n * sizeof(double), cudaMemcpyHostToDevice));
  }
};

std::vector<float> download(const gpu::DeviceArray<float>& a, std::size_t count) {
  std::vector<float> h(count);
  ORBIS_CUDA_CHECK(cudaMemcpy(h.data(), a.data(), count * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

}  // namespace

TEST_CASE("device short-range step: the host solver's forces, bitwise repeatable, the same on active subsets") {
  test::require_gpu_or_skip();
  const double box = 100;
  const int n_side = 48;
  const std::vector<Vec3d> pos = test::clustered_particles(n_side, box, 7);
  const std::size_t n = pos.size();
  const ShortRangeSettings s = scene_settings(box, n_side);

  // Host reference: the same tree and task sets, CPU P2P in float with the order-3 table.
  CpuP2PEvaluator cpu;
  std::vector<Vec3d> ref;
  ShortRangeSolver(s).compute(pos, cpu, ref);

  DevicePositions dpos(pos);
  gpu::DeviceShortRange sr(s, 0);
  gpu::DeviceArray<float> out;
  out.ensure(3 * n);
  sr.compute(dpos.soa.data(), n, nullptr, 0, out.data(), nullptr);
  const gpu::DeviceShortRangeStats st = sr.stats();
  const std::vector<float> full = download(out, 3 * n);
  double rms = 0, worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const Vec3d g{full[i], full[n + i], full[2 * n + i]};
    rms += norm2(ref[i]);
    worst = std::max(worst, std::sqrt(norm2(g - ref[i])));
  }
  rms = std::sqrt(rms / static_cast<double>(n));
  MESSAGE("device vs host (CPU float P2P): max |diff| / rms " << worst / rms << "; " << st.leaves << " leaves, "
          << st.p2p_tasks << " P2P tasks, " << st.m2l_tasks << " M2L; times (ms) tree " << 1e3 * st.tree << ", walk "
          << 1e3 * st.walk << " (" << st.walk_launches << " launches, " << st.walk_reruns << " reruns), grouping "
          << 1e3 * st.grouping << ", P2P " << 1e3 * st.p2p << ", far " << 1e3 * st.far_field);
  CHECK(st.m2l_tasks > 0);
  CHECK(worst / rms < 2e-6);   // float P2P in both; summation orders differ

  // Again (a refit of the same positions): bitwise.
  sr.compute(dpos.soa.data(), n, nullptr, 0, out.data(), nullptr);
  const std::vector<float> again = download(out, 3 * n);
  CHECK(std::memcmp(full.data(), again.data(), full.size() * sizeof(float)) == 0);
  CHECK(!sr.stats().rebuilt);

  // The tasks sorted in chunks of target leaves: bitwise the same.
  for (std::size_t parts : {3u, 17u}) {
    sr.set_max_chunk_tasks(st.p2p_tasks / parts + 1);
    sr.compute(dpos.soa.data(), n, nullptr, 0, out.data(), nullptr);
    const std::vector<float> chunked = download(out, 3 * n);
    CAPTURE(parts);
    CHECK(sr.stats().p2p_chunks >= static_cast<int>(parts));
    CHECK(std::memcmp(full.data(), chunked.data(), full.size() * sizeof(float)) == 0);
  }
  sr.set_max_chunk_tasks(0);

  // Every CUB call limited to 1000 items, a fresh step (a full build): the tree build and the
  // M2L sort take CUB's path beyond 2^31 items, and the P2P tasks go in chunks of at most
  // 1000 (one chunk's run-length encoding): bitwise the same.
  {
    gpu::DeviceShortRange limited(s, 0);
    limited.set_max_cub_items(1000);
    limited.compute(dpos.soa.data(), n, nullptr, 0, out.data(), nullptr);
    CHECK(limited.stats().p2p_chunks >= static_cast<int>(st.p2p_tasks / 1000));
    CHECK(std::memcmp(full.data(), download(out, 3 * n).data(), full.size() * sizeof(float)) == 0);
  }

  // Active subset: bin 3 (active at min_active_bin = 3) for the particles with x < 0.3 L and
  // for every fifth particle with x < 0.6 L (leaves partly active), bins 0..2 for the rest
  // (x >= 0.6 L: leaves wholly inactive); the forces go into an array holding a marker.
  std::vector<std::uint8_t> bins(n);
  std::size_t n_active = 0;
  for (std::size_t i = 0; i < n; ++i) {
    bins[i] = static_cast<std::uint8_t>(pos[i].x < 0.3 * box || (pos[i].x < 0.6 * box && i % 5 == 0) ? 3 : i % 3);
    n_active += bins[i] >= 3;
  }
  gpu::DeviceArray<std::uint8_t> dbins;
  dbins.ensure(n);
  ORBIS_CUDA_CHECK(cudaMemcpy(dbins.data(), bins.data(), n, cudaMemcpyHostToDevice));
  const std::vector<float> marker(3 * n, -12345.0f);
  ORBIS_CUDA_CHECK(cudaMemcpy(out.data(), marker.data(), 3 * n * sizeof(float), cudaMemcpyHostToDevice));
  sr.compute(dpos.soa.data(), n, dbins.data(), 3, out.data(), nullptr);
  const gpu::DeviceShortRangeStats sa = sr.stats();
  const std::vector<float> part = download(out, 3 * n);
  std::vector<std::uint8_t> active(n);
  for (std::size_t i = 0; i < n; ++i) active[i] = bins[i] >= 3;
  const std::vector<std::uint8_t> whole = test::whole_leaf_targets(sr.tree(), active);
  std::size_t n_whole = 0, same = 0, untouched = 0;
  double worst_part = 0;
  for (std::size_t i = 0; i < n; ++i) {
    bool equal = true, marked = true;
    for (int d = 0; d < 3; ++d) {
      equal = equal && std::memcmp(&part[d * n + i], &full[d * n + i], sizeof(float)) == 0;
      marked = marked && part[d * n + i] == -12345.0f;
    }
    if (!active[i]) {
      untouched += marked;
      continue;
    }
    n_whole += whole[i];
    same += whole[i] && equal;
    const Vec3d a{part[i], part[n + i], part[2 * n + i]}, b{full[i], full[n + i], full[2 * n + i]};
    worst_part = std::max(worst_part, std::sqrt(norm2(a - b)) / rms);
  }
  MESSAGE("active subset: " << sa.active_particles << " particles in " << sa.active_leaves << " of " << sa.leaves
          << " leaves (" << n_whole << " in wholly active leaves); max |diff| / rms vs the full step " << worst_part
          << "; P2P pairs " << sa.p2p_interactions << " of " << st.p2p_interactions << ", M2L " << sa.m2l_tasks
          << " of " << st.m2l_tasks << "; device ms " << 1e3 * sa.total << " vs " << 1e3 * st.total);
  CHECK(sa.active_particles == n_active);
  CHECK(n_whole > n_active / 4);             // x < 0.3 L: whole leaves
  CHECK(n_whole < n_active);                 // x < 0.6 L: every fifth particle
  CHECK(same == n_whole);                    // a wholly active leaf: the full step's bits
  CHECK(worst_part < 2e-6);                  // the others: the float P2P's summation order
  CHECK(untouched == n - n_active);
  // The pairs evaluated: the active particles' only, so fewer than the active leaves' whole.
  CHECK(sa.p2p_interactions < st.p2p_interactions * (static_cast<double>(n_active) / n + 0.05));
  CHECK(sa.active_leaves < sa.leaves);
}

TEST_CASE("device short-range step: the periodic (truncated) kernels refuse weights") {
  test::require_gpu_or_skip();
  const double box = 100;
  const int n_side = 16;
  const std::vector<Vec3d> pos = test::clustered_particles(n_side, box, 5);
  const std::size_t n = pos.size();
  DevicePositions dpos(pos);
  gpu::DeviceShortRange sr(scene_settings(box, n_side), 0);
  gpu::DeviceArray<float> out;
  out.ensure(3 * n);
  gpu::DeviceArray<double> weights;
  weights.ensure(n);
  const std::vector<double> ones(n, 1.0);
  ORBIS_CUDA_CHECK(cudaMemcpy(weights.data(), ones.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  CHECK_THROWS_AS(sr.compute(dpos.soa.data(), n, nullptr, 0, out.data(), nullptr, weights.data()), Error);
  sr.compute(dpos.soa.data(), n, nullptr, 0, out.data(), nullptr);   // without: as ever
  CHECK(sr.stats().p2p_interactions > 0);
}
