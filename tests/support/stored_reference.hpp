// References that are expensive to compute (a long fine-step run, ...), computed once by the
// test that uses them and kept as small text tables in tests/data/ (tests/data/README.md says
// which, how they were made and when to remake them). A test reads its table; run with
// ORBIS_REGENERATE_REFERENCE=1 it computes the reference as it always did and rewrites the
// table instead, then compares against what it computed.
//
// The table: '#' lines "# key: value" (a key may repeat, e.g. one line per parameter), then
// rows of numbers written with 17 significant digits, so that a double reads back bit for bit.
#pragma once
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace orbis::test {

struct StoredTable {
  std::vector<std::pair<std::string, std::string>> meta;   // "# key: value" lines, in order
  std::vector<std::vector<double>> rows;

  void add(const std::string& key, const std::string& value) { meta.emplace_back(key, value); }
  // Every value of `key`, in order.
  std::vector<std::string> values(const std::string& key) const {
    std::vector<std::string> out;
    for (const auto& [k, v] : meta)
      if (k == key) out.push_back(v);
    return out;
  }
  // The one value of `key` as a number (a test failure when there is not exactly one).
  double number(const std::string& key) const {
    const auto v = values(key);
    REQUIRE_MESSAGE(v.size() == 1, "the stored reference has ", v.size(), " lines '# ", key, ":' (expected 1)");
    return std::strtod(v[0].c_str(), nullptr);
  }
};

// True when the environment asks the tests to recompute their stored references.
inline bool regenerate_references() {
  const char* env = std::getenv("ORBIS_REGENERATE_REFERENCE");
  return env != nullptr && std::string(env) == "1";
}

// tests/data/NAME in the source tree.
inline std::string stored_reference_path(const std::string& name) {
  return std::string(ORBIS_SOURCE_DIR) + "/tests/data/" + name;
}

inline std::string exact_number(double v) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

// Writes the table (a temporary file renamed over the old one).
inline void write_stored_table(const std::string& path, const StoredTable& table) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary);
    for (const auto& [key, value] : table.meta) out << "# " << key << ": " << value << '\n';
    for (const auto& row : table.rows) {
      for (std::size_t c = 0; c < row.size(); ++c) out << (c ? " " : "") << exact_number(row[c]);
      out << '\n';
    }
    REQUIRE_MESSAGE(out.good(), "cannot write ", temporary);
  }
  std::filesystem::rename(temporary, path);
  std::printf("wrote the reference %s\n", path.c_str());
}

// Reads a table written by write_stored_table; a missing file is a test failure that says how
// to make it.
inline StoredTable read_stored_table(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "the stored reference ", path,
                  " is missing: run this test with ORBIS_REGENERATE_REFERENCE=1 to compute it (tests/data/README.md)");
  StoredTable table;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      const auto colon = line.find(": ");
      if (colon != std::string::npos) table.add(line.substr(2, colon - 2), line.substr(colon + 2));
      continue;
    }
    std::istringstream fields(line);
    std::vector<double> row;
    for (std::string field; fields >> field;) row.push_back(std::strtod(field.c_str(), nullptr));
    table.rows.push_back(row);
  }
  return table;
}

}  // namespace orbis::test
