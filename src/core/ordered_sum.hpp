// sum_i f(i) for i < n in fixed blocks, each summed in order, then the block sums in order:
// the same bits for any thread count (an OpenMP reduction combines its partial sums in no
// fixed order). The host step engines' total momentum and rms sums.
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

namespace orbis {

template <typename F>
double ordered_sum(std::size_t n, F f) {
  constexpr std::size_t kBlock = 4096;
  const std::size_t n_blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(n_blocks);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t b = 0; b < static_cast<std::ptrdiff_t>(n_blocks); ++b) {
    double s = 0;
    const std::size_t end = std::min(n, (static_cast<std::size_t>(b) + 1) * kBlock);
    for (std::size_t i = static_cast<std::size_t>(b) * kBlock; i < end; ++i) s += f(i);
    partial[static_cast<std::size_t>(b)] = s;
  }
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace orbis
