// Two power spectra the same bits, row by row (the rows' fields one by one: the struct's
// padding is not compared; the linear column is not either, NaN where not given).
#pragma once
#include <cstring>

#include "analysis/power_spectrum.hpp"

namespace orbis::test {

inline bool same_bits(const PowerSpectrum& a, const PowerSpectrum& b) {
  if (a.bins.size() != b.bins.size()) return false;
  for (std::size_t i = 0; i < a.bins.size(); ++i) {
    const PowerSpectrumBin& x = a.bins[i];
    const PowerSpectrumBin& y = b.bins[i];
    if (std::memcmp(&x.k_mean, &y.k_mean, 8) || std::memcmp(&x.power, &y.power, 8) || x.modes != y.modes ||
        std::memcmp(&x.shot_noise, &y.shot_noise, 8) || x.fold != y.fold)
      return false;
  }
  return true;
}

}  // namespace orbis::test
