// The P(k) column of an orbis powerspec_NNN.txt (k_mean, P(k), ... per line; '#' comments),
// for tests that compare the spectra two runs wrote.
#pragma once
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace orbis::test {

inline std::vector<double> power_column(const std::string& path) {
  std::ifstream in(path);
  std::vector<double> p;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    double k = 0, power = 0;
    fields >> k >> power;
    p.push_back(power);
  }
  return p;
}

}  // namespace orbis::test
