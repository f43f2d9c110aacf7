// `orbis run` survives being stopped: SIGTERM writes a checkpoint and exits 0; kill -9 at
// random moments leaves only complete files under final names; `--restart` continues from
// the newest complete checkpoint and ends with output files identical byte for byte to an
// uninterrupted run's. --restart without a checkpoint, or with other physics, says so.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "integrate/checkpoint.hpp"
#include "io/hdf5_file.hpp"
#include "support/run_command.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;
using test::read_whole_file;
using test::run_command;
using test::start_command;
using test::wait_command;
using test::write_whole_file;
namespace fs = std::filesystem;

namespace {

// TreePM, 16^3 particles, 33 steps from z = 20 to 10 with an output at z = 15: a few seconds.
// Every run goes in its own folder with this file as run.toml and its outputs in out/, so that
// the files (which record the parameter file's name and the output folder) can be compared.
const char* kRun = R"([box]
size_mpc_h = 32.0
particles_per_side = 16
[ic]
z_init = 20.0
[gravity]
pm_grid_side = 32
[time]
z_final = 10.0
output_redshifts = [15.0]
max_dln_a = 0.02
eta = 0.0
[analysis]
fof = false
[checkpoint]
every_steps = 2
[output]
directory = "out"
)";

const std::vector<std::string> kOutputs = {"snapshot_000.hdf5", "snapshot_001.hdf5", "powerspec_000.txt",
                                           "powerspec_001.txt", "powerspec_001.hdf5"};

std::string prepare(const test::ScratchDir& dir, const std::string& name) {
  const std::string folder = dir.file(name);
  fs::create_directories(folder);
  write_whole_file(folder + "/run.toml", kRun);
  return folder;
}

std::string orbis_run(const std::string& folder, const std::string& flags = "") {
  return "cd '" + folder + "' && exec " + std::string(ORBIS_BINARY) + " run run.toml " + flags;
}

bool log_has(const std::string& log, const std::string& text) {
  return read_whole_file(log).find(text) != std::string::npos;
}

