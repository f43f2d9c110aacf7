// Parameter validation: every error names the file, line, key and accepted range, and
// every value in force (defaults included) is echoed.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "core/params.hpp"

using orbis::Params;

namespace {
const std::string kMinimal = "[box]\nsize_mpc_h = 100.0\nparticles_per_side = 32\n";

std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    Params::parse(text, "test.toml", overrides);
  } catch (const orbis::Error& e) {
    return e.what();
  }
  return "";
}
bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}
}  // namespace

TEST_CASE("a minimal file gets every default") {
  Params p = Params::parse(kMinimal, "test.toml");
  CHECK(p.get_real("box.size_mpc_h") == 100.0);
  CHECK(p.get_int("box.particles_per_side") == 32);
  CHECK(p.get_real("cosmology.omega_m") == doctest::Approx(0.3144));
  CHECK(p.get_string("gravity.solver") == "treepm");
  CHECK_FALSE(p.has("cosmology.omega_lambda"));   // optional, derived
  CHECK(p.where("cosmology.omega_m") == "test.toml (default)");
  CHECK(p.where("box.size_mpc_h") == "test.toml:2");
}

TEST_CASE("unknown keys and sections name the nearest valid one") {
  std::string e = error_of(kMinimal + "[cosmology]\nomega_mm = 0.3\n");
  CHECK(contains(e, "test.toml:5"));
  CHECK(contains(e, "unknown key [cosmology] omega_mm"));
  CHECK(contains(e, "did you mean [cosmology] omega_m"));
  e = error_of(kMinimal + "[cosmo]\nomega_m = 0.3\n");
  CHECK(contains(e, "unknown section [cosmo]"));
  CHECK(contains(e, "did you mean [cosmology]"));
  e = error_of(kMinimal + "[time]\nzfinal = 0.0\n");
  CHECK(contains(e, "did you mean [time] z_final"));
}

TEST_CASE("missing required keys name file, key, type and range") {
  std::string e = error_of("[box]\nsize_mpc_h = 100.0\n");
  CHECK(contains(e, "test.toml"));
  CHECK(contains(e, "missing required key [box] particles_per_side"));
  CHECK(contains(e, "integer"));
  CHECK(contains(e, "2 <= value <= 8192"));
}

TEST_CASE("wrong types and out-of-range values name line, key and the accepted range") {
  std::string e = error_of(kMinimal + "[cosmology]\nomega_m = \"0.3\"\n");
  CHECK(contains(e, "test.toml:5"));
  CHECK(contains(e, "must be a number"));
  CHECK(contains(e, "found a string"));
  e = error_of(kMinimal + "[cosmology]\nomega_m = -0.3\n");
  CHECK(contains(e, "test.toml:5"));
  CHECK(contains(e, "out of range"));
  CHECK(contains(e, "0 < value <= 2"));
  e = error_of(kMinimal + "[gravity]\nsolver = \"p3m\"\n");
  CHECK(contains(e, "one of: pm, treepm"));
  e = error_of(kMinimal + "[box]\n");   // a repeated table is invalid TOML
  CHECK(contains(e, "not valid TOML"));
  e = error_of(kMinimal + "[time]\noutput_redshifts = [1.0, -2.0]\n");
  CHECK(contains(e, "out of range"));
  e = error_of("[box]\nsize_mpc_h = 100.0\nparticles_per_side = 32.5\n");
  CHECK(contains(e, "test.toml:3"));
  CHECK(contains(e, "must be an integer"));
}

TEST_CASE("integers are accepted for real-valued keys") {
  Params p = Params::parse("[box]\nsize_mpc_h = 100\nparticles_per_side = 16\n", "t.toml");
  CHECK(p.get_real("box.size_mpc_h") == 100.0);
}

TEST_CASE("--set overrides values and is validated like the file") {
  Params p = Params::parse(kMinimal, "test.toml", {"time.z_final=1", "gpu.backend=cpu",
                                                   "time.output_redshifts=[2, 1]"});
  CHECK(p.get_real("time.z_final") == 1.0);
  CHECK(p.get_string("gpu.backend") == "cpu");
  CHECK(p.get_real_list("time.output_redshifts").size() == 2);
  CHECK(p.where("time.z_final") == "--set");
  CHECK(contains(error_of(kMinimal, {"time.zfinal=1"}), "did you mean [time] z_final"));
  CHECK(contains(error_of(kMinimal, {"time.z_final=abc"}), "is not a valid number"));
  CHECK(contains(error_of(kMinimal, {"gpu.backend=opencl"}), "one of: auto, cpu, cuda"));
  CHECK(contains(error_of(kMinimal, {"z_final"}), "expected section.key=value"));
}

TEST_CASE("the echo of all values parses back to the same values") {
  Params p = Params::parse(kMinimal, "test.toml", {"cosmology.omega_lambda=0.7", "ic.seed=42"});
  Params q = Params::parse(p.to_toml(), "echo.toml");
  CHECK(p.flat() == q.flat());
  CHECK(p.flat().size() >= 40);
}

TEST_CASE("params/README.md is the table generated from the schema") {
  std::ifstream in(std::string(ORBIS_SOURCE_DIR) + "/params/README.md");
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  CHECK_MESSAGE(text.str() == orbis::schema_markdown(),
                "params/README.md is stale: regenerate it with `orbis params > params/README.md`");
}

TEST_CASE("every parameter file shipped in params/ is valid") {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(ORBIS_SOURCE_DIR) + "/params")) {
    if (entry.path().extension() != ".toml") continue;
    ++files;
    INFO(entry.path().string());
    CHECK_NOTHROW(Params::load(entry.path().string()));
  }
  CHECK(files >= 3);
}
