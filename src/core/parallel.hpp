// The process's parallel environment: MPI rank and size (1 and 0 without MPI) and OpenMP
// threads. Serial code asks this instead of calling MPI directly, so a build without MPI
// needs no #ifdef outside core.
#pragma once
#include <string>

namespace orbis::parallel {

// MPI_Init_thread when built with MPI, asking for MPI_THREAD_MULTIPLE (the run's output thread
// then makes collectives of its own, on a communicator of its own); idempotent.
void init(int* argc, char*** argv);
void finalize();
// True when several threads may call MPI at once (MPI_THREAD_MULTIPLE was provided), and
// always without MPI.
bool concurrent_mpi();
// Ends every rank of the run with `code` (MPI_Abort): after an error on some ranks only, the
// others would otherwise wait forever in their next collective. Without MPI, or on one rank,
// it returns and the caller exits normally.
void abort_all(int code);
int rank();
int size();
int threads();
std::string describe();               // "1 rank x 2 threads"

}  // namespace orbis::parallel
