// Checkpoints over several ranks (integrate/checkpoint.hpp): every rank writes its own file
// at the same step; a stop signal that reaches one rank only stops them all at one
// checkpoint; `--restart` on the same rank count ends bitwise where the uninterrupted run
// ends (each rank's particles, and the snapshot arrays); a damaged or missing file of the
// newest checkpoint makes the restart take the previous one; another rank count continues
// (not bitwise: new domains), every particle once.
//
// The run: 16^3 particles from z = 1 to 0 (haloes form, so the ranks' work drifts apart and
// the domains are rebuilt by measured work during the run: the restart must continue with
// the cuts of the run, not new ones), TreePM with block time steps, an output at z = 0.5
// and at the end.
#include <doctest/doctest.h>

#include <signal.h>

#include <atomic>
#include <cmath>
#include <chrono>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/params.hpp"
#include "domain/rank_domains.hpp"
#include "integrate/checkpoint.hpp"
#include "integrate/simulation.hpp"
#include "io/hdf5_file.hpp"
#include "support/clustered_particles.hpp"
#include "support/mpi_scratch.hpp"
#include "support/text_table.hpp"

using orbis::Comm;
namespace fs = std::filesystem;

namespace {

orbis::Params run_params(const std::string& directory, int every_steps) {
  return orbis::Params::parse(
      "[box]\nsize_mpc_h = 24.0\nparticles_per_side = 16\n[ic]\nz_init = 1.0\nseed = 777\n"
      "[gpu]\nbackend = \"cpu\"\n"
      "[gravity]\nsolver = \"treepm\"\npm_grid_side = 32\n"
      "[time]\nz_final = 0.0\noutput_redshifts = [0.5, 0.0]\nmax_dln_a = 0.05\n"
      "[analysis]\nfof = false\n"
      "[checkpoint]\nevery_steps = " + std::to_string(every_steps) + "\nevery_minutes = 0\n"
      "[output]\ndirectory = \"" + directory + "\"\n",
      "restart_ranks.toml");
}

struct Final {
  orbis::Particles particles;   // this rank's, at the end
  orbis::RunSummary summary;
};

Final run(const std::string& directory, int every_steps, bool restart, const Comm& comm) {
  orbis::RunOptions options;
  options.restart = restart;
  orbis::Simulation simulation(run_params(directory, every_steps), options, comm);
  Final f;
  f.summary = simulation.run();
  f.particles = simulation.particles();
  return f;
}

template <typename T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Each rank's particles (in their order there) bitwise equal; false on every rank if not.
bool same_everywhere(const orbis::Particles& a, const orbis::Particles& b, const Comm& comm) {
  const bool same = same_bytes(a.pos, b.pos) && same_bytes(a.mom, b.mom) && a.id == b.id && a.time_bin == b.time_bin &&
                    a.mass == b.mass;
  return comm.all(same);
}

// The snapshot arrays of output `index` (every file of it: one, or several in shares) in two
// folders, bitwise; rank 0 reads them.
bool same_snapshot_arrays(const std::string& a, const std::string& b, int index) {
  const std::string stem = fmt::format("snapshot_{:03d}", index);
  int files = 0;
  for (const auto& entry : fs::directory_iterator(a)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(stem, 0) != 0 || entry.path().extension() != ".hdf5") continue;
    ++files;
    if (!fs::exists(fs::path(b) / name)) return false;
    const orbis::H5Reader x(entry.path().string()), y((fs::path(b) / name).string());
    for (const char* set : {"PartType1/Coordinates", "PartType1/Velocities"})
      if (!same_bytes(x.read<double>(set), y.read<double>(set))) return false;
    if (x.read<std::uint64_t>("PartType1/ParticleIDs") != y.read<std::uint64_t>("PartType1/ParticleIDs")) return false;
  }
  return files > 0;
}

void flip_byte(const std::string& path, std::size_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(at));
  f.put(static_cast<char>(c ^ 0x20));
}

// The run with checkpoints every 8 steps, uninterrupted: the reference of every case below (a
// checkpoint changes nothing in the run). Its folder keeps the last two checkpoints.
struct Reference {
  const orbis::test::SharedScratchDir& dir;
  std::string folder;
  Final final;
};

}  // namespace

