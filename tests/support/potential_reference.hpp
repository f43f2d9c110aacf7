// A snapshot's potentials (/PartTypeN/Potential, [output] potential) against the direct sum
// over every other particle, written out here in long double from the file's own positions
// and masses: the reference of the vacuum potential tests on the CPU and on the GPU.
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "io/hdf5_file.hpp"

namespace orbis::test {

struct TypePotentials {
  std::vector<double> pos, potential, mass;   // pos: x y z per particle
};

// /PartType<t>'s positions, potentials and masses (Masses, else MassTable[t]).
inline TypePotentials read_potentials(const H5Reader& r, int t) {
  const std::string group = "/PartType" + std::to_string(t);
  TypePotentials d;
  d.pos = r.read<double>(group + "/Coordinates");
  d.potential = r.read<double>(group + "/Potential");
  if (r.has(group + "/Masses")) {
    d.mass = r.read<double>(group + "/Masses");
  } else {
    const double m = r.attribute_array<double>("/Header", "MassTable")[static_cast<std::size_t>(t)];
    d.mass.assign(d.potential.size(), m);
  }
  REQUIRE(d.pos.size() == 3 * d.potential.size());
  return d;
}

// The largest relative difference between the files' potentials and -G sum_{j != i} m_j /
// sqrt(r_ij^2 + eps^2) over every particle of every type given; `w` receives sum m_i phi_i / 2
// of the files' potentials.
inline double worst_against_direct_sum(const std::vector<TypePotentials>& types, double g, double eps, double& w) {
  std::vector<long double> x, m;
  std::vector<double> phi;
  for (const TypePotentials& d : types) {
    x.insert(x.end(), d.pos.begin(), d.pos.end());
    m.insert(m.end(), d.mass.begin(), d.mass.end());
    phi.insert(phi.end(), d.potential.begin(), d.potential.end());
  }
  const std::size_t n = m.size();
  double worst = 0;
  long double half_sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    long double s = 0;
    for (std::size_t j = 0; j < n; ++j) {
      if (j == i) continue;
      const long double dx = x[3 * j] - x[3 * i], dy = x[3 * j + 1] - x[3 * i + 1], dz = x[3 * j + 2] - x[3 * i + 2];
      s += m[j] / std::sqrt(dx * dx + dy * dy + dz * dz + static_cast<long double>(eps) * eps);
    }
    const long double expected = -static_cast<long double>(g) * s;
    worst = std::max(worst, static_cast<double>(std::fabs((phi[i] - expected) / expected)));
    half_sum += 0.5L * m[i] * phi[i];
  }
  w = static_cast<double>(half_sum);
  return worst;
}

}  // namespace orbis::test
