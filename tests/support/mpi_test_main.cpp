// The main of the tests/mpi executables (Debian's doctest has no MPI extension): MPI is
// started, every rank runs every test case, and the exit status is the worst of all ranks.
// Rank 0 reports as usual; another rank's report is printed (after rank 0's) only when a
// check failed there. Test cases must reach every collective on every rank: check with
// CHECK (which goes on) rather than REQUIRE around communication, or the other ranks wait.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <sstream>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/log.hpp"
#include "core/parallel.hpp"

int main(int argc, char** argv) {
  orbis::parallel::init(&argc, &argv);
  int status = 0;
  {
    const orbis::Comm world = orbis::Comm::world();
    orbis::log::set_rank(world.rank(), world.size());
    doctest::Context context(argc, argv);
    std::ostringstream captured;
    if (!world.is_root()) context.setCout(&captured);
    const int mine = context.run();
    status = world.max(mine);
    // The failed ranks' reports, on rank 0, in rank order.
    std::string text = mine != 0 && !world.is_root() ? fmt::format("---- rank {} of {} failed:\n{}", world.rank(), world.size(),
                                               captured.str())
                                 : std::string();
    const std::vector<char> all = world.gatherv(std::vector<char>(text.begin(), text.end()));
    if (world.is_root() && !all.empty()) fmt::print("{}\n", std::string(all.begin(), all.end()));
    if (world.is_root()) fmt::print("mpi test: {} rank{}, {}\n", world.size(), world.size() == 1 ? "" : "s",
                                    status == 0 ? "all passed" : "FAILED");
  }
  orbis::parallel::finalize();
  return status;
}
