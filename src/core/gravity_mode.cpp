#include "core/gravity_mode.hpp"

#include <string>

#include "core/error.hpp"
#include "core/params.hpp"

namespace orbis {

GravityMode gravity_mode(const Params& params) {
  const std::string& boundary = params.get_string("gravity.boundary");
  const std::string& solver = params.get_string("gravity.solver");
  GravityMode mode;
  mode.boundary = boundary == "vacuum" ? Boundary::vacuum : Boundary::periodic;
  if (solver == "pm") mode.solver = GravitySolver::pm;
  else if (solver == "treepm") mode.solver = GravitySolver::treepm;
  else if (solver == "fmm") mode.solver = GravitySolver::fmm;
  else mode.solver = GravitySolver::direct;
  const bool periodic_solver = mode.solver == GravitySolver::pm || mode.solver == GravitySolver::treepm;
  if (mode.periodic() && !periodic_solver)
    fail("{} = \"{}\" solves for isolated systems, but {} = \"periodic\": a periodic box takes solver = \"treepm\" "
         "or \"pm\" (or set boundary = \"vacuum\")",
         params.describe("gravity.solver"), solver, params.describe("gravity.boundary"));
  if (!mode.periodic() && periodic_solver)
    fail("{} = \"vacuum\" has no mesh, but {} = \"{}\" needs one: an isolated system takes solver = \"fmm\" "
         "(the tree) or \"direct\" (every pair)",
         params.describe("gravity.boundary"), params.describe("gravity.solver"), solver);
  return mode;
}

}  // namespace orbis
