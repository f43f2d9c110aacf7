// Positions on the device as x | y | z blocks of n doubles, as the CUDA step engine holds its
// particles: for the GPU tests that hand device positions to a solver (over ranks too).
#pragma once
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "core/vec3.hpp"

namespace orbis::test {

class DevicePositions {
 public:
  // On `device` when given (>= 0), else the current one. Never an empty allocation, so a rank
  // without particles still passes valid pointers.
  explicit DevicePositions(const std::vector<Vec3d>& pos, int device = -1) : n_(pos.size()) {
    if (device >= 0) REQUIRE(cudaSetDevice(device) == cudaSuccess);
    std::vector<double> blocks(std::max<std::size_t>(3 * n_, 1));
    for (std::size_t i = 0; i < n_; ++i)
      for (int d = 0; d < 3; ++d) blocks[static_cast<std::size_t>(d) * n_ + i] = pos[i][d];
    REQUIRE(cudaMalloc(&data_, blocks.size() * sizeof(double)) == cudaSuccess);
    REQUIRE(cudaMemcpy(data_, blocks.data(), blocks.size() * sizeof(double), cudaMemcpyHostToDevice) == cudaSuccess);
    // A copy from pageable memory may return before it lands, and the solvers run on
    // non-blocking streams, which do not wait for the legacy stream.
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  }
  ~DevicePositions() { cudaFree(data_); }
  DevicePositions(const DevicePositions&) = delete;
  DevicePositions& operator=(const DevicePositions&) = delete;

  double* data() const { return data_; }
  double* x() const { return data_; }
  double* y() const { return data_ + n_; }
  double* z() const { return data_ + 2 * n_; }
  std::size_t size() const { return n_; }

 private:
  std::size_t n_;
  double* data_ = nullptr;
};

}  // namespace orbis::test
