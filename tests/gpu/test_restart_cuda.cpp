// `orbis run --restart` on the CUDA step engine: a run stopped by SIGTERM (checkpoint at the
// end of the first PM step from then on that builds the tree, exit 0), and ones killed with
// -9 after periodic checkpoints (every 10 sync points, or due at every PM step, most of them
// waiting for a tree built afresh), restarted each, end with snapshots whose arrays
// (positions, momenta, IDs) are bitwise those of an uninterrupted run (which wrote no
// checkpoint), and with byte-identical output files. The particles live in device
// memory between steps and a restart rebuilds the tree and recomputes every force from the
// saved positions alone, so this checks that nothing else the engine carries (tree, refit
// counters, PM buffers, bins) changes the trajectory. Hierarchical steps (the default), so the
// time bins go through the checkpoint too. Returns 77 without a usable GPU.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "integrate/checkpoint.hpp"
#include "io/snapshot.hpp"
#include "support/gpu_skip.hpp"
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

// TreePM on the GPU, 32^3 particles in 32 Mpc/h, 2LPT from z = 19 to z = 3 with outputs at
// z = 7 and 3: clustered enough that several time bins are populated. Each run has its own
// folder with this file as run.toml and its outputs in out/ (the files record both names).
const char* kRun = R"([box]
size_mpc_h = 32.0
particles_per_side = 32
[ic]
z_init = 19.0
seed = 77
[time]
z_final = 3.0
output_redshifts = [7.0, 3.0]
[analysis]
fof = false
[gpu]
backend = "cuda"
[checkpoint]
every_steps = 0
every_minutes = 0
[output]
directory = "out"
)";

const std::vector<std::string> kSnapshots = {"snapshot_000.hdf5", "snapshot_001.hdf5"};
const std::vector<std::string> kOtherOutputs = {"powerspec_000.txt", "powerspec_001.txt", "powerspec_001.hdf5"};

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

// Waits (at most a minute) until the log holds `text`; false if it never came.
bool wait_for_log(const std::string& log, const std::string& text) {
  for (int i = 0; i < 6000; ++i) {
    if (log_has(log, text)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

void check_same_outputs(const std::string& reference, const std::string& other) {
  for (const auto& name : kSnapshots) {
    CAPTURE(name);
    REQUIRE(fs::exists(other + "/out/" + name));
    const Snapshot x = read_snapshot(reference + "/out/" + name), y = read_snapshot(other + "/out/" + name);
    REQUIRE(x.particles.size() == 32u * 32u * 32u);
    CHECK(x.header.a == y.header.a);
    CHECK(same_bits(x.particles.pos, y.particles.pos));
    CHECK(same_bits(x.particles.mom, y.particles.mom));
    CHECK(same_bits(x.particles.id, y.particles.id));
    CHECK(read_whole_file(reference + "/out/" + name) == read_whole_file(other + "/out/" + name));
  }
  for (const auto& name : kOtherOutputs) {
    CAPTURE(name);
    REQUIRE(fs::exists(other + "/out/" + name));
    CHECK(read_whole_file(reference + "/out/" + name) == read_whole_file(other + "/out/" + name));
  }
}

// The uninterrupted run, once for both subcases.
const std::string& reference_run() {
  static test::ScratchDir dir("restart_cuda_reference");
  static const std::string folder = [] {
    const std::string f = prepare(dir, "reference");
    REQUIRE(run_command(orbis_run(f), f + "/log.txt") == 0);
    CHECK(log_has(f + "/log.txt", "GPU step engine"));
    CHECK(log_has(f + "/log.txt", "tree built at"));   // the tree policy's summary
    // The particles moved between the outputs: identical files below mean something.
    const Snapshot a = read_snapshot(f + "/out/snapshot_000.hdf5"), b = read_snapshot(f + "/out/snapshot_001.hdf5");
    CHECK_FALSE(same_bits(a.particles.pos, b.particles.pos));
    return f;
  }();
  return folder;
}

}  // namespace

TEST_CASE("CUDA engine: SIGTERM, then --restart, ends bitwise identical to an uninterrupted run; so does kill -9") {
  test::require_gpu_or_skip();
  test::ScratchDir dir("restart_cuda");
  const std::string reference = reference_run();

  SUBCASE("SIGTERM after a few steps") {
    const std::string cut = prepare(dir, "sigterm");
    const pid_t pid = start_command(orbis_run(cut), cut + "/log.txt");
    const bool reached = wait_for_log(cut + "/log.txt", "step    12 ");
    ::kill(pid, SIGTERM);
    CHECK(wait_command(pid) == 0);
    CAPTURE(read_whole_file(cut + "/log.txt"));
    REQUIRE(reached);
    CHECK(log_has(cut + "/log.txt", "SIGTERM received"));
    CHECK(find_checkpoints(cut + "/out").size() == 1);
    CHECK(!fs::exists(cut + "/out/snapshot_001.hdf5"));   // stopped before the last output
    REQUIRE(run_command(orbis_run(cut, "--restart"), cut + "/restart.txt") == 0);
    CAPTURE(read_whole_file(cut + "/restart.txt"));
    CHECK(log_has(cut + "/restart.txt", "restart from"));
    check_same_outputs(reference, cut);
  }

  SUBCASE("kill -9 after a periodic checkpoint, then --restart") {
    const std::string cut = prepare(dir, "kill");
    const pid_t pid = start_command(orbis_run(cut, "--set checkpoint.every_steps=10"), cut + "/log.txt");
    // Killed some steps after its second checkpoint: the restart redoes the steps since.
    const bool reached = wait_for_log(cut + "/log.txt", "checkpoint 'out/checkpoint_") &&
                         wait_for_log(cut + "/log.txt", "step    25 ");
    ::kill(pid, SIGKILL);
    CHECK(wait_command(pid) == -SIGKILL);
    CAPTURE(read_whole_file(cut + "/log.txt"));
    REQUIRE(reached);
    REQUIRE(!find_checkpoints(cut + "/out").empty());
    CHECK(!fs::exists(cut + "/out/snapshot_001.hdf5"));
    REQUIRE(run_command(orbis_run(cut, "--restart"), cut + "/restart.txt") == 0);
    CAPTURE(read_whole_file(cut + "/restart.txt"));
    CHECK(log_has(cut + "/restart.txt", "restart from"));
    check_same_outputs(reference, cut);
  }

  SUBCASE("checkpoints due at every PM step wait for one that builds the tree; kill -9, then --restart") {
    // The engine keeps its tree over [gpu] tree_rebuild_every = 4 PM steps, so most PM steps
    // end on a refitted tree: their checkpoints wait (the run never builds for them, so its
    // trajectory is the reference's, which wrote none).
    const std::string cut = prepare(dir, "every");
    const pid_t pid = start_command(orbis_run(cut, "--set checkpoint.every_steps=1"), cut + "/log.txt");
    const bool reached = wait_for_log(cut + "/log.txt", "step    30 ");
    ::kill(pid, SIGKILL);
    CHECK(wait_command(pid) == -SIGKILL);
    CAPTURE(read_whole_file(cut + "/log.txt"));
    REQUIRE(reached);
    CHECK(log_has(cut + "/log.txt", "it waits for the next PM step that builds the tree"));
    REQUIRE(!find_checkpoints(cut + "/out").empty());
    REQUIRE(run_command(orbis_run(cut, "--restart"), cut + "/restart.txt") == 0);
    CAPTURE(read_whole_file(cut + "/restart.txt"));
    CHECK(log_has(cut + "/restart.txt", "restart from"));
    check_same_outputs(reference, cut);
  }
}
