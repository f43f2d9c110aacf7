// Friends-of-friends on a clustered 128^3 set: Plummer haloes with a power-law mass
// spectrum (32 to 2e5 particles, ~45% of all particles, core overdensity ~2.5e4) in a
// uniform background. Prints the time of each phase and the extra memory per particle
// beyond the particle arrays. Bars (issue #6): FoF under 2 s on 2 threads, <= 16 B/particle.
// The particles are first in random order (the worst case for memory access: haloes one
// after another, the background random), then in spatial order (as after a tree sort).
// Wall and CPU time are both printed: on a shared machine the CPU time is the reliable one.
//   bench_fof [particles_per_side=128] [threads=2]
#include <omp.h>

#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

#include "analysis/fof.hpp"
#include "analysis/halo_properties.hpp"
#include "core/timer.hpp"
#include "cosmology/cosmology.hpp"
#include "support/fof_samples.hpp"

using namespace orbis;

namespace {

// Resident set size and its peak, bytes, from /proc/self/status.
std::size_t status_bytes(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::strtoull(line.c_str() + std::string(key).size(), nullptr, 10) * 1024;
  return 0;
}
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

}  // namespace

int main(int argc, char** argv) {
  const int side = argc > 1 ? std::atoi(argv[1]) : 128;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  omp_set_num_threads(threads);
  const double box = 100.0;
  std::mt19937_64 rng(2024);
  Particles p = testing::plummer_halo_set(side, box, rng);
  const std::size_t n = p.size();
  const double bytes_particles = static_cast<double>(n) * (2 * sizeof(Vec3d) + sizeof(std::uint64_t));

  const double link = fof::linking_length(n, box, 0.2);
  const std::size_t rss0 = status_bytes("VmRSS:");
  reset_peak_rss();
  // Wall and CPU (all threads) seconds: on a shared machine the CPU time tells what the
  // wall time would be on idle cores (CPU / threads for a well-balanced phase).
  auto cpu = [] { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; };
  Stopwatch total;
  Stopwatch watch;
  double c0 = cpu();
  fof::CellGrid grid(p.pos, box, link);
  const double t_grid = watch.seconds(), c_grid = cpu() - c0;
  watch.restart();
  c0 = cpu();
  fof::DisjointSets sets(n);
  fof::link_particles(grid, p.pos, sets);
  const double t_link = watch.seconds(), c_link = cpu() - c0;
  watch.restart();
  c0 = cpu();
  fof::FofGroups groups = fof::collect_groups(grid, sets, p.id, 32);
  const double t_collect = watch.seconds(), c_collect = cpu() - c0;
  const double t_fof = total.seconds(), c_fof = c_grid + c_link + c_collect;
  const std::size_t peak_fof = status_bytes("VmHWM:");

  watch.restart();
  c0 = cpu();
  Cosmology cosmo(CosmologyParams{0.3, 0.7, -1.0});
  const auto haloes = halo::compute_properties(grid, p, groups, cosmo, 1.0, 0.025 * box / side);
  const double t_props = watch.seconds(), c_props = cpu() - c0;

  // The same particles stored in spatial order (as after a tree or domain sort): the
  // positions the linker reads are then contiguous in memory.
  Particles sorted;
  sorted.resize(n);
  sorted.mass = p.mass;
  for (std::size_t s = 0; s < n; ++s) {
    sorted.pos[s] = p.pos[grid.order()[s]];
    sorted.id[s] = p.id[grid.order()[s]];
  }
  watch.restart();
  c0 = cpu();
  {
    fof::CellGrid grid2(sorted.pos, box, link);
    fof::DisjointSets sets2(n);
    fof::link_particles(grid2, sorted.pos, sets2);
    const auto groups2 = fof::collect_groups(grid2, sets2, sorted.id, 32);
    if (groups2.size() != groups.size() || groups2.length != groups.length) {
      std::printf("bench_fof: the spatially sorted copy gave different groups\n");
      return 1;
    }
  }
  const double t_sorted = watch.seconds(), c_sorted = cpu() - c0;

  const double output_bytes = static_cast<double>(groups.members.size() * 4 + groups.size() * 12);
  const double accounted = static_cast<double>(grid.bytes()) + 4.0 * n /*parent*/ + 4.0 * n /*tag*/;
  const double rss_extra = static_cast<double>(peak_fof > rss0 ? peak_fof - rss0 : 0);

  std::printf("bench_fof: %d^3 = %zu particles, box %.0f Mpc/h, b = 0.2 (l = %.4f Mpc/h), %d threads\n",
              side, n, box, link, threads);
  std::printf("grid: %lld coarse cells/side (%.2f particles/cell), %lld fine cells/coarse side\n",
              static_cast<long long>(grid.coarse_side()),
              static_cast<double>(n) / static_cast<double>(grid.num_cells()),
              static_cast<long long>(grid.fine_per_coarse()));
  std::printf("groups: %zu of >= 32, %zu particles in groups (%.1f%%), largest %u\n", groups.size(),
              groups.members.size(), 100.0 * groups.members.size() / n, groups.size() ? groups.length[0] : 0);
  std::printf("\n| phase                      | wall s  | CPU s   | bar (wall)  |\n"
              "|----------------------------|---------|---------|-------------|\n");
  std::printf("| grid (sort into cells)     | %7.3f | %7.3f |             |\n", t_grid, c_grid);
  std::printf("| link (union-find)          | %7.3f | %7.3f |             |\n", t_link, c_link);
  std::printf("| collect + order groups     | %7.3f | %7.3f |             |\n", t_collect, c_collect);
  std::printf("| FoF total                  | %7.3f | %7.3f | < 2 s: %-4s |\n", t_fof, c_fof, t_fof < 2.0 ? "ok" : "NO");
  std::printf("| halo properties (SO etc.)  | %7.3f | %7.3f |             |\n", t_props, c_props);
  std::printf("| FoF, particles in spatial order | %7.3f | %7.3f | < 2 s: %-4s |\n", t_sorted, c_sorted,
              t_sorted < 2.0 ? "ok" : "NO");
  std::printf("\n| memory beyond particles (%5.1f B/particle)    | B/particle | bar      |\n"
              "|-----------------------------------------------|------------|----------|\n",
              bytes_particles / n);
  std::printf("| FoF working set, accounted (grid+parent+tags) | %10.2f | <= 16 %s |\n", accounted / n,
              accounted / n <= 16 ? "ok" : "NO");
  std::printf("| FoF peak RSS increase, measured (incl. output)| %10.2f |          |\n", rss_extra / n);
  std::printf("| output (member indices, lengths, offsets)     | %10.2f |          |\n", output_bytes / n);
  std::printf("\nhaloes with M200m > 0: %zu of %zu\n", [&] {
    std::size_t k = 0;
    for (const auto& h : haloes) k += h.m_mean200 > 0;
    return k;
  }(), haloes.size());
  return 0;
}
