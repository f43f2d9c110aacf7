#include "pm/fft_lines.hpp"

#include <algorithm>
#include <complex>
#include <vector>

#include "core/error.hpp"
#include "pm/fft_mesh.hpp"
#include "pm/fftw_traits.hpp"

namespace orbis {

template <typename Real>
struct ReproducibleFft<Real>::Plans {
  using Plan = typename Fftw<Real>::plan;
  Plan r2c = nullptr, c2r = nullptr, c2c_forward = nullptr, c2c_backward = nullptr;
  ~Plans() {
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    for (Plan p : {r2c, c2r, c2c_forward, c2c_backward})
      if (p) Fftw<Real>::destroy(p);
  }
};

template <typename Real>
ReproducibleFft<Real>::ReproducibleFft(int n, const Comm& comm, int x0, int nx)
    : n_(n), x0_(x0), nx_(nx), comm_(comm), plans_(std::make_unique<Plans>()) {
  // Plans are made on a scratch line; FFTW_UNALIGNED lets them run on any line later.
  const unsigned flags = FFTW_ESTIMATE | FFTW_UNALIGNED;
  std::vector<Real> scratch(2 * static_cast<std::size_t>(n) + 2);
  std::lock_guard<std::mutex> lock(fftw_planner_mutex());
  Fftw<Real>::init_threads();
  Fftw<Real>::plan_with_nthreads(1);
  plans_->r2c = Fftw<Real>::r2c_1d(n, scratch.data(), flags);
  plans_->c2r = Fftw<Real>::c2r_1d(n, scratch.data(), flags);
  plans_->c2c_forward = Fftw<Real>::c2c_1d(n, scratch.data(), FFTW_FORWARD, flags);
  plans_->c2c_backward = Fftw<Real>::c2c_1d(n, scratch.data(), FFTW_BACKWARD, flags);
  if (!plans_->r2c || !plans_->c2r || !plans_->c2c_forward || !plans_->c2c_backward)
    fail("FFTW could not plan the one-dimensional transforms of length {}", n);
}

template <typename Real>
ReproducibleFft<Real>::~ReproducibleFft() = default;

template <typename Real>
void ReproducibleFft<Real>::forward(Real* data) {
  z_lines(data, true);
  y_lines(data, true);
  x_lines(data, true);
}

template <typename Real>
void ReproducibleFft<Real>::backward(Real* data) {
  x_lines(data, false);
  y_lines(data, false);
  z_lines(data, false);
}

template <typename Real>
void ReproducibleFft<Real>::z_lines(Real* data, bool forward) {
  const int n = n_, padded = 2 * (n / 2 + 1);
  const std::ptrdiff_t rows = static_cast<std::ptrdiff_t>(nx_) * n;
  const auto plan = forward ? plans_->r2c : plans_->c2r;
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t r = 0; r < rows; ++r) {
    Real* row = data + r * padded;
    if (forward) Fftw<Real>::execute_r2c(plan, row);
    else Fftw<Real>::execute_c2r(plan, row);
  }
}

template <typename Real>
void ReproducibleFft<Real>::y_lines(Real* data, bool forward) {
  using Complex = std::complex<Real>;
  const int n = n_, nzc = n / 2 + 1;
  const auto plan = forward ? plans_->c2c_forward : plans_->c2c_backward;
  Complex* c = reinterpret_cast<Complex*>(data);
  const std::ptrdiff_t lines = static_cast<std::ptrdiff_t>(nx_) * nzc;
#pragma omp parallel
  {
    std::vector<Complex> line(n);
#pragma omp for schedule(static)
    for (std::ptrdiff_t l = 0; l < lines; ++l) {
      Complex* first = c + (l / nzc) * static_cast<std::ptrdiff_t>(n) * nzc + l % nzc;
      for (int j = 0; j < n; ++j) line[j] = first[static_cast<std::ptrdiff_t>(j) * nzc];
      Fftw<Real>::execute_c2c(plan, reinterpret_cast<Real*>(line.data()));
      for (int j = 0; j < n; ++j) first[static_cast<std::ptrdiff_t>(j) * nzc] = line[j];
    }
  }
}

