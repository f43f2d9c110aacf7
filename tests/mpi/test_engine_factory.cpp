// The step engine factory's choice over ranks is collective (integrate/step_engine_factory.cpp):
// with [gpu] backend = "cuda" a rank without a usable GPU stops every rank with one message
// naming it (before, that rank failed alone and the others waited in a collective for ever);
// with "auto" every rank takes the host engine. Here the last rank asks for a device no
// machine has (gpu.device = 64), so the test needs no GPU and runs in CI (a CPU-only build,
// or no GPU: every rank lacks one); ctest's timeout catches a hang.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/params.hpp"
#include "integrate/host_engine.hpp"
#include "integrate/step_engine.hpp"

using orbis::Comm;

namespace {

orbis::Params params_for(const std::string& backend, const Comm& world) {
  // Device 0 elsewhere, not -1: choosing by the node rank is collective, and the last rank's
  // fixed device would skip it.
  const int device = world.rank() == world.size() - 1 ? 64 : 0;
  return orbis::Params::parse("[box]\nsize_mpc_h = 100.0\nparticles_per_side = 8\n[gpu]\nbackend = \"" + backend +
                                  "\"\ndevice = " + std::to_string(device) +
                                  "\n[gravity]\nsolver = \"treepm\"\nrs_over_cell = 1.25\nr_cut_over_rs = 4.5\n",
                              "engine_factory.toml");
}

}  // namespace

TEST_CASE("backend \"cuda\" with a rank lacking a GPU: every rank fails with the same message, naming it") {
  const Comm world = Comm::world();
  std::string message;
  try {
    const std::unique_ptr<orbis::StepEngine> engine = orbis::make_step_engine(params_for("cuda", world), world);
  } catch (const orbis::Error& e) {
    message = e.what();
  }
  MESSAGE("rank " << world.rank() << ": " << message);
  CHECK(!message.empty());
  CHECK(message.find("cuda") != std::string::npos);
  if (world.size() > 1) {
    // The last rank by its number among the ranks ("rank 2 of 3" or "ranks 0, 1, 2 of 3").
    CHECK(message.find(std::to_string(world.size() - 1) + " of " + std::to_string(world.size())) != std::string::npos);
    std::string root_message = message;
    world.broadcast(root_message);
    CHECK(message == root_message);
  }
}

TEST_CASE("backend \"auto\" with a rank lacking a GPU: the host engine on every rank") {
  const Comm world = Comm::world();
  std::string message;
  bool host = false;
  try {
    const std::unique_ptr<orbis::StepEngine> engine = orbis::make_step_engine(params_for("auto", world), world);
    host = dynamic_cast<const orbis::HostStepEngine*>(engine.get()) != nullptr;
  } catch (const orbis::Error& e) {
    message = e.what();
  }
  CHECK(message.empty());
  CHECK(world.all(host));
}
