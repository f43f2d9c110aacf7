// The restart bar on the whole demo (params/demo.toml: 64^3 particles to z = 0, four outputs
// with snapshots, power spectra and halo catalogues) on the CUDA step engine: killed with -9
// at three random moments and restarted each time (--restart, from the newest checkpoint),
// it ends with every output file byte-identical to an uninterrupted demo's. On the GPU the
// demo takes seconds, so the bar runs as a test. Returns 77 without a usable GPU.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "integrate/checkpoint.hpp"
#include "support/gpu_skip.hpp"
#include "support/run_command.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;
using test::read_whole_file;
using test::run_command;
using test::start_command;
using test::wait_command;
namespace fs = std::filesystem;

namespace {

// The demo in `folder` (its outputs in folder/out), on the GPU, a checkpoint every 50 steps.
std::string demo(const std::string& folder, const std::string& flags) {
  return "cd '" + folder + "' && exec " + std::string(ORBIS_BINARY) + " run '" + ORBIS_SOURCE_DIR +
         "/params/demo.toml' --set 'output.directory=\"out\"' --set 'gpu.backend=\"cuda\"' "
         "--set checkpoint.every_steps=50 " + flags;
}

bool log_has(const std::string& log, const std::string& text) {
  return read_whole_file(log).find(text) != std::string::npos;
}

void wait_for_log(const std::string& log, const std::string& text) {
  for (int i = 0; i < 6000 && !log_has(log, text); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

// The files a run writes besides its checkpoints.
std::vector<std::string> outputs(const std::string& out) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("checkpoint_", 0) != 0 && name[0] != '.') names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("the demo on the GPU, killed with -9 three times and restarted, ends with identical files") {
  test::require_gpu_or_skip();
  test::ScratchDir dir("demo_kill_cuda");
  const std::string reference = dir.file("reference"), cut = dir.file("cut");
  fs::create_directories(reference);
  fs::create_directories(cut);
  REQUIRE(run_command(demo(reference, ""), reference + "/log.txt") == 0);
  const std::vector<std::string> names = outputs(reference + "/out");
  MESSAGE(names.size() << " output files");
  REQUIRE(names.size() >= 12);   // 4 snapshots, spectra, catalogues, used_parameters.toml, ...

  // Three random moments: the sync points (of about 1500) after which the kills come, at
  // least 100 apart so that each restart resumes from a newer checkpoint, plus a random delay
  // that lands anywhere in a step, a checkpoint or an output.
  std::mt19937 rng(20261125);
  std::uniform_int_distribution<int> step(100, 1400), delay_ms(0, 60);
  std::vector<int> at;
  while (at.size() < 3) {
    const int s = step(rng);
    if (std::all_of(at.begin(), at.end(), [s](int t) { return std::abs(t - s) >= 100; })) at.push_back(s);
  }
  std::sort(at.begin(), at.end());
  int kills = 0, resumed = 0, status = -1;
  for (int attempt = 0; attempt < 10 && status != 0; ++attempt) {
    const bool resume = !find_checkpoints(cut + "/out").empty();
    resumed += resume;
    const std::string log = cut + "/log" + std::to_string(attempt) + ".txt";
    const pid_t pid = start_command(demo(cut, resume ? "--restart" : "--overwrite"), log);
    if (kills < 3) {
      char line[32];
      std::snprintf(line, sizeof line, "step %5d ", at[static_cast<std::size_t>(kills)]);
      wait_for_log(log, line);
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
      ::kill(pid, SIGKILL);
    }
    status = wait_command(pid);
    kills += status == -SIGKILL;
    CAPTURE(read_whole_file(log));
    REQUIRE((status == 0 || status == -SIGKILL));
  }
  REQUIRE(status == 0);
  MESSAGE(kills << " kills (after sync points " << at[0] << ", " << at[1] << ", " << at[2] << "), " << resumed
                << " restarts from a checkpoint");
  CHECK(kills == 3);
  CHECK(resumed >= 3);
  CHECK(outputs(cut + "/out") == names);
  for (const auto& name : names) {
    CAPTURE(name);
    CHECK(read_whole_file(reference + "/out/" + name) == read_whole_file(cut + "/out/" + name));
  }
}
