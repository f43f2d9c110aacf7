#include "core/banner.hpp"

#include <fmt/format.h>

#include "core/parallel.hpp"
#include "orbis/build_info.hpp"

namespace orbis {

std::string build_summary() {
#ifdef ORBIS_HAVE_CUDA
  const char* cuda = "on";
#else
  const char* cuda = "off";
#endif
#ifdef ORBIS_HAVE_MPI
  const char* mpi = "on";
#else
  const char* mpi = "off";
#endif
  return fmt::format("orbis {} ({}), {} build with {}; CUDA {}, MPI {}, positions in double",
                     build::version, build::git_hash, build::build_type, build::compiler, cuda, mpi);
}

std::string banner(const std::string& command) {
  return fmt::format("{} | {} | {}", build_summary(), command, parallel::describe());
}

}  // namespace orbis
