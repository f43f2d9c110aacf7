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
  // x slabs [nx][n (j)][nzc] -> y slabs [ny][n (i)][nzc], the x lines, and back. The blocks
  // move in z lines of nzc values (MPI's element), packed and unpacked on every thread: each
  // (source rank, x plane) pair's lines have a place of their own.
  const int r = comm_.rank();
  const SlabPlanes mine_y = slab_planes(n, p, r);
  const std::size_t line = static_cast<std::size_t>(nzc);
  // Rank s's x planes are also its y rows (the same split).
  std::vector<SlabPlanes> planes(p);
  std::vector<std::size_t> out_lines(p), in_lines(p), out_at(p + 1, 0), in_at(p + 1, 0);
  for (int s = 0; s < p; ++s) {
    planes[s] = slab_planes(n, p, s);
    out_lines[s] = static_cast<std::size_t>(nx_) * planes[s].count;          // to s: my x planes, its y rows
    in_lines[s] = static_cast<std::size_t>(planes[s].count) * mine_y.count;  // from s: its x planes, my y rows
    out_at[s + 1] = out_at[s] + out_lines[s];
    in_at[s + 1] = in_at[s] + in_lines[s];
  }
  const auto grow = [](std::vector<Real>& v, std::size_t complex_count) {
    if (v.size() < 2 * complex_count) v.resize(2 * complex_count);
    return reinterpret_cast<Complex*>(v.data());
  };
  Complex* sent = grow(send_, std::max<std::size_t>(out_at[p], 1) * line);
  Complex* got = grow(received_, std::max<std::size_t>(in_at[p], 1) * line);
  Complex* columns = grow(columns_, std::max<std::size_t>(static_cast<std::size_t>(mine_y.count) * n, 1) * line);
  // The x slab's blocks and the y slab's columns against their places in the exchanged
  // buffers, one (rank, x plane) pair per iteration on every thread; `out` packs into the
  // buffers, else unpacks from them.
  const auto x_slab_blocks = [&](bool out) {
    const std::ptrdiff_t pairs = static_cast<std::ptrdiff_t>(p) * nx_;
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t k = 0; k < pairs; ++k) {
      const int s = static_cast<int>(k / nx_), x = static_cast<int>(k % nx_);
      Complex* slab = c + (static_cast<std::size_t>(x) * n + planes[s].first) * line;
      Complex* buffer = sent + (out_at[s] + static_cast<std::size_t>(x) * planes[s].count) * line;
      if (out) std::copy_n(slab, planes[s].count * line, buffer);
      else std::copy_n(buffer, planes[s].count * line, slab);
    }
  };
  const auto y_slab_columns = [&](bool out) {
#pragma omp parallel for schedule(static)
    for (int x = 0; x < n; ++x) {
      const int s = slab_owner(x, n, p);
      const std::size_t at = in_at[s] + static_cast<std::size_t>(x - planes[s].first) * mine_y.count;
      for (int jl = 0; jl < mine_y.count; ++jl) {
        Complex* column = columns + (static_cast<std::size_t>(jl) * n + x) * line;
        if (out) std::copy_n(column, line, got + (at + jl) * line);
        else std::copy_n(got + (at + jl) * line, line, column);
      }
    }
  };
  x_slab_blocks(true);
  comm_.alltoallv_known(sent, out_lines, got, in_lines, line * sizeof(Complex));
  y_slab_columns(false);
  transform(columns, mine_y.count);
  y_slab_columns(true);
  comm_.alltoallv_known(got, in_lines, sent, out_lines, line * sizeof(Complex));
  x_slab_blocks(false);
}

template class ReproducibleFft<float>;
template class ReproducibleFft<double>;

}  // namespace orbis
