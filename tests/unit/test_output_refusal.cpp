// No command replaces a file it did not write: `orbis fof` and `orbis pk` next to an existing
// catalogue or spectrum (GADGET-4's own, say) and `orbis run` into a folder holding another
// run's outputs refuse before any work and leave the file untouched, unless --overwrite. An
// output folder that cannot be written is found before any work too.
#include <doctest/doctest.h>

#include <filesystem>
#include <random>
#include <string>

#include "core/params.hpp"
#include "io/snapshot.hpp"
#include "support/run_command.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;
using test::read_whole_file;
using test::run_command;
using test::write_whole_file;
namespace fs = std::filesystem;

namespace {

const std::string kForeign = "a catalogue another code wrote\n";

// A snapshot of 12^3 random particles in a 40 Mpc/h box.
void write_random_snapshot(const std::string& path) {
  const auto params = Params::parse("[box]\nsize_mpc_h = 40.0\nparticles_per_side = 12\n", "test");
  Particles p;
  p.resize(12 * 12 * 12);
  p.mass = 1.7;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0, 40.0);
  for (std::size_t i = 0; i < p.size(); ++i) {
    p.pos[i] = {u(rng), u(rng), u(rng)};
    p.id[i] = i + 1;
  }
  write_snapshot(path, p, 0.5, params);
}

std::string run_parameters(const std::string& directory) {
  return "[box]\nsize_mpc_h = 32.0\nparticles_per_side = 8\n[ic]\nz_init = 20.0\n"
         "[gravity]\nsolver = \"pm\"\n[analysis]\npk = false\nfof = false\n"
         "[time]\nz_final = 19.0\noutput_redshifts = []\n[output]\ndirectory = \"" + directory + "\"\n";
}

}  // namespace

TEST_CASE("orbis fof refuses to replace a catalogue it did not write, unless --overwrite") {
  test::ScratchDir dir("fof_refusal");
  const std::string snap = dir.file("snapshot_003.hdf5"), catalogue = dir.file("fof_tab_003.hdf5");
  write_random_snapshot(snap);
  write_whole_file(catalogue, kForeign);
  const std::string fof = std::string(ORBIS_BINARY) + " fof '" + snap + "'";

  CHECK(run_command(fof, dir.file("refused.txt")) == 1);
  const std::string message = read_whole_file(dir.file("refused.txt"));
  CHECK(message.find("would replace 1 existing file") != std::string::npos);
  CHECK(message.find(catalogue) != std::string::npos);
  CHECK(message.find("--overwrite") != std::string::npos);
  CHECK(read_whole_file(catalogue) == kForeign);
  CHECK(!fs::exists(dir.file("fof_tab_003_mass_function.txt")));

  REQUIRE(run_command(fof + " --overwrite", dir.file("replaced.txt")) == 0);
  CHECK(read_whole_file(catalogue) != kForeign);
  CHECK(read_whole_file(catalogue).compare(1, 3, "HDF") == 0);
}

TEST_CASE("orbis pk refuses to replace a spectrum it did not write, unless --overwrite") {
  test::ScratchDir dir("pk_refusal");
  const std::string snap = dir.file("snapshot_003.hdf5");
  write_random_snapshot(snap);
  write_whole_file(dir.file("snapshot_003_pk.txt"), kForeign);
  const std::string pk = std::string(ORBIS_BINARY) + " pk '" + snap + "' --grid 16";

  CHECK(run_command(pk, dir.file("refused.txt")) == 1);
  const std::string message = read_whole_file(dir.file("refused.txt"));
  CHECK(message.find("orbis pk would replace 1 existing file") != std::string::npos);
  CHECK(message.find("snapshot_003_pk.txt") != std::string::npos);
  CHECK(read_whole_file(dir.file("snapshot_003_pk.txt")) == kForeign);
  CHECK(!fs::exists(dir.file("snapshot_003_pk.hdf5")));   // refused before any work

  REQUIRE(run_command(pk + " --overwrite", dir.file("replaced.txt")) == 0);
  CHECK(read_whole_file(dir.file("snapshot_003_pk.txt")).rfind("# k_mean", 0) == 0);
}

TEST_CASE("orbis run refuses an output folder holding files it would replace, unless --overwrite") {
  test::ScratchDir dir("run_refusal");
  const std::string out = dir.file("out");
  fs::create_directories(out);
  write_whole_file(out + "/snapshot_000.hdf5", kForeign);
  write_whole_file(dir.file("run.toml"), run_parameters(out));
  const std::string run = std::string(ORBIS_BINARY) + " run '" + dir.file("run.toml") + "'";

  CHECK(run_command(run, dir.file("refused.txt")) == 1);
  const std::string message = read_whole_file(dir.file("refused.txt"));
  CHECK(message.find("orbis run (output folder") != std::string::npos);
  CHECK(message.find("snapshot_000.hdf5") != std::string::npos);
  CHECK(message.find("--overwrite") != std::string::npos);
  CHECK(message.find("linear P(k)") == std::string::npos);   // before the ICs
  CHECK(read_whole_file(out + "/snapshot_000.hdf5") == kForeign);
  CHECK(!fs::exists(out + "/used_parameters.toml"));

  REQUIRE(run_command(run + " --overwrite", dir.file("replaced.txt")) == 0);
  CHECK(read_snapshot(out + "/snapshot_000.hdf5").particles.size() == 512);
}

TEST_CASE("an output folder that cannot be written stops every command before any work") {
  test::ScratchDir dir("unwritable");
  const std::string blocker = dir.file("a_file");   // a regular file where a folder should be
  write_whole_file(blocker, "x");
  write_whole_file(dir.file("run.toml"), run_parameters(blocker + "/out"));
  CHECK(run_command(std::string(ORBIS_BINARY) + " run '" + dir.file("run.toml") + "'", dir.file("run.txt")) == 1);
  const std::string message = read_whole_file(dir.file("run.txt"));
  CHECK(message.find("directory") != std::string::npos);
  CHECK(message.find("cannot create the folder '" + blocker + "/out'") != std::string::npos);
  CHECK(message.find("linear P(k)") == std::string::npos);

  const std::string snap = dir.file("snapshot_001.hdf5");
  write_random_snapshot(snap);
  CHECK(run_command(std::string(ORBIS_BINARY) + " pk '" + snap + "' --out '" + blocker + "/sub/pk'",
                    dir.file("pk.txt")) == 1);
  CHECK(read_whole_file(dir.file("pk.txt")).find("--out: cannot create the folder") != std::string::npos);
  CHECK(run_command(std::string(ORBIS_BINARY) + " fof '" + snap + "' --out '" + blocker + "/sub/cat.hdf5'",
                    dir.file("fof.txt")) == 1);
  CHECK(read_whole_file(dir.file("fof.txt")).find("--out: cannot create the folder") != std::string::npos);
}
