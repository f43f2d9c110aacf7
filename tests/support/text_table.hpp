// Columns of the text tables orbis writes (powerspec_NNN.txt, fof_tab_NNN_massfn.txt: numbers
// per line, '#' comments), for tests that compare what two runs wrote.
#pragma once
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace orbis::test {

// Column `column` (0-based) of the lines that are not comments.
inline std::vector<double> table_column(const std::string& path, int column) {
  std::ifstream in(path);
  std::vector<double> values;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    double v = 0;
    for (int c = 0; c <= column; ++c) fields >> v;
    values.push_back(v);
  }
  return values;
}

// The P(k) column of a powerspec_NNN.txt.
inline std::vector<double> power_column(const std::string& path) { return table_column(path, 1); }

}  // namespace orbis::test
