// What made an output file: /Parameters (every run parameter in force, as typed attributes
// named "section.key") and /Config (version, git revision, build options). Every HDF5 file
// orbis writes carries both.
#pragma once

namespace orbis {

class H5Writer;
class Params;

void write_provenance(H5Writer& file, const Params& params);

}  // namespace orbis