TEST_CASE("rank domains saved at a checkpoint come back: the first update keeps them and moves nobody") {
  const Comm world = Comm::world();
  const double box = 50.0;
  const std::vector<orbis::Vec3d> all = orbis::test::uniform_particles(2000, box, 5);
  orbis::Particles mine;
  for (std::size_t i = static_cast<std::size_t>(world.rank()); i < all.size(); i += world.size()) {
    mine.pos.push_back(all[i]);
    mine.mom.push_back({});
    mine.id.push_back(i + 1);
  }
  orbis::RankDomains domains(box, 16, 5, world);
  domains.update(mine, 0.0);
  domains.update(mine, world.rank() == 0 ? 4.0 : 1.0);   // rebuilt by work: runs no count would give
  const std::string state = domains.state();
  CHECK(state.empty() == (world.size() == 1));

  orbis::RankDomains back(box, 16, 5, world);
  back.restore(state, "test");
  orbis::Particles copy = mine;
  back.update(copy, 0.0);
  CHECK(world.all(!back.report().rebuilt));
  CHECK(world.sum(back.report().migrated) == 0u);
  CHECK(world.all(copy.id == mine.id));
  CHECK(back.state() == state);
  if (world.size() > 1)   // another rank count's domains: refused
    CHECK_THROWS_AS(orbis::NodeDomains::from_bytes(state, world.size() + 1, "test"), orbis::Error);
}

// A stop signal on one rank stops every rank at one checkpoint; the restart ends bitwise
// identical.
static void stopped_by_signal_on_one_rank(const Reference& ref) {
  const Comm world = Comm::world();
  CHECK(ref.final.summary.stopped_by.empty());
  const std::string folder = ref.dir.file("signal");
  // The last rank alone gets SIGUSR1 once the run has written its output at z = 0.5 (half
  // way): the ranks agree at the end of the next PM step, write, and stop.
  std::atomic<bool> done{false};
  std::thread sender;
  if (world.rank() == world.size() - 1)
    sender = std::thread([&] {
      const std::string marker = folder + "/powerspec_000.txt";
      while (!done && !fs::exists(marker)) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      if (!done) ::kill(::getpid(), SIGUSR1);
    });
  const Final stopped = run(folder, 0, false, world);
  done = true;
  if (sender.joinable()) sender.join();
  CHECK(stopped.summary.stopped_by == "SIGUSR1");   // on every rank
  CHECK(world.all(stopped.summary.a_final < 0.999));
  std::vector<std::string> files = orbis::find_checkpoints(folder);
  CHECK(files.size() == static_cast<std::size_t>(world.size()));   // one checkpoint, a file per rank
  if (!files.empty()) {
    const std::string mine = orbis::checkpoint_path(folder, stopped.summary.steps, world.rank(), world.size());
    CHECK(fs::exists(mine));
  }

  const Final resumed = run(folder, 0, true, world);
  CHECK(resumed.summary.stopped_by.empty());
  CHECK(resumed.summary.steps == ref.final.summary.steps);
  CHECK(same_everywhere(resumed.particles, ref.final.particles, world));
  world.barrier();
  if (world.is_root()) {
    CHECK(same_snapshot_arrays(ref.folder, folder, 0));
    CHECK(same_snapshot_arrays(ref.folder, folder, 1));
  }
  world.barrier();
}

// A damaged or missing file of the newest checkpoint: the previous one is used, and the
// restart is bitwise.
static void damaged_or_missing_file(const Reference& ref) {
  const Comm world = Comm::world();
  const std::string folder = ref.dir.file("damaged");
  // The reference's last two checkpoints (the newest and the one before), copied.
  if (world.is_root()) fs::copy(ref.folder, folder, fs::copy_options::recursive);
  world.barrier();
  const std::vector<std::string> files = orbis::find_checkpoints(folder);
  CHECK(files.size() == 2 * static_cast<std::size_t>(world.size()));
  const orbis::Checkpoint newest = orbis::read_newest_checkpoint(folder, world);
  const std::int64_t last = newest.state.steps;
  CHECK(newest.rank == world.rank());
  CHECK(newest.ranks == world.size());
  CHECK(newest.domains.empty() == (world.size() == 1));
  const std::string victim = orbis::checkpoint_path(folder, last, world.size() - 1, world.size());
  std::string saved;
  world.barrier();
  if (world.is_root()) {
    std::ifstream in(victim, std::ios::binary);
    saved.assign(std::istreambuf_iterator<char>(in), {});
    flip_byte(victim, saved.size() / 2);
  }
  world.barrier();
  const orbis::Checkpoint previous = orbis::read_newest_checkpoint(folder, world);
  CHECK(world.all(previous.state.steps < last));
  if (world.is_root()) fs::remove(victim);   // a write killed before this file was renamed
  world.barrier();
  CHECK(orbis::read_newest_checkpoint(folder, world).state.steps == previous.state.steps);
  world.barrier();
  if (world.is_root()) {   // the newest back whole: it is taken again
    std::ofstream out(victim, std::ios::binary);
    out << saved;
  }
  world.barrier();
  CHECK(orbis::read_newest_checkpoint(folder, world).state.steps == last);
  world.barrier();
  if (world.is_root()) {
    flip_byte(victim, saved.size() / 3);
    // The outputs after the previous checkpoint go: the restart must write them again.
    for (const auto& entry : fs::directory_iterator(folder))
      if (entry.path().filename().string().find("_001") != std::string::npos) fs::remove(entry.path());
  }
  world.barrier();

  const Final resumed = run(folder, 8, true, world);
  CHECK(resumed.summary.steps == ref.final.summary.steps);
  CHECK(same_everywhere(resumed.particles, ref.final.particles, world));
  world.barrier();
  if (world.is_root()) CHECK(same_snapshot_arrays(ref.folder, folder, 1));
  // The restart passed the damaged checkpoint's step again and wrote it anew.
  CHECK(orbis::read_newest_checkpoint(folder, world).state.steps == last);
  world.barrier();
}

