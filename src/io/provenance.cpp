#include "io/provenance.hpp"

#include <fmt/format.h>

#include <variant>

#include "core/banner.hpp"
#include "core/params.hpp"
#include "io/hdf5_file.hpp"
#include "orbis/build_info.hpp"

namespace orbis {

void write_provenance(H5Writer& file, const Params& params) {
  file.create_group("/Config");
  file.attribute("/Config", "Version", build::version);
  file.attribute("/Config", "GitRevision", build::git_hash);
  file.attribute("/Config", "Build", build_summary());
  file.attribute("/Config", "ParameterFile", params.source());

  file.create_group("/Parameters");
  for (const auto& spec : param_schema()) {
    const std::string name = spec.name();
    if (!params.has(name)) continue;
    switch (spec.type) {
      case ParamType::integer: file.attribute("/Parameters", name, params.get_int(name)); break;
      case ParamType::real: file.attribute("/Parameters", name, params.get_real(name)); break;
      case ParamType::boolean:
        file.attribute("/Parameters", name, static_cast<std::int32_t>(params.get_bool(name)));
        break;
      case ParamType::string: file.attribute("/Parameters", name, params.get_string(name)); break;
      case ParamType::real_list: file.attribute("/Parameters", name, params.get_real_list(name)); break;
    }
  }
}

}  // namespace orbis
