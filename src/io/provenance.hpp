// What made an output file: /Parameters (every run parameter in force, as typed attributes
// named "section.key") and /Config (version, git revision, build options). Every HDF5 file
// orbis writes carries both.
#pragma once
#include <string>

namespace orbis {

class H5Writer;
class Params;

void write_provenance(H5Writer& file, const Params& params);
std::string build_summary();   // "orbis 0.1.0 (abc123) Release, CUDA on, MPI on, double positions"

}  // namespace orbis
