// Checkpoint files: a checked file reads back bit for bit and any flipped byte or truncation
// is found; a checkpoint keeps the particles and the run state exactly, the previous one is
// kept and taken when the newest is damaged; changed physics parameters are named.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/params.hpp"
#include "integrate/checkpoint.hpp"
#include "io/checked_file.hpp"
#include "support/run_command.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;
using test::read_whole_file;
using test::write_whole_file;
namespace fs = std::filesystem;

namespace {

// Bitwise equality of two arrays (Vec3 has no operator==).
template <typename T>
bool same_bytes(const std::vector<T>& x, const std::vector<T>& y) {
  return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0);
}

void flip_byte(const std::string& path, std::size_t at) {
  std::string bytes = read_whole_file(path);
  REQUIRE(at < bytes.size());
  bytes[at] = static_cast<char>(bytes[at] ^ 0x10);
  write_whole_file(path, bytes);
}

Particles random_particles(std::size_t n) {
  Particles p;
  p.resize(n);
  p.mass = 0.1234567890123;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  for (std::size_t i = 0; i < n; ++i) {
    p.pos[i] = {u(rng) * 50, u(rng) * 50, u(rng) * 50};
    p.mom[i] = {u(rng) - 0.5, 1e-300 * u(rng), -1e300 * u(rng)};
    p.id[i] = rng();
    p.time_bin[i] = static_cast<std::uint8_t>(rng() % 7);
  }
  return p;
}

RunState some_state(std::int64_t steps) {
  RunState s;
  s.a = 0.123456789;
  s.pm_a_begin = 0.12;
  s.pm_a_end = 0.123456789;
  s.tick = kPmTicks;
  s.bins[0] = 10;
  s.bins[3] = 22;
  s.steps = steps;
  s.pm_steps = steps / 2;
  s.particle_steps = 1e9 / 3;
  s.output_index = 4;
  s.seconds = 77.5;
  return s;
}

// The ETA's measurements (integrate/run_forecast.hpp): the PM step in progress and two done.
MeasuredCosts some_costs() {
  MeasuredCosts c;
  c.pm_step = {-2.959, 0.022, 7, 0.125};
  c.history = {{-3.0, 0.02, 32, 0.5}, {-2.98, 0.021, 40, 0.6}};
  c.history[1].end_seconds = 0.25;   // not kept: a restart's records have the four numbers only
  return c;
}

const char* kParams = "[box]\nsize_mpc_h = 50.0\nparticles_per_side = 10\n[time]\nz_final = 1.0\n";

}  // namespace

TEST_CASE("a checked file reads back bit for bit; a flipped byte or a truncation is an error") {
  test::ScratchDir dir("checked_file");
  const std::string path = dir.file("x.orbis");
  std::vector<double> values(1000);
  std::iota(values.begin(), values.end(), 0.5);
  {
    CheckedFileWriter file(path);
    file.section("values", values);
    file.section("text", "hello", 5);
    file.commit();
  }
  {
    CheckedFileReader file(path);
    CHECK(file.bytes("text") == "hello");
    CHECK(file.take<double>("values") == values);
    CHECK_THROWS_WITH_AS(file.bytes("other"), doctest::Contains("no section 'other'"), Error);
  }
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator{}) == 1);   // no temporary left

  const std::string good = read_whole_file(path);
  for (std::size_t at : {std::size_t{3}, std::size_t{13}, std::size_t{30}, good.size() / 2, good.size() - 17,
                         good.size() - 12, good.size() - 1}) {
    CAPTURE(at);
    write_whole_file(path, good);
    flip_byte(path, at);
    CHECK_THROWS_AS(CheckedFileReader{path}, Error);
  }
  write_whole_file(path, good.substr(0, good.size() - 40));
  CHECK_THROWS_WITH_AS(CheckedFileReader{path}, doctest::Contains("truncated"), Error);
  write_whole_file(path, "not a checkpoint at all");
  CHECK_THROWS_WITH_AS(CheckedFileReader{path}, doctest::Contains("not an orbis checkpoint"), Error);
}