template <typename Real>
void ReproducibleFft<Real>::x_lines(Real* data, bool forward) {
  using Complex = std::complex<Real>;
  const int n = n_, nzc = n / 2 + 1, p = comm_.size();
  const auto plan = forward ? plans_->c2c_forward : plans_->c2c_backward;
  Complex* c = reinterpret_cast<Complex*>(data);
  // Transforms the lines of a [rows][n][nzc] array along its middle axis.
  auto transform = [&](Complex* base, int rows) {
    const std::ptrdiff_t lines = static_cast<std::ptrdiff_t>(rows) * nzc;
#pragma omp parallel
    {
      std::vector<Complex> line(n);
#pragma omp for schedule(static)
      for (std::ptrdiff_t l = 0; l < lines; ++l) {
        Complex* first = base + (l / nzc) * static_cast<std::ptrdiff_t>(n) * nzc + l % nzc;
        for (int i = 0; i < n; ++i) line[i] = first[static_cast<std::ptrdiff_t>(i) * nzc];
        Fftw<Real>::execute_c2c(plan, reinterpret_cast<Real*>(line.data()));
        for (int i = 0; i < n; ++i) first[static_cast<std::ptrdiff_t>(i) * nzc] = line[i];
      }
    }
  };
  if (p == 1) {
    // The whole mesh is local: the x line of (j, k) starts at j * nzc + k with stride n * nzc.
    const std::ptrdiff_t lines = static_cast<std::ptrdiff_t>(n) * nzc;
    const std::ptrdiff_t stride = static_cast<std::ptrdiff_t>(n) * nzc;
#pragma omp parallel
    {
      std::vector<Complex> line(n);
#pragma omp for schedule(static)
      for (std::ptrdiff_t l = 0; l < lines; ++l) {
        Complex* first = c + l;
        for (int i = 0; i < n; ++i) line[i] = first[i * stride];
        Fftw<Real>::execute_c2c(plan, reinterpret_cast<Real*>(line.data()));
        for (int i = 0; i < n; ++i) first[i * stride] = line[i];
      }
    }
    return;
  }
  // x slabs [nx][n (j)][nzc] -> y slabs [ny][n (i)][nzc], the x lines, and back.
  const int r = comm_.rank();
  const SlabPlanes mine_y = slab_planes(n, p, r);
  std::vector<std::size_t> counts(p);
  std::vector<Complex> send;
  send.reserve(static_cast<std::size_t>(nx_) * n * nzc);
  for (int s = 0; s < p; ++s) {
    const SlabPlanes rows = slab_planes(n, p, s);
    counts[s] = static_cast<std::size_t>(nx_) * rows.count * nzc;
    for (int x = 0; x < nx_; ++x)
      for (int j = rows.first; j < rows.first + rows.count; ++j) {
        const Complex* src = c + (static_cast<std::size_t>(x) * n + j) * nzc;
        send.insert(send.end(), src, src + nzc);
      }
  }
  std::vector<Complex> got = comm_.alltoallv(send, counts);
  std::vector<Complex> columns(static_cast<std::size_t>(mine_y.count) * n * nzc);
  std::size_t at = 0;
  for (int s = 0; s < p; ++s) {
    const SlabPlanes planes = slab_planes(n, p, s);
    for (int x = planes.first; x < planes.first + planes.count; ++x)
      for (int jl = 0; jl < mine_y.count; ++jl, at += nzc)
        std::copy_n(&got[at], nzc, &columns[(static_cast<std::size_t>(jl) * n + x) * nzc]);
  }
  transform(columns.data(), mine_y.count);
  send.clear();
  for (int s = 0; s < p; ++s) {
    const SlabPlanes planes = slab_planes(n, p, s);
    counts[s] = static_cast<std::size_t>(planes.count) * mine_y.count * nzc;
    for (int x = planes.first; x < planes.first + planes.count; ++x)
      for (int jl = 0; jl < mine_y.count; ++jl) {
        const Complex* src = &columns[(static_cast<std::size_t>(jl) * n + x) * nzc];
        send.insert(send.end(), src, src + nzc);
      }
  }
  got = comm_.alltoallv(send, counts);
  at = 0;
  for (int s = 0; s < p; ++s) {
    const SlabPlanes rows = slab_planes(n, p, s);
    for (int x = 0; x < nx_; ++x)
      for (int j = rows.first; j < rows.first + rows.count; ++j, at += nzc)
        std::copy_n(&got[at], nzc, c + (static_cast<std::size_t>(x) * n + j) * nzc);
  }
}

template class ReproducibleFft<float>;
template class ReproducibleFft<double>;

}  // namespace orbis
