// FFTW's C API for float and double behind one name, for the FFT mesh and its line
// transforms (pm/fft_mesh.cpp, pm/fft_lines.cpp). Internal to pm/.
#pragma once
#include <fftw3.h>

#include <cstddef>
#include <mutex>

namespace orbis {

// FFTW's planner is not thread-safe: every plan is made and destroyed under this lock.
std::mutex& fftw_planner_mutex();

template <typename Real> struct Fftw;

template <> struct Fftw<double> {
  using plan = fftw_plan;
  using complex = fftw_complex;
  static void init_threads() { static const int ok = fftw_init_threads(); (void)ok; }
  static void plan_with_nthreads(int n) { fftw_plan_with_nthreads(n); }
  static double* malloc(std::size_t n) { return static_cast<double*>(fftw_malloc(n * sizeof(double))); }
  static void free(double* p) { fftw_free(p); }
  static plan r2c_3d(int n, double* data) {
    return fftw_plan_dft_r2c_3d(n, n, n, data, reinterpret_cast<complex*>(data), FFTW_ESTIMATE);
  }
  static plan c2r_3d(int n, double* data) {
    return fftw_plan_dft_c2r_3d(n, n, n, reinterpret_cast<complex*>(data), data, FFTW_ESTIMATE);
  }
  static plan r2c_1d(int n, double* data, unsigned flags) {
    return fftw_plan_dft_r2c_1d(n, data, reinterpret_cast<complex*>(data), flags);
  }
  static plan c2r_1d(int n, double* data, unsigned flags) {
    return fftw_plan_dft_c2r_1d(n, reinterpret_cast<complex*>(data), data, flags);
  }
  static plan c2c_1d(int n, double* data, int sign, unsigned flags) {
    auto* c = reinterpret_cast<complex*>(data);
    return fftw_plan_dft_1d(n, c, c, sign, flags);
  }
  static void execute(plan p) { fftw_execute(p); }
  static void execute_r2c(plan p, double* data) { fftw_execute_dft_r2c(p, data, reinterpret_cast<complex*>(data)); }
  static void execute_c2r(plan p, double* data) { fftw_execute_dft_c2r(p, reinterpret_cast<complex*>(data), data); }
  static void execute_c2c(plan p, double* data) {
    auto* c = reinterpret_cast<complex*>(data);
    fftw_execute_dft(p, c, c);
  }
  static void destroy(plan p) { fftw_destroy_plan(p); }
};

template <> struct Fftw<float> {
  using plan = fftwf_plan;
  using complex = fftwf_complex;
  static void init_threads() { static const int ok = fftwf_init_threads(); (void)ok; }
  static void plan_with_nthreads(int n) { fftwf_plan_with_nthreads(n); }
  static float* malloc(std::size_t n) { return static_cast<float*>(fftwf_malloc(n * sizeof(float))); }
  static void free(float* p) { fftwf_free(p); }
  static plan r2c_3d(int n, float* data) {
    return fftwf_plan_dft_r2c_3d(n, n, n, data, reinterpret_cast<complex*>(data), FFTW_ESTIMATE);
  }
  static plan c2r_3d(int n, float* data) {
    return fftwf_plan_dft_c2r_3d(n, n, n, reinterpret_cast<complex*>(data), data, FFTW_ESTIMATE);
  }
  static plan r2c_1d(int n, float* data, unsigned flags) {
    return fftwf_plan_dft_r2c_1d(n, data, reinterpret_cast<complex*>(data), flags);
  }
  static plan c2r_1d(int n, float* data, unsigned flags) {
    return fftwf_plan_dft_c2r_1d(n, reinterpret_cast<complex*>(data), data, flags);
  }
  static plan c2c_1d(int n, float* data, int sign, unsigned flags) {
    auto* c = reinterpret_cast<complex*>(data);
    return fftwf_plan_dft_1d(n, c, c, sign, flags);
  }
  static void execute(plan p) { fftwf_execute(p); }
  static void execute_r2c(plan p, float* data) { fftwf_execute_dft_r2c(p, data, reinterpret_cast<complex*>(data)); }
  static void execute_c2r(plan p, float* data) { fftwf_execute_dft_c2r(p, reinterpret_cast<complex*>(data), data); }
  static void execute_c2c(plan p, float* data) {
    auto* c = reinterpret_cast<complex*>(data);
    fftwf_execute_dft(p, c, c);
  }
  static void destroy(plan p) { fftwf_destroy_plan(p); }
};

}  // namespace orbis
