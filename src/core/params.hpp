// Run parameters: a TOML file checked against the schema (params_schema.hpp), plus
// --set overrides. Every problem is an orbis::Error naming file, line, key and the accepted
// range, raised before any work is done.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "core/params_schema.hpp"

namespace orbis {

using ParamValue = std::variant<std::int64_t, double, bool, std::string, std::vector<double>>;

class Params {
 public:
  // Reads and validates FILE, then applies overrides "section.key=value" (value in TOML
  // syntax; strings may be given without quotes).
  static Params load(const std::string& file, const std::vector<std::string>& overrides = {});
  // The same from TOML text; `source` names it in messages.
  static Params parse(const std::string& toml_text, const std::string& source,
                      const std::vector<std::string>& overrides = {});

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::int64_t get_int(const std::string& name) const;
  double get_real(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;
  const std::vector<double>& get_real_list(const std::string& name) const;

  // Sets a value programmatically (tests, derived values); checked like a file's value.
  // `origin`: where it came from, for messages (where(), describe()).
  void set(const std::string& name, const ParamValue& value, const std::string& origin = "set()");
  // Whether the value was given (in the file, by --set or set()), not a schema default.
  bool given(const std::string& name) const;

  // Where a value came from, for messages about combinations of keys: "demo.toml:12",
  // "demo.toml (default)" or "--set".
  std::string where(const std::string& name) const;
  // "file:line: [section] key" for an error about this value.
  std::string describe(const std::string& name) const;
  // The folder of the parameter file, so relative paths inside it can be resolved.
  const std::string& directory() const { return directory_; }
  const std::string& source() const { return source_; }

  // Every value in force, defaults included, as TOML (used_parameters.toml) and as
  // (section.key, value text) pairs (the /Parameters group of HDF5 outputs).
  std::string to_toml() const;
  std::vector<std::pair<std::string, std::string>> flat() const;

 private:
  std::map<std::string, ParamValue> values_;
  std::map<std::string, std::string> origin_;
  std::string source_, directory_;
};

std::string value_to_toml(const ParamValue& value);

}  // namespace orbis
