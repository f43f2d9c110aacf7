// Writing one snapshot of N^3 particles over the ranks (issue #29: two ranks took ~6x one
// rank's time for the same bytes). The particles are a grid, IDs in lexicographic grid order
// as the grid ICs number them (1..N: dense; ids=sparse: 3 c + 1 for cell c, which the writer
// must sort). layout=slabs: rank r holds the x-slab r of the grid, in the Morton order of the
// cells, not in ID order (a run's ranks hold theirs in the tree's order); layout=dealt: the
// cells in Morton order dealt to the ranks in turn (every part of the ID order then comes
// from every rank). One rank holds them in ID order (a one-rank run's). Prints the best and
// the median seconds of `repeats` writes on rank 0 (wall time of the collective
// write_snapshot, the commit's fsync and rename included), the CPU seconds of all ranks
// together for the best write (on a loaded machine steadier than the wall; a rank spinning
// in MPI counts), and a checksum of the file's bytes, which must not change when the write
// gets faster. folder=/dev/shm leaves the disk out.
//   mpirun -np 2 bench_snapshot_write [particles_per_side=128] [files=1] [repeats=3]
//                                     [layout=slabs|dealt] [ids=dense|sparse] [folder]
// OMP_NUM_THREADS sets the threads of each rank.
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "core/parallel.hpp"
#include "core/timer.hpp"
#include "io/snapshot.hpp"

using namespace orbis;

namespace {

// The bits of x, y and z interleaved (21 bits each): the Morton key of a grid cell.
std::uint64_t morton(std::uint64_t x, std::uint64_t y, std::uint64_t z) {
  auto spread = [](std::uint64_t v) {
    std::uint64_t out = 0;
    for (int b = 0; b < 21; ++b) out |= ((v >> b) & 1u) << (3 * b);
    return out;
  };
  return spread(x) << 2 | spread(y) << 1 | spread(z);
}

// This rank's cells of the side^3 grid (slabs or dealt), in Morton order (ID order on one rank).
Particles my_cells(std::size_t side, double box, bool dealt, bool sparse, const Comm& comm) {
  const int ranks = comm.size(), me = comm.rank();
  std::vector<std::uint64_t> cells;
  for (std::size_t x = 0; x < side; ++x) {
    if (!dealt && (x < side * me / ranks || x >= side * (me + 1) / ranks)) continue;
    for (std::size_t y = 0; y < side; ++y)
      for (std::size_t z = 0; z < side; ++z) cells.push_back((x * side + y) * side + z);
  }
  if (ranks > 1) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> keyed(cells.size());
    for (std::size_t k = 0; k < cells.size(); ++k) {
      const std::uint64_t c = cells[k];
      keyed[k] = {morton(c / (side * side), c / side % side, c % side), c};
    }
    std::sort(keyed.begin(), keyed.end());
    cells.clear();
    for (std::size_t k = 0; k < keyed.size(); ++k)
      if (!dealt || static_cast<int>(k % static_cast<std::size_t>(ranks)) == me) cells.push_back(keyed[k].second);
  }
  Particles p;
  p.mass = 1;
  p.resize(cells.size());
  const double spacing = box / static_cast<double>(side);
  for (std::size_t k = 0; k < cells.size(); ++k) {
    const std::uint64_t c = cells[k];
    const double x = static_cast<double>(c / (side * side)), y = static_cast<double>(c / side % side),
                 z = static_cast<double>(c % side);
    p.id[k] = sparse ? 3 * c + 1 : c + 1;   // 1-based, as the grid ICs number them
    p.pos[k] = {(x + 0.25) * spacing, (y + 0.5) * spacing, (z + 0.75) * spacing};
    p.mom[k] = {std::sin(0.1 * static_cast<double>(c)), x - y, 1e-3 * z};
  }
  return p;
}

// CPU seconds of this process, all its threads.
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// FNV-1a of the file's bytes.
std::uint64_t checksum(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buffer(1 << 20);
  std::uint64_t h = 1469598103934665603ull;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    for (std::streamsize i = 0; i < in.gcount(); ++i)
      h = (h ^ static_cast<unsigned char>(buffer[i])) * 1099511628211ull;
  }
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  parallel::init(&argc, &argv);
  {
    const Comm comm = Comm::world();
    log::set_rank(comm.rank(), comm.size());
    const std::size_t side = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 128;
    const int files = argc > 2 ? std::atoi(argv[2]) : 1;
    const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
    const std::string layout = argc > 4 ? argv[4] : "slabs", ids = argc > 5 ? argv[5] : "dense";
    if ((layout != "slabs" && layout != "dealt") || (ids != "dense" && ids != "sparse")) {
      if (comm.is_root()) std::fprintf(stderr, "layout: slabs or dealt; ids: dense or sparse\n");
      parallel::finalize();
      return 2;
    }
    std::string folder;
    if (comm.is_root()) {
      folder = ((argc > 6 ? std::filesystem::path(argv[6]) : std::filesystem::temp_directory_path()) /
                "orbis_bench_snapshot_write")
                   .string();
      std::filesystem::remove_all(folder);
      std::filesystem::create_directories(folder);
    }
    comm.broadcast(folder);
    const double box = 100.0;
    const Params params = Params::parse("[box]\nsize_mpc_h = 100.0\nparticles_per_side = " + std::to_string(side) +
                                            "\n[output]\nfiles_per_snapshot = " + std::to_string(files) + "\n",
                                        "bench");
    const Particles p = my_cells(side, box, layout == "dealt", ids == "sparse", comm);
    std::vector<double> seconds, cpu;
    std::vector<std::string> names;
    for (int r = 0; r < repeats; ++r) {
      comm.barrier();
      Stopwatch watch;
      const double cpu_start = cpu_seconds();
      names = write_snapshot(folder + "/snapshot.hdf5", p, 0.5, params, {}, comm);
      const double cpu_mine = cpu_seconds() - cpu_start;
      comm.barrier();
      seconds.push_back(watch.seconds());
      cpu.push_back(comm.sum(cpu_mine));
    }
    if (comm.is_root()) {
      std::uint64_t sum = 0;
      for (const std::string& name : names) sum ^= checksum(name);
      std::vector<double> sorted = seconds;
      std::sort(sorted.begin(), sorted.end());
      const double best_cpu = cpu[std::min_element(seconds.begin(), seconds.end()) - seconds.begin()];
      std::printf("| particles | files | layout | IDs | ranks x threads | best s | median s | CPU s | checksum |\n");
      std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
      std::printf("| %zu^3 | %d | %s | %s | %s | %.3f | %.3f | %.3f | %016llx |\n", side, files, layout.c_str(),
                  ids.c_str(), parallel::describe().c_str(), sorted.front(), sorted[sorted.size() / 2], best_cpu,
                  static_cast<unsigned long long>(sum));
      std::filesystem::remove_all(folder);
    }
  }
  parallel::finalize();
  return 0;
}