TEST_CASE("a checkpoint keeps particles and run state exactly; the previous one is kept and used when needed") {
  test::ScratchDir dir("checkpoints");
  const Params params = Params::parse(kParams, "run.toml");
  const Particles p = random_particles(1000);
  write_checkpoint(dir.path(), p, some_state(5), some_costs(), params);
  write_checkpoint(dir.path(), p, some_state(9), some_costs(), params);
  write_checkpoint(dir.path(), p, some_state(12), some_costs(), params);
  const auto paths = find_checkpoints(dir.path());
  REQUIRE(paths.size() == 2);   // the newest and the previous one
  CHECK(paths[0] == checkpoint_path(dir.path(), 12));
  CHECK(paths[1] == checkpoint_path(dir.path(), 9));

  const Checkpoint c = read_newest_checkpoint(dir.path());
  CHECK(c.path == paths[0]);
  CHECK(same_bytes(c.particles.pos, p.pos));
  CHECK(same_bytes(c.particles.mom, p.mom));
  CHECK(c.particles.id == p.id);
  CHECK(c.particles.time_bin == p.time_bin);
  CHECK(c.particles.mass == p.mass);
  const RunState s = some_state(12);
  CHECK(c.state.a == s.a);
  CHECK(c.state.pm_a_begin == s.pm_a_begin);
  CHECK(c.state.pm_a_end == s.pm_a_end);
  CHECK(c.state.tick == s.tick);
  CHECK(c.state.bins == s.bins);
  CHECK(c.state.steps == 12);
  CHECK(c.state.pm_steps == s.pm_steps);
  CHECK(c.state.particle_steps == s.particle_steps);
  CHECK(c.state.output_index == s.output_index);
  CHECK(c.state.seconds == s.seconds);
  const MeasuredCosts costs = some_costs();
  REQUIRE(c.costs.history.size() == 2);
  for (std::size_t i = 0; i <= costs.history.size(); ++i) {
    const CostRecord& kept = i < costs.history.size() ? c.costs.history[i] : c.costs.pm_step;
    const CostRecord& was = i < costs.history.size() ? costs.history[i] : costs.pm_step;
    CHECK(kept.ln_a == was.ln_a);
    CHECK(kept.dln_a == was.dln_a);
    CHECK(kept.particle_steps == was.particle_steps);
    CHECK(kept.seconds == was.seconds);
    CHECK(kept.end_seconds == 0);
  }
  CHECK(c.physics_hash == physics_hash(params.flat()));

  // A flipped byte in the newest: it is found, and the previous one is taken.
  flip_byte(paths[0], read_whole_file(paths[0]).size() / 2);
  CHECK(read_newest_checkpoint(dir.path()).path == paths[1]);
  flip_byte(paths[1], 100);
  CHECK_THROWS_WITH_AS(read_newest_checkpoint(dir.path()), doctest::Contains("reads back whole"), Error);
}

TEST_CASE("a restart with other physics parameters is an error naming them; z_final and outputs may change") {
  test::ScratchDir dir("restart_parameters");
  const Params params = Params::parse(kParams, "run.toml");
  write_checkpoint(dir.path(), random_particles(10), some_state(3), {}, params);
  const Checkpoint c = read_newest_checkpoint(dir.path());
  CHECK_NOTHROW(check_restart_parameters(c, params));
  CHECK_NOTHROW(check_restart_parameters(
      c, Params::parse(kParams, "run.toml", {"time.z_final=0", "time.output_redshifts=[2.0]", "analysis.fof=false",
                                             "checkpoint.every_steps=4", "gpu.backend=cpu"})));
  const auto changed = Params::parse(kParams, "run.toml", {"cosmology.omega_m=0.3", "gravity.theta=0.7"});
  CHECK_THROWS_WITH_AS(check_restart_parameters(c, changed), doctest::Contains("omega_m = 0.3"), Error);
  CHECK_THROWS_WITH_AS(check_restart_parameters(c, changed), doctest::Contains("theta = 0.7"), Error);
  CHECK_THROWS_WITH_AS(check_restart_parameters(c, Params::parse(kParams, "run.toml", {"time.max_dln_a=0.01"})),
                       doctest::Contains("max_dln_a"), Error);
  CHECK(physics_hash(params.flat()) != physics_hash(changed.flat()));
}

TEST_CASE("checkpoint files of several ranks: names, which checkpoint counts, what a new one removes") {
  test::ScratchDir dir("checkpoint_sets");
  const Params params = Params::parse(kParams, "run.toml");
  const std::string d = dir.path();
  CHECK(checkpoint_path(d, 12) == d + "/checkpoint_00000012.orbis");
  CHECK(checkpoint_path(d, 12, 1, 3) == d + "/checkpoint_00000012_rank_0001_of_0003.orbis");
  // Stand-ins for the files of other rank counts: one rank's file under their names (the
  // names decide which checkpoints are complete; the contents are read only when chosen).
  const std::string one = write_checkpoint(d, random_particles(10), some_state(5), {}, params);
  const auto copy_as = [&](std::int64_t steps, int rank, int ranks) {
    fs::copy_file(one, checkpoint_path(d, steps, rank, ranks), fs::copy_options::overwrite_existing);
  };
  copy_as(7, 0, 2);
  copy_as(7, 1, 2);   // step 7 on 2 ranks: complete
  copy_as(9, 1, 2);   // step 9 on 2 ranks: rank 0's file missing (an interrupted write)
  write_whole_file(d + "/checkpoint_00000010_rank_0002_of_0002.orbis", "no such rank");   // not a checkpoint's name
  CHECK(find_checkpoints(d).size() == 4);
  // The newest complete one is step 7's, of 2 ranks, but its files' share records say
  // otherwise (rank 0 of 1, step 5): unusable, and the restart takes step 5's.
  const Checkpoint back = read_newest_checkpoint(d);
  CHECK(back.state.steps == 5);
  CHECK(back.ranks == 1);
  // A new checkpoint keeps itself and the newest complete one before it (step 7's); the
  // interrupted step 9 and the older step 5 go.
  write_checkpoint(d, random_particles(10), some_state(12), {}, params);
  const auto left = find_checkpoints(d);
  REQUIRE(left.size() == 3);
  CHECK(left[0] == checkpoint_path(d, 12));
  CHECK(left[1] == checkpoint_path(d, 7, 0, 2));
  CHECK(left[2] == checkpoint_path(d, 7, 1, 2));
  CHECK(read_newest_checkpoint(d).state.steps == 12);
  // A file whose share record disagrees with its name is not taken for that share.
  fs::copy_file(checkpoint_path(d, 12), checkpoint_path(d, 20), fs::copy_options::overwrite_existing);
  CHECK(read_newest_checkpoint(d).state.steps == 12);   // step 20's file says step 12: unusable
}
