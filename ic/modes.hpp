// Walking the Fourier modes of an n^3 real-to-complex mesh (pm/fft_mesh.hpp layout) with
// their integer wavevectors. Shared by the field generator, the LPT operators and the
// self-test, so all agree on which modes exist.
//
// Nyquist convention of the ICs: every mode with a component at the Nyquist index n/2 is
// zero. Those modes are their own partners (-n/2 = n/2), so i k times such a mode cannot be
// Hermitian; dropping them keeps delta, psi and the 2LPT source consistent with each other.
#pragma once
#include <complex>
#include <cstddef>

#include "pm/fft_mesh.hpp"

namespace orbis::ic {

struct Mode {
  int kx, ky, kz;        // signed integer wavevector, in units of the fundamental 2 pi / L
  bool dropped;          // k = 0 or a component at Nyquist: always zero in the ICs
  std::size_t index;     // into FftMesh::complex_data() (and arrays of the same layout)
  int weight;            // copies in the full k space: 1 on the kz = 0 plane, 2 elsewhere
                         // (the plane kz = n/2 is dropped)
  long k2() const { return static_cast<long>(kx) * kx + static_cast<long>(ky) * ky + static_cast<long>(kz) * kz; }
};

// Calls f(const Mode&) for every mode of the local slab; x slabs run in parallel (OpenMP),
// so f must only touch the mode it is given (and thread-local data).
template <typename Mesh, typename F>
void for_each_mode(const Mesh& mesh, F&& f) {
  const int n = mesh.n(), half = n / 2, nzc = mesh.nz_complex();
  const int x0 = mesh.local_x0(), x1 = mesh.local_x0() + mesh.local_nx();
#pragma omp parallel for schedule(static)
  for (int ix = x0; ix < x1; ++ix) {
    const int kx = Mesh::signed_index(ix, n);
    for (int iy = 0; iy < n; ++iy) {
      const int ky = Mesh::signed_index(iy, n);
      std::size_t index = mesh.complex_index(ix, iy, 0);
      for (int iz = 0; iz < nzc; ++iz, ++index) {
        Mode m{kx, ky, iz, false, index, iz == 0 ? 1 : 2};
        m.dropped = ix == half || iy == half || iz == half || (kx == 0 && ky == 0 && iz == 0);
        f(m);
      }
    }
  }
}

}  // namespace orbis::ic
