#include "core/params.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <toml++/toml.h>

#include "core/error.hpp"

namespace orbis {
namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t next = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = row[j];
      row[j] = next;
    }
  }
  return row[b.size()];
}

std::string nearest_key(const std::string& section, const std::string& key) {
  std::string best;
  std::size_t best_distance = 1000;
  for (const auto& spec : param_schema()) {
    // A key in its own section wins ties; a key in another section costs a little more.
    std::size_t d = edit_distance(key, spec.key) * 2 + (section == spec.section ? 0 : 1);
    if (d < best_distance) {
      best_distance = d;
      best = "[" + std::string(spec.section) + "] " + spec.key;
    }
  }
  return best;
}

std::string nearest_section(const std::string& section) {
  std::string best;
  std::size_t best_distance = 1000;
  for (const auto& s : param_sections()) {
    std::size_t d = edit_distance(section, s);
    if (d < best_distance) best_distance = d, best = s;
  }
  return best;
}

std::string where_in(const std::string& source, const toml::source_region& region) {
  if (region.begin.line == 0) return source;
  return source + ":" + std::to_string(region.begin.line);
}

// Converts a TOML node to the spec's type or explains what was expected.
ParamValue convert(const ParamSpec& spec, const toml::node& node, const std::string& where) {
  auto wrong = [&](const char* found) -> ParamValue {
    const std::string type = type_name(spec.type);
    fail("{}: [{}] {} must be {} {} ({}), found {}", where, spec.section, spec.key,
         type[0] == 'i' ? "an" : "a", type, accepted_range(spec), found);
  };
  auto found_type = [&]() -> const char* {
    switch (node.type()) {
      case toml::node_type::string: return "a string";
      case toml::node_type::integer: return "an integer";
      case toml::node_type::floating_point: return "a number";
      case toml::node_type::boolean: return "a boolean";
      case toml::node_type::array: return "a list";
      case toml::node_type::table: return "a table";
      default: return "a date or time";
    }
  };
  switch (spec.type) {
    case ParamType::integer:
      if (auto v = node.as_integer()) return static_cast<std::int64_t>(v->get());
      return wrong(found_type());
    case ParamType::real:
      if (auto v = node.as_floating_point()) return v->get();
      if (auto v = node.as_integer()) return static_cast<double>(v->get());
      return wrong(found_type());
    case ParamType::boolean:
      if (auto v = node.as_boolean()) return v->get();
      return wrong(found_type());
    case ParamType::string:
      if (auto v = node.as_string()) return v->get();
      return wrong(found_type());
    case ParamType::real_list: {
      auto array = node.as_array();
      if (!array) return wrong(found_type());
      std::vector<double> out;
      for (const auto& element : *array) {
        if (auto v = element.as_floating_point()) out.push_back(v->get());
        else if (auto i = element.as_integer()) out.push_back(static_cast<double>(i->get()));
        else return wrong("a list with a non-number in it");
      }
      return out;
    }
  }
  return wrong(found_type());
}

void check_range(const ParamSpec& spec, const ParamValue& value, const std::string& where) {
  auto out_of_range = [&](const std::string& shown) {
    fail("{}: [{}] {} = {} is out of range: expected {} ({})", where, spec.section, spec.key,
         shown, accepted_range(spec), spec.help);
  };
  auto check_number = [&](double v, const std::string& shown) {
    bool below = spec.min_exclusive ? !(v > spec.min) : !(v >= spec.min);
    if (below || !(v <= spec.max) || std::isnan(v)) out_of_range(shown);
  };
  if (spec.choices) {
    const std::string& s = std::get<std::string>(value);
    std::string choices = std::string("|") + spec.choices + "|";
    if (s.empty() || s.find('|') != std::string::npos ||
        choices.find("|" + s + "|") == std::string::npos)
      out_of_range("\"" + s + "\"");
  }
  if (auto v = std::get_if<std::int64_t>(&value)) check_number(static_cast<double>(*v), value_to_toml(value));
  if (auto v = std::get_if<double>(&value)) check_number(*v, value_to_toml(value));
  if (auto list = std::get_if<std::vector<double>>(&value))
    for (double v : *list) check_number(v, value_to_toml(value));
}

ParamValue parse_default(const ParamSpec& spec) {
  auto table = toml::parse(std::string("v = ") + spec.default_toml);
  return convert(spec, *table.get("v"), "schema default");
}

std::string directory_of(const std::string& file) {
  auto slash = file.find_last_of('/');
  return slash == std::string::npos ? "." : file.substr(0, slash == 0 ? 1 : slash);
}

}  // namespace

