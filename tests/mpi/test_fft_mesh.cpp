// The distributed FFT mesh: x slabs over 1, 2 or 3 ranks (mesh sides that the rank count
// does not divide, and a rank holding no plane) against the whole mesh on one rank.
//   reproducible  bitwise the same modes and back-transformed values as on one rank, and
//                 equal to FFTW's 3D transform to rounding;
//   fast          (FFTW-MPI) the one-rank FFTW result to rounding.
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <cstring>

#include "core/comm.hpp"
#include "ic/white_noise.hpp"
#include "pm/fft_mesh.hpp"

using orbis::Comm;
using orbis::FftMesh;
using orbis::FftPlan;

namespace {

double field(int i, int j, int k) { return orbis::ic::white_noise(7, i, j, k) + 0.1 * i - 0.05 * k; }

template <typename Real>
void fill(FftMesh<Real>& mesh) {
  for (int i = mesh.local_x0(); i < mesh.local_x0() + mesh.local_nx(); ++i)
    for (int j = 0; j < mesh.n(); ++j)
      for (int k = 0; k < mesh.n(); ++k) mesh.real(i, j, k) = static_cast<Real>(field(i, j, k));
}

// max |a - b| / max |b| over the local slab's modes.
template <typename Real>
double mode_difference(const FftMesh<Real>& a, const FftMesh<Real>& whole) {
  double diff = 0, scale = 0;
  for (int i = a.local_x0(); i < a.local_x0() + a.local_nx(); ++i)
    for (int j = 0; j < a.n(); ++j)
      for (int k = 0; k < a.nz_complex(); ++k) {
        diff = std::max(diff, static_cast<double>(std::abs(a.mode(i, j, k) - whole.mode(i, j, k))));
        scale = std::max(scale, static_cast<double>(std::abs(whole.mode(i, j, k))));
      }
  return diff / scale;
}

}  // namespace

TEST_CASE("slab planes: FFTW-MPI's blocks, owners consistent") {
  for (int n : {4, 6, 16, 18, 64})
    for (int p : {1, 2, 3, 4, 5}) {
      int next = 0;
      for (int r = 0; r < p; ++r) {
        const auto s = orbis::slab_planes(n, p, r);
        CHECK(s.first == next);
        next += s.count;
        for (int i = s.first; i < s.first + s.count; ++i) CHECK(orbis::slab_owner(i, n, p) == r);
      }
      CHECK(next == n);
    }
}

TEST_CASE("reproducible transform: bitwise the one-rank result, and FFTW's to rounding") {
  const Comm world = Comm::world();
  for (int n : {4, 6, 16, 18}) {
    INFO("n = " << n << ", " << world.size() << " ranks");
    FftMesh<double> whole(n, Comm::self(), FftPlan::reproducible), fftw(n, Comm::self(), FftPlan::fast);
    FftMesh<double> slab(n, world, FftPlan::reproducible);
    fill(whole), fill(fftw), fill(slab);
    whole.forward(), fftw.forward(), slab.forward();
    CHECK(mode_difference(whole, fftw) < 1e-14);
    bool same = true;
    for (int i = slab.local_x0(); i < slab.local_x0() + slab.local_nx(); ++i)
      for (int j = 0; j < n; ++j)
        same = same && std::memcmp(&slab.mode(i, j, 0), &whole.mode(i, j, 0),
                                   sizeof(std::complex<double>) * slab.nz_complex()) == 0;
    CHECK(same);
    whole.backward(), slab.backward();
    same = true;
    double round_trip = 0;
    for (int i = slab.local_x0(); i < slab.local_x0() + slab.local_nx(); ++i)
      for (int j = 0; j < n; ++j)
        for (int k = 0; k < n; ++k) {
          same = same && slab.real(i, j, k) == whole.real(i, j, k);
          round_trip = std::max(round_trip, std::abs(slab.real(i, j, k) / (double(n) * n * n) - field(i, j, k)));
        }
    CHECK(same);
    CHECK(round_trip < 1e-13);
  }
}

TEST_CASE("fast transform (FFTW-MPI on several ranks) equals one rank's FFTW to rounding") {
  const Comm world = Comm::world();
  for (int n : {6, 16, 18}) {
    INFO("n = " << n << ", " << world.size() << " ranks");
    FftMesh<double> whole(n, Comm::self()), slab(n, world);
    FftMesh<float> whole_f(n, Comm::self()), slab_f(n, world);
    fill(whole), fill(slab), fill(whole_f), fill(slab_f);
    whole.forward(), slab.forward(), whole_f.forward(), slab_f.forward();
    CHECK(mode_difference(slab, whole) < 1e-14);
    CHECK(mode_difference(slab_f, whole_f) < 1e-5);
    slab.backward();
    double round_trip = 0;
    for (int i = slab.local_x0(); i < slab.local_x0() + slab.local_nx(); ++i)
      for (int j = 0; j < n; ++j)
        for (int k = 0; k < n; ++k)
          round_trip = std::max(round_trip, std::abs(slab.real(i, j, k) / (double(n) * n * n) - field(i, j, k)));
    CHECK(round_trip < 1e-13);
  }
}
