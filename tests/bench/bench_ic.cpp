// Benchmark of `orbis ic` at 128^3 on 2 threads (issue #2): the time of each phase and the
// peak resident memory against the bars: under 10 s in all, and peak memory <= 2 x (particle
// arrays + one FFT grid). Prints a table; not run by CTest.
//   build/bench/bench_ic [N] [threads]
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/params.hpp"
#include "core/timer.hpp"
#include "cosmology/cosmology.hpp"
#include "cosmology/linear_power.hpp"
#include "ic/ic_power.hpp"
#include "ic/initial_conditions.hpp"
#include "io/atomic_file.hpp"
#include "io/snapshot.hpp"

namespace {

// Peak resident set (VmHWM) or current (VmRSS) of this process, MiB.
double status_mib(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::atof(line.c_str() + std::string(key).size()) / 1024.0;
  return -1;
}

// Resets VmHWM to the current RSS (Linux >= 4.0), so each stage's peak can be read alone.
void reset_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 128;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  omp_set_num_threads(threads);
  const auto dir = std::filesystem::temp_directory_path() / "orbis_bench_ic";
  std::filesystem::create_directories(dir);
  const std::string text = "[box]\nsize_mpc_h = 500.0\nparticles_per_side = " + std::to_string(n) +
                           "\n[output]\ndirectory = \"" + dir.string() + "\"\n";
  orbis::Stopwatch total;
  const orbis::Params params = orbis::Params::parse(text, "bench_ic");
  orbis::Stopwatch setup_watch;
  const orbis::Cosmology cosmology = orbis::Cosmology::from_params(params);
  const orbis::LinearPower power = orbis::LinearPower::from_params(params);
  const orbis::IcSettings settings = orbis::IcSettings::from_params(params);   // self_test on (default)
  const double setup_s = setup_watch.seconds();

  const double rss_before = status_mib("VmRSS:");
  reset_peak();
  orbis::IcReport report;
  orbis::Particles particles = orbis::make_initial_conditions(settings, cosmology, power, &report);
  const double peak_generate = status_mib("VmHWM:");
  reset_peak();
  orbis::Stopwatch write_watch;
  orbis::write_snapshot(orbis::join_path(dir.string(), "ics.hdf5"), particles, report.a_init, params);
  orbis::write_text_atomically(orbis::join_path(dir.string(), "ic_power.txt"),
                               orbis::ic::power_table_text(report.delta_power, report.displacement_power));
  const double write_s = write_watch.seconds();
  const double peak_write = status_mib("VmHWM:");
  const double total_s = total.seconds();

  const double n3 = double(n) * n * n;
  const double particle_mib = n3 * (sizeof(orbis::Vec3d) * 2 + sizeof(std::uint64_t)) / 1048576.0;
  const double mesh_mib = double(n) * n * 2 * (n / 2 + 1) * sizeof(double) / 1048576.0;
  const double bar_mib = 2 * (particle_mib + mesh_mib);

  std::printf("orbis ic benchmark: %d^3 particles, %d threads, 2LPT, self-test on, box 500 Mpc/h\n\n", n, threads);
  std::printf("| phase                    | seconds |\n|--------------------------|---------|\n");
  std::printf("| parameters, P(k), growth | %7.3f |\n", setup_s);
  for (const auto& [phase, s] : report.times.all()) std::printf("| %-24s | %7.3f |\n", phase.c_str(), s);
  std::printf("| write ics.hdf5 + table   | %7.3f |\n", write_s);
  std::printf("| total                    | %7.3f | (bar: < 10 s) %s\n\n", total_s, total_s < 10 ? "OK" : "OVER");
  std::printf("| memory (MiB)                                   |    MiB |\n|------------------------------------------------|--------|\n");
  std::printf("| particle arrays (pos, mom, id: 56 B each)      | %6.1f |\n", particle_mib);
  std::printf("| one FFT grid (double, padded)                  | %6.1f |\n", mesh_mib);
  std::printf("| bar: 2 x (particles + grid)                    | %6.1f |\n", bar_mib);
  std::printf("| RSS before generation (libraries, tables)      | %6.1f |\n", rss_before);
  std::printf("| peak RSS during generation                     | %6.1f | %s\n", peak_generate,
              peak_generate < bar_mib ? "OK" : "OVER");
  std::printf("|   of which above the baseline                  | %6.1f | (model: particles + grid + delta_k = %.1f)\n",
              peak_generate - rss_before, particle_mib + 2 * mesh_mib);
  std::printf("| peak RSS while writing (write_snapshot)        | %6.1f | %s\n", peak_write,
              peak_write < bar_mib ? "OK" : "OVER");
  std::printf("\nsanity: delta rms %.4f at z = %g, displacement rms %.4f Mpc/h\n", report.delta_rms, settings.z_init,
              report.displacement_rms_mpc_h);
  std::filesystem::remove_all(dir);
  return 0;
}
