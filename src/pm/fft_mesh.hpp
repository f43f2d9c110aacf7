// A periodic n^3 mesh with its real-to-complex FFT (FFTW, in place), in float or double.
// Layout: real values at ((i*n + j) * padded + k), padded = 2*(n/2+1); the transform's
// complex values at ((i*n + j) * (n/2+1) + k). The mesh is held as an x-slab
// [local_x0, local_x0 + local_nx) so FFTW-MPI slabs drop in; serially the slab is whole.
// Transforms are unnormalised: forward() computes sum_x f(x) exp(-i k.x), backward() the
// inverse without the 1/n^3.
#pragma once
#include <complex>
#include <cstddef>
#include <memory>

namespace orbis {

template <typename Real>
class FftMesh {
 public:
  using Complex = std::complex<Real>;

  // plan_threads: FFTW threads for the transforms (0: all OpenMP threads). FFTW's threaded
  // plans are not bitwise stable across thread counts (seen at 100^3), so whatever must be
  // identical for any thread count (the ICs) plans with 1.
  explicit FftMesh(int n, int plan_threads = 0);
  ~FftMesh();
  FftMesh(const FftMesh&) = delete;
  FftMesh& operator=(const FftMesh&) = delete;

  int n() const { return n_; }
  int local_x0() const { return local_x0_; }
  int local_nx() const { return local_nx_; }
  int nz_complex() const { return n_ / 2 + 1; }
  int nz_padded() const { return 2 * (n_ / 2 + 1); }

  Real* real_data() { return data_; }
  const Real* real_data() const { return data_; }
  Complex* complex_data() { return reinterpret_cast<Complex*>(data_); }
  const Complex* complex_data() const { return reinterpret_cast<const Complex*>(data_); }

  // i is the global x index (it must lie in the local slab); j, k are in [0, n).
  std::size_t real_index(int i, int j, int k) const {
    return (static_cast<std::size_t>(i - local_x0_) * n_ + j) * nz_padded() + k;
  }
  std::size_t complex_index(int i, int j, int k) const {
    return (static_cast<std::size_t>(i - local_x0_) * n_ + j) * nz_complex() + k;
  }
  Real& real(int i, int j, int k) { return data_[real_index(i, j, k)]; }
  Real real(int i, int j, int k) const { return data_[real_index(i, j, k)]; }
  Complex& mode(int i, int j, int k) { return complex_data()[complex_index(i, j, k)]; }
  const Complex& mode(int i, int j, int k) const { return complex_data()[complex_index(i, j, k)]; }

  void fill_real(Real value);        // padding included
  void forward();                    // real -> complex
  void backward();                   // complex -> real

  // Signed integer wavenumber of index i on an n-point axis: 0, 1, ..., n/2, -n/2+1, ..., -1.
  static int signed_index(int i, int n) { return i <= n / 2 ? i : i - n; }
  std::size_t bytes() const;

 private:
  struct Plans;
  int n_, local_x0_ = 0, local_nx_;
  Real* data_ = nullptr;
  std::unique_ptr<Plans> plans_;
};

extern template class FftMesh<float>;
extern template class FftMesh<double>;

}  // namespace orbis
