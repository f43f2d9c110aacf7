// BackgroundOutputs: an output written on a host thread from a copy is byte for byte the one
// written in place, even when the caller's particles move on at once; its error comes back
// from finish().
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/params.hpp"
#include "cosmology/cosmology.hpp"
#include "integrate/outputs.hpp"
#include "support/run_command.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;
using test::read_whole_file;

namespace {

const std::string kRun = "[box]\nsize_mpc_h = 32.0\nparticles_per_side = 16\n"
                         "[analysis]\nfof = true\nfof_min_members = 8\npk = true\n[output]\nsnapshots = true\n";

// 16^3 particles: a grid with a dense clump, so FoF finds groups.
Particles sample_particles() {
  Particles p;
  p.resize(16 * 16 * 16);
  p.mass = 1.0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double x = 2.0 * (i / 256) + 0.1, y = 2.0 * (i / 16 % 16) + 0.2, z = 2.0 * (i % 16) + 0.3;
    const bool clump = i % 7 == 0;   // every 7th particle near (16, 16, 16)
    p.pos[i] = clump ? Vec3d{16 + 0.01 * (i % 11), 16 + 0.01 * (i % 13), 16 + 0.01 * (i % 5)} : Vec3d{x, y, z};
    p.mom[i] = {0.1 * (i % 3), -0.2, 0.3};
    p.id[i] = i + 1;
  }
  return p;
}

}  // namespace

TEST_CASE("an output on the host thread equals the one written in place") {
  test::ScratchDir scratch("background_outputs");
  const std::string in_place = scratch.file("in_place"), background = scratch.file("background");
  std::filesystem::create_directories(in_place);
  std::filesystem::create_directories(background);
  const Params params = Params::parse(kRun, "test.toml");
  const Cosmology cosmology = Cosmology::from_params(params);
  Particles particles = sample_particles();

  const std::vector<std::string> direct =
      write_run_outputs(OutputContext{params, &cosmology, in_place, 2, 0.5}, particles, {});
  std::vector<std::string> files;
  {
    BackgroundOutputs outputs;
    outputs.start(OutputContext{params, &cosmology, background, 2, 0.5}, particles, {}, files);
    for (auto& x : particles.pos) x = {1, 1, 1};   // the run moves on at once
    CHECK(outputs.busy());
    outputs.finish(files);
    CHECK_FALSE(outputs.busy());
  }
  REQUIRE(files.size() == direct.size());
  REQUIRE(files == output_file_names(params, background, 2));
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string name = std::filesystem::path(files[i]).filename().string();
    INFO(name);
    CHECK(std::filesystem::path(direct[i]).filename().string() == name);
    CHECK(read_whole_file(files[i]) == read_whole_file(direct[i]));
  }
  // The FoF catalogue is not empty: the comparison covered groups.
  CHECK(read_whole_file(background + "/fof_tab_002_massfn.txt").find(" 0 groups") == std::string::npos);
}

TEST_CASE("an output's error comes back from finish()") {
  test::ScratchDir scratch("background_outputs_error");
  const std::string not_a_folder = scratch.file("plain_file");
  test::write_whole_file(not_a_folder, "x");
  const Params params = Params::parse(kRun, "test.toml");
  const Cosmology cosmology = Cosmology::from_params(params);
  BackgroundOutputs outputs;
  std::vector<std::string> files;
  outputs.start(OutputContext{params, &cosmology, not_a_folder, 0, 0.5}, sample_particles(), {}, files);
  CHECK_THROWS(outputs.finish(files));
  CHECK(files.empty());
  CHECK_FALSE(outputs.busy());
  CHECK_NOTHROW(outputs.finish(files));   // nothing pending any more
}

TEST_CASE("an output given its power spectrum writes it, with the linear column, instead of measuring one") {
  test::ScratchDir scratch("background_outputs_given_pk");
  const std::string in_place = scratch.file("in_place"), given = scratch.file("given");
  std::filesystem::create_directories(in_place);
  std::filesystem::create_directories(given);
  const Params params = Params::parse(kRun, "test.toml");
  const Cosmology cosmology = Cosmology::from_params(params);
  const Particles particles = sample_particles();
  write_run_outputs(OutputContext{params, &cosmology, in_place, 1, 0.5}, particles, {});

  // The spectrum an engine would measure (no linear column), given to the writer: the files are
  // the ones it measures itself. A different one (power doubled) shows it was not measured again.
  PowerSpectrum pk = measure_power_spectrum(particles.pos, 32.0, PowerSpectrumSettings::from_params(params));
  std::vector<std::string> files;
  {
    BackgroundOutputs outputs;
    outputs.start(OutputContext{params, &cosmology, given, 1, 0.5}, particles, {}, files, pk);
    outputs.finish(files);
  }
  REQUIRE(files == output_file_names(params, given, 1));
  CHECK(read_whole_file(given + "/powerspec_001.txt") == read_whole_file(in_place + "/powerspec_001.txt"));
  for (PowerSpectrumBin& bin : pk.bins) bin.power *= 2;
  files.clear();
  write_run_outputs(OutputContext{params, &cosmology, given, 1, 0.5}, particles, {}, Comm::self(), &pk);
  CHECK(read_whole_file(given + "/powerspec_001.txt") != read_whole_file(in_place + "/powerspec_001.txt"));
}
