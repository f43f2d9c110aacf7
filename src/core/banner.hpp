// Provenance for people and files: the build summary printed by --version and
// stored in every output's /Config, and the start banner (build, ranks, threads).
#pragma once
#include <string>

namespace orbis {

std::string build_summary();   // "orbis 0.1.0 (abc123), Release build with GNU 12.2.0; CUDA on, MPI on, ..."
std::string banner(const std::string& command);

}  // namespace orbis
