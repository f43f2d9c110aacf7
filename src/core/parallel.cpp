#include "core/parallel.hpp"

#include <omp.h>

#include <fmt/format.h>

#ifdef ORBIS_HAVE_MPI
#include <mpi.h>
#endif

namespace orbis::parallel {

void init(int* argc, char*** argv) {
#ifdef ORBIS_HAVE_MPI
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  }
#else
  (void)argc;
  (void)argv;
#endif
}

bool concurrent_mpi() {
#ifdef ORBIS_HAVE_MPI
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) return true;
  int provided = 0;
  MPI_Query_thread(&provided);
  return provided >= MPI_THREAD_MULTIPLE;
#else
  return true;
#endif
}

void finalize() {
#ifdef ORBIS_HAVE_MPI
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  if (initialised && !finalised) MPI_Finalize();
#endif
}

void abort_all(int code) {
#ifdef ORBIS_HAVE_MPI
  if (size() > 1) MPI_Abort(MPI_COMM_WORLD, code);
#else
  (void)code;
#endif
}

int rank() {
#ifdef ORBIS_HAVE_MPI
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised) {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
  }
#endif
  return 0;
}

int size() {
#ifdef ORBIS_HAVE_MPI
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised) {
    int s = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    return s;
  }
#endif
  return 1;
}

int threads() { return omp_get_max_threads(); }

std::string describe() {
  return fmt::format("{} rank{} x {} thread{}", size(), size() == 1 ? "" : "s", threads(),
                     threads() == 1 ? "" : "s");
}

}  // namespace orbis::parallel