// A restart on another rank count continues, not bitwise: every particle once, the run to
// its end, the final P(k) close to the uninterrupted run's.
static void other_rank_count(const Reference& ref) {
  const Comm world = Comm::world();
  if (world.size() == 1) {
    MESSAGE("one rank: no other rank count to restart on");
    return;
  }
  // More ranks than files: rank 0's file of the reference's newest checkpoint, rewritten as
  // a one-rank checkpoint, read by every rank: rank 0 takes its particles, the others none,
  // and every rank the same run state.
  const std::string single = ref.dir.file("single_file");
  const orbis::Checkpoint newest = orbis::read_newest_checkpoint(ref.folder, world);
  if (world.is_root()) {
    const orbis::Checkpoint c = orbis::read_checkpoint(newest.path);
    fs::create_directories(single);
    orbis::write_checkpoint(single, c.particles, c.state, c.costs, run_params(single, 0), c.domains, Comm::self());
  }
  world.barrier();
  const orbis::Checkpoint spread = orbis::read_newest_checkpoint(single, world);
  CHECK(spread.ranks == 1);
  CHECK(spread.rank == -1);
  CHECK(spread.domains.empty());
  CHECK(spread.particles.size() == (world.is_root() ? newest.particles.size() : 0u));
  CHECK(world.all(spread.state.steps == newest.state.steps && spread.state.a == newest.state.a &&
                  spread.state.output_index == newest.state.output_index &&
                  spread.state.energy.k_integral == newest.state.energy.k_integral &&
                  spread.costs.history.size() == newest.costs.history.size() && !newest.costs.history.empty() &&
                  spread.costs.history.back().ln_a == newest.costs.history.back().ln_a &&
                  spread.physics_hash == newest.physics_hash && spread.particles.mass == newest.particles.mass &&
                  spread.parameters.size() == newest.parameters.size()));

  // Fewer ranks than files: the reference's last checkpoint continued on all ranks but one.
  const std::string folder = ref.dir.file("other_count");
  if (world.is_root()) {
    fs::copy(ref.folder, folder, fs::copy_options::recursive);
    for (const auto& entry : fs::directory_iterator(folder))
      if (entry.path().filename().string().find("_001") != std::string::npos) fs::remove(entry.path());
  }
  world.barrier();
  const bool works = world.rank() < world.size() - 1;
  const Comm fewer = world.split(works ? 0 : 1, world.rank());
  if (works) {
    const Final f = run(folder, 0, true, fewer);
    CHECK(f.summary.a_final == doctest::Approx(1.0).epsilon(1e-12));
    std::vector<std::uint64_t> ids = fewer.allgatherv(f.particles.id);
    std::sort(ids.begin(), ids.end());
    CHECK(ids.size() == 16u * 16u * 16u);
    CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());   // each particle once
  }
  world.barrier();
  if (world.is_root()) {
    const std::vector<double> a = orbis::test::power_column(ref.folder + "/powerspec_001.txt");
    const std::vector<double> b = orbis::test::power_column(folder + "/powerspec_001.txt");
    CHECK(a.size() == b.size());
    CHECK(!a.empty());
    double worst = a.size() == b.size() ? 0.0 : HUGE_VAL;
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::abs(b[i] / a[i] - 1));
    MESSAGE((world.size() - 1) << " rank(s) from a checkpoint of " << world.size() << ": final P(k) differs by up to "
                              << worst << " (relative)");
    CHECK(worst < 1e-6);   // 16 steps after the restart: the rounding of other sums, not yet grown
  }
  world.barrier();
}

// One test case, so that the reference runs once (and its scratch folder goes before MPI ends).
TEST_CASE("checkpoints over the ranks: stop, restart bitwise, damaged files, another rank count") {
  const orbis::test::SharedScratchDir dir("restart_ranks", Comm::world());
  const std::string folder = dir.file("reference");
  const Reference ref{dir, folder, run(folder, 8, false, Comm::world())};
  stopped_by_signal_on_one_rank(ref);
  damaged_or_missing_file(ref);
  other_rank_count(ref);
}
