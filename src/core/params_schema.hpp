// The one table of run parameters: parsing, validation, --help, the reference
// table in params/README.md and the echo in used_parameters.toml all come from it.
#pragma once
#include <limits>
#include <string>
#include <vector>

namespace orbis {

enum class ParamType { integer, real, boolean, string, real_list };

// Which runs a key belongs to ([gravity] boundary): a key of the other kind given in a file
// is an error (a box size for an isolated system), and its default is not filled in (the
// echo holds only what the run uses); a required key is required only in its own kind.
enum class ParamScope { both, periodic, vacuum };

struct ParamSpec {
  const char* section;
  const char* key;
  ParamType type;
  // The default as a TOML literal; nullptr = required; "" = optional with no default
  // (the code then derives the value and says how in `help`).
  const char* default_toml;
  double min = -std::numeric_limits<double>::infinity();   // numbers and list elements
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
  const char* choices = nullptr;   // strings: "a|b|c"
  const char* unit = "";
  const char* help = "";
  ParamScope scope = ParamScope::both;

  std::string name() const { return std::string(section) + "." + key; }
};

const std::vector<ParamSpec>& param_schema();
const std::vector<std::string>& param_sections();   // in the order of the schema
const ParamSpec* find_param(const std::string& section, const std::string& key);
std::string type_name(ParamType type);
std::string accepted_range(const ParamSpec& spec);  // "0 < x <= 1", "one of: pm, treepm"
std::string scope_name(ParamScope scope);          // "periodic", "vacuum", "both"
std::string schema_markdown();                      // the reference table, params/README.md

}  // namespace orbis