std::string value_to_toml(const ParamValue& value) {
  struct Visitor {
    std::string operator()(std::int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const {
      std::string s = fmt::format("{:.17g}", v);
      // TOML floats need a '.' or an exponent; the shortest exact form keeps files readable.
      for (int digits = 6; digits <= 17; ++digits) {
        std::string shorter = fmt::format("{:.{}g}", v, digits);
        if (std::stod(shorter) == v) { s = shorter; break; }
      }
      if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
      return s;
    }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::string& v) const {
      std::ostringstream out;
      out << toml::value<std::string>(v);
      return out.str();
    }
    std::string operator()(const std::vector<double>& v) const {
      std::string out = "[";
      for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + (*this)(v[i]);
      return out + "]";
    }
  };
  return std::visit(Visitor{}, value);
}

Params Params::load(const std::string& file, const std::vector<std::string>& overrides) {
  std::ifstream in(file);
  if (!in) fail("cannot read the parameter file '{}'", file);
  std::stringstream text;
  text << in.rdbuf();
  Params params = parse(text.str(), file, overrides);
  params.directory_ = directory_of(file);
  return params;
}

Params Params::parse(const std::string& toml_text, const std::string& source,
                     const std::vector<std::string>& overrides) {
  Params params;
  params.source_ = source;
  params.directory_ = ".";
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    fail("{}:{}:{}: not valid TOML: {}", source, e.source().begin.line, e.source().begin.column,
         e.description());
  }
  // Unknown sections and keys first: a typo must not silently leave a default in force.
  for (auto&& [section_key, section_node] : root) {
    std::string section(section_key.str());
    auto table = section_node.as_table();
    if (!table) {
      fail("{}: '{}' must be a section [..] holding keys; every key belongs to one of the "
           "sections {}", where_in(source, section_node.source()), section,
           fmt::format("[{}]", fmt::join(param_sections(), "] [")));
    }
    if (std::find(param_sections().begin(), param_sections().end(), section) ==
        param_sections().end()) {
      fail("{}: unknown section [{}]; did you mean [{}]?", where_in(source, section_node.source()),
           section, nearest_section(section));
    }
    for (auto&& [key, node] : *table) {
      std::string k(key.str());
      const ParamSpec* spec = find_param(section, k);
      std::string where = where_in(source, node.source());
      if (!spec) fail("{}: unknown key [{}] {}; did you mean {}?", where, section, k, nearest_key(section, k));
      ParamValue value = convert(*spec, node, where);
      check_range(*spec, value, where);
      params.values_[spec->name()] = value;
      params.origin_[spec->name()] = where;
    }
  }
  for (const auto& assignment : overrides) {
    auto eq = assignment.find('=');
    auto dot = assignment.find('.');
    if (eq == std::string::npos || dot == std::string::npos || dot > eq)
      fail("--set '{}': expected section.key=value, e.g. --set time.z_final=1", assignment);
    std::string section = assignment.substr(0, dot);
    std::string key = assignment.substr(dot + 1, eq - dot - 1);
    std::string text = assignment.substr(eq + 1);
    const ParamSpec* spec = find_param(section, key);
    if (!spec) fail("--set '{}': unknown key [{}] {}; did you mean {}?", assignment, section, key, nearest_key(section, key));
    toml::table parsed;
    try {
      parsed = toml::parse("v = " + text);
    } catch (const toml::parse_error&) {
      if (spec->type != ParamType::string)
        fail("--set '{}': '{}' is not a valid {} ({})", assignment, text, type_name(spec->type), accepted_range(*spec));
      parsed = toml::table{{"v", text}};   // a bare word for a string key
    }
    std::string where = "--set " + assignment;
    ParamValue value = convert(*spec, *parsed.get("v"), where);
    check_range(*spec, value, where);
    params.values_[spec->name()] = value;
    params.origin_[spec->name()] = "--set";
  }
  // Keys of the other kind of run ([gravity] boundary: ParamScope) are refused, and their
  // defaults left out.
  const auto boundary_it = params.values_.find("gravity.boundary");
  const bool vacuum = boundary_it != params.values_.end() && std::get<std::string>(boundary_it->second) == "vacuum";
  const ParamScope other = vacuum ? ParamScope::periodic : ParamScope::vacuum;
  for (const auto& spec : param_schema()) {
    if (spec.scope != other || !params.values_.count(spec.name())) continue;
    fail("{}: [{}] {} belongs to {} runs, but {} ({}): {}", params.origin_[spec.name()], spec.section, spec.key,
         vacuum ? "periodic (cosmological)" : "isolated-system ([gravity] boundary = \"vacuum\")",
         vacuum ? "[gravity] boundary = \"vacuum\"" : "[gravity] boundary = \"periodic\"",
         vacuum ? params.origin_["gravity.boundary"] : source + " (default)",
         vacuum ? "an isolated system has no box, no cosmology and no redshifts; remove the key (params/README.md "
                  "marks the keys of each kind)"
                : "remove the key, or set boundary = \"vacuum\"");
  }
  for (const auto& spec : param_schema()) {
    if (params.values_.count(spec.name()) || spec.scope == other) continue;
    if (spec.default_toml == nullptr)
      fail("{}: missing required key [{}] {} ({}{}{}; {}){}", source, spec.section, spec.key,
           type_name(spec.type), *spec.unit ? ", " : "", spec.unit, accepted_range(spec),
           spec.scope == ParamScope::vacuum ? " for an isolated system ([gravity] boundary = \"vacuum\")" : "");
    if (*spec.default_toml == '\0') continue;   // optional, derived by the code
    params.values_[spec.name()] = parse_default(spec);
    params.origin_[spec.name()] = source + " (default)";
  }
  return params;
}

