// The energy check's mesh term, (1/2) cell^3 sum_k G(k) |rho(k)|^2, from the per-row sums of
// the GPU PMs (gpu/pm_cuda_fourier.cuh's pm_long_range_energy_rows), added in one order
// whichever pass made the rows: the one-GPU PM's potential_energy() and force pass, and the PM
// over ranks' (each rank's rows of its y columns, gathered in rank order). The same rows give
// the same bits on every path.
#pragma once
#include <cstddef>
#include <vector>

namespace orbis {

// planes[i] += weight * (x plane i's rows, rank by rank, each rank's y columns in order):
// `rows` holds every rank's n x columns[r] sums ([i][j]), rank after rank (one rank: columns
// = {n}). Interlaced meshes weigh 1/2 each, plane by plane, as the host PM weighs them.
inline void add_mesh_energy_rows(const std::vector<double>& rows, const std::vector<int>& columns, double weight,
                                 std::vector<double>& planes) {
  const std::size_t n = planes.size();
  std::vector<std::size_t> first_row(columns.size(), 0);
  for (std::size_t r = 1; r < columns.size(); ++r)
    first_row[r] = first_row[r - 1] + n * static_cast<std::size_t>(columns[r - 1]);
  for (std::size_t i = 0; i < n; ++i) {
    double plane = 0;
    for (std::size_t r = 0; r < columns.size(); ++r)
      for (int j = 0; j < columns[r]; ++j) plane += rows[first_row[r] + i * static_cast<std::size_t>(columns[r]) + j];
    planes[i] += weight * plane;
  }
}

// (1/2) cell^3 times the planes' sum, in plane order.
inline double mesh_energy_of_planes(const std::vector<double>& planes, double cell) {
  double sum = 0;
  for (double plane : planes) sum += plane;
  return 0.5 * cell * cell * cell * sum;
}

}  // namespace orbis