void wait_for_log(const std::string& log, const std::string& text) {
  for (int i = 0; i < 6000 && !log_has(log, text); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

// Waits until the log holds `count` step lines (or the run has ended).
void wait_for_step_lines(const std::string& log, int count) {
  for (int i = 0; i < 6000; ++i) {
    const std::string text = read_whole_file(log);
    int lines = 0;
    for (std::size_t at = text.find(" | active "); at != std::string::npos; at = text.find(" | active ", at + 1)) ++lines;
    if (lines >= count || text.find("finished:") != std::string::npos) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Every file under a final name in the folder is complete: HDF5 files open, checkpoints read
// back with their checksums; anything half-written is a hidden temporary.
void check_only_complete_files(const std::string& out) {
  if (!fs::exists(out)) return;
  for (const auto& entry : fs::directory_iterator(out)) {
    const std::string name = entry.path().filename().string(), path = entry.path().string();
    CAPTURE(path);
    if (name[0] == '.') continue;
    if (path.size() > 5 && path.compare(path.size() - 5, 5, ".hdf5") == 0) CHECK_NOTHROW(H5Reader{path});
    if (path.size() > 6 && path.compare(path.size() - 6, 6, ".orbis") == 0) CHECK_NOTHROW(read_checkpoint(path));
    CHECK(fs::file_size(path) > 0);
  }
}

void check_same_outputs(const std::string& reference, const std::string& other) {
  for (const auto& name : kOutputs) {
    CAPTURE(name);
    REQUIRE(fs::exists(other + "/out/" + name));
    CHECK(read_whole_file(reference + "/out/" + name) == read_whole_file(other + "/out/" + name));
  }
}

}  // namespace

// The uninterrupted run, once for all the test cases.
const std::string& reference_run() {
  static test::ScratchDir dir("restart_reference");
  static const std::string folder = [] {
    const std::string f = prepare(dir, "reference");
    REQUIRE(run_command(orbis_run(f), f + "/log.txt") == 0);
    return f;
  }();
  return folder;
}

TEST_CASE("--restart without a checkpoint, or with other physics, says so") {
  test::ScratchDir dir("restart_refused");
  const std::string reference = reference_run();
  const std::string empty = prepare(dir, "empty");
  CHECK(run_command(orbis_run(empty, "--restart"), empty + "/log.txt") == 1);
  CHECK(log_has(empty + "/log.txt", "holds no checkpoint"));
  CHECK(run_command(orbis_run(reference, "--restart --set cosmology.omega_m=0.3"), dir.file("changed.txt")) == 1);
  CHECK(log_has(dir.file("changed.txt"), "omega_m = 0.3 (the checkpoint has 0.3144)"));
  // A fresh run into a folder with another run's checkpoints refuses, pointing at --restart.
  CHECK(run_command(orbis_run(reference), dir.file("again.txt")) == 1);
  CHECK(log_has(dir.file("again.txt"), "pass --restart"));
}

TEST_CASE("--restart with z_final before the checkpoint, or other outputs before it, says so and writes nothing") {
  test::ScratchDir dir("restart_schedule");
  const std::string reference = reference_run();
  const auto before = fs::last_write_time(reference + "/out/snapshot_001.hdf5");
  const std::size_t files = std::distance(fs::directory_iterator(reference + "/out"), fs::directory_iterator{});
  CHECK(run_command(orbis_run(reference, "--restart --set time.z_final=12.0"), dir.file("z_final.txt")) == 1);
  CHECK(log_has(dir.file("z_final.txt"), "z_final = 12 ends the run there or before"));
  // The newest checkpoint is past the output at z = 15 (output 000): one output before it.
  CHECK(run_command(orbis_run(reference, "--restart --set 'time.output_redshifts=[18.0, 15.0]'"),
                    dir.file("outputs.txt")) == 1);
  CHECK(log_has(dir.file("outputs.txt"), "puts 2 output(s) at or before the checkpoint"));
  CHECK(log_has(dir.file("outputs.txt"), "where the run wrote 1"));
  CHECK(fs::last_write_time(reference + "/out/snapshot_001.hdf5") == before);
  CHECK(std::distance(fs::directory_iterator(reference + "/out"), fs::directory_iterator{}) ==
        static_cast<std::ptrdiff_t>(files));
}

TEST_CASE("SIGTERM writes a checkpoint and exits 0; --restart ends with identical files") {
  test::ScratchDir dir("restart_sigterm");
  const std::string cut = prepare(dir, "sigterm");
  const pid_t pid = start_command(orbis_run(cut, "--set checkpoint.every_steps=0 --set checkpoint.every_minutes=0"),
                                  cut + "/log.txt");
  wait_for_log(cut + "/log.txt", "step     3 ");
  // Twice, as timeout(1) does (to the process, then to its process group): one request. The
  // pause lets the first be handled, so the second is not merged with it while pending.
  ::kill(pid, SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::kill(pid, SIGTERM);
  CHECK(wait_command(pid) == 0);
  CHECK(log_has(cut + "/log.txt", "SIGTERM received"));
  CHECK(find_checkpoints(cut + "/out").size() == 1);
  CHECK(!fs::exists(cut + "/out/snapshot_001.hdf5"));
  REQUIRE(run_command(orbis_run(cut, "--restart"), cut + "/restart.txt") == 0);
  CHECK(log_has(cut + "/restart.txt", "restart from"));
  check_same_outputs(reference_run(), cut);
}

TEST_CASE("kill -9 at random moments leaves only complete files; restarts end with identical files") {
  test::ScratchDir dir("restart_kill");
  // A random moment: after a random number of step lines of the attempt (so that a loaded
  // machine does not push every kill before the first checkpoint), plus a random delay that
  // lands anywhere in a step, a checkpoint or an output.
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int> steps(0, 12), delay_ms(0, 150);
  int restarts = 0;
  for (int trial = 0; trial < 3; ++trial) {
    const std::string cut = prepare(dir, "kill" + std::to_string(trial));
    int kills = 0, status = -1;
    for (int attempt = 0; attempt < 20 && status != 0; ++attempt) {
      const bool resume = !find_checkpoints(cut + "/out").empty();
      restarts += resume;
      const std::string log = cut + "/log" + std::to_string(attempt) + ".txt";
      const pid_t pid = start_command(orbis_run(cut, resume ? "--restart" : "--overwrite"), log);
      if (kills < 2) {
        wait_for_step_lines(log, steps(rng));
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
        ::kill(pid, SIGKILL);
      }
      status = wait_command(pid);
      if (status == -SIGKILL) ++kills;
      CAPTURE(read_whole_file(log));
      REQUIRE((status == 0 || status == -SIGKILL));
      check_only_complete_files(cut + "/out");
    }
    REQUIRE(status == 0);
    check_same_outputs(reference_run(), cut);
  }
  CHECK(restarts > 0);
}