namespace {
template <typename V>
const V& typed(const std::map<std::string, ParamValue>& values, const std::string& name) {
  auto it = values.find(name);
  if (it == values.end()) fail("internal: parameter '{}' has no value (unknown or optional)", name);
  const V* v = std::get_if<V>(&it->second);
  if (!v) fail("internal: parameter '{}' read with the wrong type", name);
  return *v;
}
}  // namespace

std::int64_t Params::get_int(const std::string& name) const { return typed<std::int64_t>(values_, name); }
double Params::get_real(const std::string& name) const { return typed<double>(values_, name); }
bool Params::get_bool(const std::string& name) const { return typed<bool>(values_, name); }
const std::string& Params::get_string(const std::string& name) const { return typed<std::string>(values_, name); }
const std::vector<double>& Params::get_real_list(const std::string& name) const {
  return typed<std::vector<double>>(values_, name);
}

void Params::set(const std::string& name, const ParamValue& value, const std::string& origin) {
  auto dot = name.find('.');
  const ParamSpec* spec = dot == std::string::npos ? nullptr : find_param(name.substr(0, dot), name.substr(dot + 1));
  if (!spec) fail("internal: set() of unknown parameter '{}'", name);
  ParamValue v = value;
  if (spec->type == ParamType::real)
    if (auto i = std::get_if<std::int64_t>(&v)) v = static_cast<double>(*i);
  // ParamValue's alternatives are in the order of ParamType.
  if (v.index() != static_cast<std::size_t>(spec->type))
    fail("internal: set() of '{}' with a value that is not a {}", name, type_name(spec->type));
  check_range(*spec, v, "set()");
  values_[name] = v;
  origin_[name] = origin;
}

bool Params::given(const std::string& name) const {
  const auto it = origin_.find(name);
  const std::string tail = " (default)";
  return has(name) && it != origin_.end() &&
         !(it->second.size() >= tail.size() && it->second.compare(it->second.size() - tail.size(), tail.size(), tail) == 0);
}

std::string Params::where(const std::string& name) const {
  auto it = origin_.find(name);
  return it == origin_.end() ? source_ : it->second;
}

std::string Params::describe(const std::string& name) const {
  auto dot = name.find('.');
  return fmt::format("{}: [{}] {}", where(name), name.substr(0, dot), name.substr(dot + 1));
}

std::string Params::to_toml() const {
  std::string out = "# Every parameter in force for this run, defaults included (orbis).\n";
  // The keys of the other kind of run ([gravity] boundary, ParamScope) are left out, and so
  // are the sections that hold only such keys.
  const auto boundary = values_.find("gravity.boundary");
  const bool vacuum = boundary != values_.end() && std::get<std::string>(boundary->second) == "vacuum";
  const ParamScope other = vacuum ? ParamScope::periodic : ParamScope::vacuum;
  for (const auto& section : param_sections()) {
    std::string lines;
    for (const auto& spec : param_schema()) {
      if (section != spec.section || spec.scope == other) continue;
      auto it = values_.find(spec.name());
      if (it == values_.end()) {
        lines += fmt::format("# {} is not set: {}\n", spec.key, spec.help);
        continue;
      }
      lines += fmt::format("{} = {}\n", spec.key, value_to_toml(it->second));
    }
    if (!lines.empty()) out += "\n[" + section + "]\n" + lines;
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> Params::flat() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& spec : param_schema()) {
    auto it = values_.find(spec.name());
    if (it != values_.end()) out.emplace_back(spec.name(), value_to_toml(it->second));
  }
  return out;
}

}  // namespace orbis
