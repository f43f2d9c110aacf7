// [gravity] boundary and solver: each key checked by the schema, their combination by
// gravity_mode(), and a vacuum run given the host's vacuum engine. Every message names the
// file, line and key.
#include <doctest/doctest.h>

#include <string>

#include "core/error.hpp"
#include "core/gravity_mode.hpp"
#include "core/params.hpp"
#include "integrate/step_engine.hpp"
#include "support/error_of.hpp"

using namespace orbis;
using orbis::test::error_of;

namespace {

const std::string kMinimal = "[box]\nsize_mpc_h = 100.0\nparticles_per_side = 8\n[gpu]\nbackend = \"cpu\"\n";

// An isolated system's minimal file, as many lines as kMinimal (the messages' line numbers).
const std::string kVacuum = "[ic]\nkind = \"plummer\"\nparticles = 64\n[time]\nt_end = 1.0\n";

Params parse(const std::string& gravity) {
  if (gravity.find("\"vacuum\"") == std::string::npos)
    return Params::parse(kMinimal + "[gravity]\n" + gravity, "g.toml");
  return Params::parse(kVacuum + "[gravity]\n" + gravity + "softening = 0.01\n", "g.toml",
                       {"time.max_dt=0.1", "gpu.backend=cpu"});
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("the default is a periodic TreePM box") {
  const GravityMode mode = gravity_mode(Params::parse(kMinimal, "g.toml"));
  CHECK(mode.boundary == Boundary::periodic);
  CHECK(mode.solver == GravitySolver::treepm);
  CHECK(gravity_mode(parse("solver = \"pm\"\n")).solver == GravitySolver::pm);
}

TEST_CASE("vacuum boundaries take the FMM or direct summation") {
  GravityMode mode = gravity_mode(parse("boundary = \"vacuum\"\nsolver = \"fmm\"\n"));
  CHECK(mode.boundary == Boundary::vacuum);
  CHECK(mode.solver == GravitySolver::fmm);
  mode = gravity_mode(parse("boundary = \"vacuum\"\nsolver = \"direct\"\n"));
  CHECK(mode.solver == GravitySolver::direct);
  CHECK_FALSE(mode.periodic());
}

TEST_CASE("a misspelt boundary names the line, the key and the choices") {
  const std::string e = error_of([] { parse("boundary = \"vaccum\"\n"); });
  CAPTURE(e);
  CHECK(contains(e, "g.toml:7"));
  CHECK(contains(e, "[gravity] boundary = \"vaccum\" is out of range"));
  CHECK(contains(e, "one of: periodic, vacuum"));
  CHECK(contains(error_of([] { parse("solver = \"tree\"\n"); }), "one of: pm, treepm, fmm, direct"));
}

TEST_CASE("a solver that does not serve the boundary names both keys") {
  std::string e = error_of([] { gravity_mode(parse("boundary = \"vacuum\"\n")); });   // solver: treepm
  CAPTURE(e);
  CHECK(contains(e, "g.toml:7: [gravity] boundary = \"vacuum\""));
  CHECK(contains(e, "g.toml (default): [gravity] solver = \"treepm\""));
  CHECK(contains(e, "solver = \"fmm\""));
  e = error_of([] { gravity_mode(parse("boundary = \"vacuum\"\nsolver = \"pm\"\n")); });
  CHECK(contains(e, "[gravity] solver = \"pm\" needs one"));
  e = error_of([] { gravity_mode(parse("solver = \"direct\"\n")); });
  CAPTURE(e);
  CHECK(contains(e, "g.toml:7: [gravity] solver = \"direct\" solves for isolated systems"));
  CHECK(contains(e, "[gravity] boundary = \"periodic\""));
}

TEST_CASE("a vacuum run gets the host's vacuum engine (the CUDA step engine does not take it)") {
  const auto engine = make_step_engine(parse("boundary = \"vacuum\"\nsolver = \"fmm\"\n"));
  CAPTURE(engine->describe());
  CHECK(contains(engine->describe(), "vacuum (fmm): FMM theta = 0.5"));
  CHECK(engine->softening() == 0.01);
  const auto direct = make_step_engine(parse("boundary = \"vacuum\"\nsolver = \"direct\"\n"));
  CHECK(contains(direct->describe(), "every pair in P2P (theta = 0)"));
}
