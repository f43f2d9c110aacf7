// Writing and reading back a checkpoint of N^3 particles in a folder (default: the system's
// temp folder): the seconds of each, the file size and the rate. Bar (issue #15): a 128^3
// checkpoint is written in under 2 s on the development machine's disk. The write includes
// the fsyncs of the file and its folder; the read verifies the checksum of every byte.
//   bench_checkpoint [particles_per_side=128] [folder]
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "core/params.hpp"
#include "core/timer.hpp"
#include "integrate/checkpoint.hpp"

using namespace orbis;

int main(int argc, char** argv) {
  const std::size_t side = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 128;
  const std::string folder = (argc > 2 ? std::filesystem::path(argv[2]) : std::filesystem::temp_directory_path()) /
                             "orbis_bench_checkpoint";
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  const std::size_t n = side * side * side;
  Particles p;
  p.resize(n);
  p.mass = 1;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0, 100);
  for (std::size_t i = 0; i < n; ++i) {
    p.pos[i] = {u(rng), u(rng), u(rng)};
    p.mom[i] = {u(rng), u(rng), u(rng)};
    p.id[i] = i + 1;
  }
  RunState state;
  state.tick = kPmTicks;
  state.steps = 1;
  const Params params =
      Params::parse("[box]\nsize_mpc_h = 100.0\nparticles_per_side = " + std::to_string(side) + "\n", "bench");

  Stopwatch write_watch;
  const std::string path = write_checkpoint(folder, p, state, {}, params);
  const double write_s = write_watch.seconds();
  const double bytes = static_cast<double>(std::filesystem::file_size(path));
  Stopwatch read_watch;
  const Checkpoint back = read_checkpoint(path);
  const double read_s = read_watch.seconds();
  std::printf("| particles | file MB | write s | write MB/s | read+verify s | read MB/s |\n");
  std::printf("| --- | --- | --- | --- | --- | --- |\n");
  std::printf("| %zu^3 | %.1f | %.3f | %.0f | %.3f | %.0f |\n", side, bytes / 1e6, write_s, bytes / 1e6 / write_s,
              read_s, bytes / 1e6 / read_s);
  std::filesystem::remove_all(folder);
  return back.particles.size() == n ? 0 : 1;
}
