// The reproducible 3D real-to-complex transform of an x-slab mesh (FftPlan::reproducible in
// pm/fft_mesh.hpp): one-dimensional FFTW transforms of every line, z (real to complex), then
// y, then x (complex), each line on its own with one plan made with FFTW_ESTIMATE |
// FFTW_UNALIGNED (the same algorithm whatever the line's address), so every output value is
// the same sequence of operations on the same inputs for any number of ranks and threads.
// The x lines cross the slabs: the mesh is transposed to y slabs (rows j of the same block
// rule as the x planes) with one all-to-all, transformed, and transposed back. On one rank
// the x lines are read from the slab directly (the same transforms, no copy of the mesh).
// Memory on several ranks: three more slab-sized buffers during the x pass.
#pragma once
#include <memory>
#include <vector>

#include "core/comm.hpp"

namespace orbis {

template <typename Real>
class ReproducibleFft {
 public:
  // The mesh: n^3, this rank's x planes [x0, x0 + nx), the FftMesh layout.
  ReproducibleFft(int n, const Comm& comm, int x0, int nx);
  ~ReproducibleFft();
  ReproducibleFft(const ReproducibleFft&) = delete;
  ReproducibleFft& operator=(const ReproducibleFft&) = delete;

  void forward(Real* data);    // collective
  void backward(Real* data);   // collective

 private:
  struct Plans;
  void z_lines(Real* data, bool forward);
  void y_lines(Real* data, bool forward);
  void x_lines(Real* data, bool forward);
  int n_, x0_, nx_;
  Comm comm_;
  std::unique_ptr<Plans> plans_;
  // Over ranks, the x lines' transposes: the blocks sent, received, and the y slab, kept from
  // call to call (an IC's 2LPT makes a dozen transforms: new arrays each time cost their
  // first touch).
  std::vector<Real> send_, received_, columns_;
};

extern template class ReproducibleFft<float>;
extern template class ReproducibleFft<double>;

}  // namespace orbis
