#include "pm/fft_mesh.hpp"

#include <fftw3.h>
#include <omp.h>

#include <mutex>

#include "core/error.hpp"

namespace orbis {
namespace {

// FFTW's planner is not thread-safe and its threads must be set up once per precision.
std::mutex g_planner_mutex;

template <typename Real> struct Fftw;
template <> struct Fftw<double> {
  using plan = fftw_plan;
  static void init_threads() { static const int ok = fftw_init_threads(); (void)ok; }
  static void plan_with_nthreads(int n) { fftw_plan_with_nthreads(n); }
  static double* malloc(std::size_t n) { return static_cast<double*>(fftw_malloc(n * sizeof(double))); }
  static void free(double* p) { fftw_free(p); }
  static plan r2c(int n, double* data) {
    return fftw_plan_dft_r2c_3d(n, n, n, data, reinterpret_cast<fftw_complex*>(data), FFTW_ESTIMATE);
  }
  static plan c2r(int n, double* data) {
    return fftw_plan_dft_c2r_3d(n, n, n, reinterpret_cast<fftw_complex*>(data), data, FFTW_ESTIMATE);
  }
  static void execute(plan p) { fftw_execute(p); }
  static void destroy(plan p) { fftw_destroy_plan(p); }
};
template <> struct Fftw<float> {
  using plan = fftwf_plan;
  static void init_threads() { static const int ok = fftwf_init_threads(); (void)ok; }
  static void plan_with_nthreads(int n) { fftwf_plan_with_nthreads(n); }
  static float* malloc(std::size_t n) { return static_cast<float*>(fftwf_malloc(n * sizeof(float))); }
  static void free(float* p) { fftwf_free(p); }
  static plan r2c(int n, float* data) {
    return fftwf_plan_dft_r2c_3d(n, n, n, data, reinterpret_cast<fftwf_complex*>(data), FFTW_ESTIMATE);
  }
  static plan c2r(int n, float* data) {
    return fftwf_plan_dft_c2r_3d(n, n, n, reinterpret_cast<fftwf_complex*>(data), data, FFTW_ESTIMATE);
  }
  static void execute(plan p) { fftwf_execute(p); }
  static void destroy(plan p) { fftwf_destroy_plan(p); }
};

}  // namespace

template <typename Real>
struct FftMesh<Real>::Plans {
  typename Fftw<Real>::plan forward = nullptr, backward = nullptr;
};

template <typename Real>
FftMesh<Real>::FftMesh(int n, int plan_threads) : n_(n), local_nx_(n), plans_(std::make_unique<Plans>()) {
  if (n < 2 || n % 2 != 0) fail("FFT mesh size {} must be even and at least 2", n);
  const std::size_t count = static_cast<std::size_t>(n) * n * nz_padded();
  data_ = Fftw<Real>::malloc(count);
  if (!data_) fail("cannot allocate an FFT mesh of {}^3 ({:.1f} MiB)", n, count * sizeof(Real) / 1048576.0);
  std::lock_guard<std::mutex> lock(g_planner_mutex);
  Fftw<Real>::init_threads();
  Fftw<Real>::plan_with_nthreads(plan_threads > 0 ? plan_threads : omp_get_max_threads());
  plans_->forward = Fftw<Real>::r2c(n, data_);
  plans_->backward = Fftw<Real>::c2r(n, data_);
  if (!plans_->forward || !plans_->backward) fail("FFTW could not plan a {}^3 transform", n);
  fill_real(0);
}

template <typename Real>
FftMesh<Real>::~FftMesh() {
  std::lock_guard<std::mutex> lock(g_planner_mutex);
  if (plans_->forward) Fftw<Real>::destroy(plans_->forward);
  if (plans_->backward) Fftw<Real>::destroy(plans_->backward);
  Fftw<Real>::free(data_);
}

template <typename Real>
void FftMesh<Real>::fill_real(Real value) {
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(local_nx_) * n_ * nz_padded();
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < count; ++i) data_[i] = value;
}

template <typename Real> void FftMesh<Real>::forward() { Fftw<Real>::execute(plans_->forward); }
template <typename Real> void FftMesh<Real>::backward() { Fftw<Real>::execute(plans_->backward); }

template <typename Real>
std::size_t FftMesh<Real>::bytes() const {
  return static_cast<std::size_t>(local_nx_) * n_ * nz_padded() * sizeof(Real);
}

template class FftMesh<float>;
template class FftMesh<double>;

}  // namespace orbis
