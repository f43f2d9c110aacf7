// The process's parallel environment: MPI rank and size (1 and 0 without MPI) and OpenMP
// threads. Serial code asks this instead of calling MPI directly, so a build without MPI
// needs no #ifdef outside core.
#pragma once
#include <string>

namespace orbis::parallel {

void init(int* argc, char*** argv);   // MPI_Init when built with MPI; idempotent
void finalize();
int rank();
int size();
int threads();
std::string describe();               // "1 rank x 2 threads"

}  // namespace orbis::parallel
