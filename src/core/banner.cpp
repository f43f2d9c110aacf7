#include "core/banner.hpp"

#include <fmt/format.h>

#include "core/parallel.hpp"
#include "orbis/build_info.hpp"

namespace orbis {

std::string banner(const std::string& command) {
#ifdef ORBIS_HAVE_CUDA
  const char* cuda = "CUDA backend built";
#else
  const char* cuda = "no CUDA backend";
#endif
#ifdef ORBIS_HAVE_MPI
  const char* mpi = "MPI";
#else
  const char* mpi = "no MPI";
#endif
  return fmt::format("orbis {} ({}) {} | {} build, {}, {}, positions double | {}",
                     build::version, build::git_hash, command, build::build_type, cuda, mpi,
                     parallel::describe());
}

}  // namespace orbis
