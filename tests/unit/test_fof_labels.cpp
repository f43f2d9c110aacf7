// The host half of friends-of-friends linked elsewhere (the CUDA step engine's labels,
// StepEngine::fof_labels): groups made from labels equal the host finder's (membership and
// canonical order) for labels from an independent brute-force search; the catalogue made
// from labels is the host path's bit for bit; an output given the labels writes the same
// catalogue files byte for byte; grid_shape is the host grid's; malformed labels are refused.
#include <doctest/doctest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "analysis/fof.hpp"
#include "analysis/halo_catalogue.hpp"
#include "core/error.hpp"
#include "core/params.hpp"
#include "cosmology/cosmology.hpp"
#include "integrate/outputs.hpp"
#include "support/fof_labels.hpp"
#include "support/fof_samples.hpp"
#include "support/run_command.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;

namespace {

constexpr double kBox = 20.0;

const std::string kToml =
    "[box]\nsize_mpc_h = 20.0\nparticles_per_side = 17\n[analysis]\nfof = true\npk = false\nfof_min_members = 10\n";

// Clumps, two across the box's faces and one across a corner, in a uniform background.
Particles clumpy(std::uint64_t seed, std::size_t background = 2500) {
  std::mt19937_64 rng(seed);
  std::vector<Vec3d> pos;
  testing::add_uniform(pos, background, kBox, rng);
  testing::add_plummer(pos, 1200, {3.0, 4.0, 5.0}, 0.2, 2.0, kBox, rng);
  testing::add_plummer(pos, 500, {19.9, 0.1, 10.0}, 0.15, 1.5, kBox, rng);
  testing::add_plummer(pos, 300, {0.05, 19.95, 19.9}, 0.1, 1.0, kBox, rng);
  testing::add_plummer(pos, 120, {12.0, 15.0, 8.0}, 0.05, 0.5, kBox, rng);
  Particles p = testing::make_particles(pos, 0.8, rng);
  std::normal_distribution<double> gauss(0.0, 200.0);
  for (auto& m : p.mom) m = Vec3d{gauss(rng), gauss(rng), gauss(rng)};
  return p;
}

}  // namespace

TEST_CASE("fof labels: groups from brute-force labels equal the host finder's") {
  const Particles p = clumpy(7);
  for (double b : {0.2, 0.35}) {
    CAPTURE(b);
    const double link = fof::linking_length(p.size(), kBox, b);
    const std::vector<std::uint32_t> label = testing::brute_force_labels(p.pos, kBox, link);
    CHECK(testing::host_fof_labels(p.pos, kBox, link) == label);
    for (std::uint32_t min_members : {1u, 2u, 20u}) {
      CAPTURE(min_members);
      const fof::CellGrid grid(p.pos, kBox, link);
      const fof::FofGroups host = fof::find_groups(grid, p, min_members);
      const fof::FofGroups got = fof::groups_from_labels(label, p.id, min_members, link);
      CHECK(host.size() == testing::count_groups(label, min_members));
      CHECK(got.link_mpc_h == link);
      CHECK(got.length == host.length);
      CHECK(got.offset == host.offset);
      CHECK(got.members == host.members);
    }
  }
}

TEST_CASE("fof labels: the catalogue from labels is the host path's, bit for bit") {
  const Params params = Params::parse(kToml, "test.toml");
  const Particles p = clumpy(8);
  const double link = fof::linking_length(p.size(), kBox, fof::config_from_params(params).linking_length_over_spacing);
  const GroupCatalogue host = halo::find_haloes(p, kBox, 0.5, params);
  const GroupCatalogue got =
      halo::find_haloes_from_labels(p, testing::brute_force_labels(p.pos, kBox, link), kBox, 0.5, params);
  CHECK(host.size() >= 4);
  CHECK(testing::catalogue_difference(got, host) == "");
  CHECK_THROWS_AS(halo::find_haloes_from_labels(p, std::vector<std::uint32_t>(10, 0), kBox, 0.5, params), Error);
}

TEST_CASE("fof labels: an output given the labels writes the host path's catalogue files") {
  test::ScratchDir scratch("fof_labels_output");
  const std::string host_dir = scratch.file("host"), labels_dir = scratch.file("labels");
  std::filesystem::create_directories(host_dir);
  std::filesystem::create_directories(labels_dir);
  const Params params = Params::parse(kToml + "[output]\nsnapshots = false\n", "test.toml");
  const Cosmology cosmology = Cosmology::from_params(params);
  const Particles p = clumpy(9);
  const double link = fof::linking_length(p.size(), kBox, fof::config_from_params(params).linking_length_over_spacing);
  const std::vector<std::uint32_t> label = testing::host_fof_labels(p.pos, kBox, link);
  const std::vector<std::string> host = write_run_outputs(OutputContext{params, &cosmology, host_dir, 1, 0.5}, p, {});
  std::vector<std::string> files;
  {
    BackgroundOutputs outputs;
    fof::LocalLinks links;
    links.label = label;
    links.box_mpc_h = kBox;
    links.link_mpc_h = link;
    outputs.start(OutputContext{params, &cosmology, labels_dir, 1, 0.5}, p, {}, files, std::nullopt, Comm::self(),
                  links);
    outputs.finish(files);
  }
  REQUIRE(files.size() == host.size());
  REQUIRE(files.size() == 2);   // the catalogue and its mass function
  for (std::size_t i = 0; i < files.size(); ++i) {
    INFO(files[i]);
    CHECK(test::read_whole_file(files[i]) == test::read_whole_file(host[i]));
  }
  CHECK(test::read_whole_file(files[1]).find(" 0 groups") == std::string::npos);
}

TEST_CASE("fof labels: grid_shape is the host grid's; malformed labels are refused") {
  std::mt19937_64 rng(3);
  for (std::size_t n : {std::size_t{30}, std::size_t{900}, std::size_t{5000}}) {
    std::vector<Vec3d> pos;
    testing::add_uniform(pos, n, kBox, rng);
    for (double link : {0.3, 2.0, 7.0}) {
      CAPTURE(n);
      CAPTURE(link);
      const fof::CellGrid grid(pos, kBox, link);
      const fof::GridShape shape = fof::grid_shape(kBox, link, n);
      CHECK(shape.coarse_side == grid.coarse_side());
      CHECK(shape.fine_per_coarse == grid.fine_per_coarse());
    }
  }
  const std::vector<std::uint64_t> ids{1, 2, 3, 4};
  CHECK_THROWS_AS(fof::groups_from_labels({0, 2, 2, 3}, ids, 1, 1.0), Error);   // label above its particle
  CHECK_THROWS_AS(fof::groups_from_labels({0, 0, 1, 3}, ids, 1, 1.0), Error);   // a label not labelling itself
  CHECK_THROWS_AS(fof::groups_from_labels({0, 0, 1}, ids, 1, 1.0), Error);      // too few
  const fof::FofGroups g = fof::groups_from_labels({0, 0, 2, 0}, ids, 2, 1.0);
  REQUIRE(g.size() == 1);
  CHECK(g.length[0] == 3);
  CHECK(g.members == std::vector<std::uint32_t>{0, 1, 3});
}
