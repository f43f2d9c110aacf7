// A periodic n^3 mesh with its real-to-complex FFT (FFTW, in place), in float or double,
// held as x slabs over the ranks of a communicator.
//
// Layout: rank r holds the x planes [local_x0, local_x0 + local_nx) (slab_planes: FFTW-MPI's
// blocks of ceil(n / ranks) planes, so the last ranks may hold fewer or none); real values at
// (((i - x0) * n + j) * padded + k), padded = 2*(n/2+1); the transform's complex values at
// (((i - x0) * n + j) * (n/2+1) + k), the same x slab (not transposed). Transforms are
// unnormalised: forward() computes sum_x f(x) exp(-i k.x), backward() the inverse without
// the 1/n^3. Both are collective over the communicator.
//
// Two ways to transform (FftPlan):
//   fast          one rank: FFTW's 3D plan (multithreaded); several: FFTW-MPI. Results
//                 differ in the last bits with the rank count and the FFTW thread count.
//   reproducible  the same one-dimensional FFTW transforms of every line (z, then y, then x,
//                 one thread each) whatever the ranks and threads, with explicit transposes
//                 between the x slabs and y slabs for the x lines: bitwise the same result
//                 for any decomposition (the ICs and the host PM need this). At 256^3 on
//                 2 cores 0.5-0.7x the fast plan's time (FFTW_ESTIMATE; bench_pm).
//
// Ghost planes (mass assignment and interpolation across slabs): a distributed mesh may hold
// G planes after its slab, the global planes (x0 + nx + g) mod n of the next ranks, in the
// same layout right after the slab (local planes nx .. nx + G - 1). A stencil whose particle
// sits in this rank's slab then writes and reads only local planes (local_plane()).
// add_ghost_planes() adds what was assigned to them into their owners' planes;
// fetch_ghost_planes() copies the owners' values into them. A rank that holds every plane
// (one rank) has none: its stencils wrap into its own slab.
#pragma once
#include <complex>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/comm.hpp"

namespace orbis {

template <typename Real> class ReproducibleFft;

enum class FftPlan { fast, reproducible };

// The planes [first, first + count) of an n-plane axis that rank `rank` of `ranks` holds:
// FFTW-MPI's default blocks of ceil(n / ranks).
struct SlabPlanes {
  int first = 0, count = 0;
};
SlabPlanes slab_planes(int n, int ranks, int rank);
// The rank holding plane i (0 <= i < n) of an n-plane axis over `ranks` ranks.
int slab_owner(int i, int n, int ranks);
// The ghost planes a rank holding `slab` of an n-plane axis keeps when `wanted` are asked
// for: none without planes of its own, else at most n - slab.count (no plane twice).
int ghost_plane_count(int n, const SlabPlanes& slab, int wanted);

template <typename Real>
class FftMesh {
 public:
  using Complex = std::complex<Real>;

  // One rank. plan_threads: FFTW threads for the fast transforms (0: all OpenMP threads).
  explicit FftMesh(int n, int plan_threads = 0);
  // Slabs over `comm` with up to `ghost_planes` ghost planes each; collective.
  FftMesh(int n, const Comm& comm, FftPlan plan = FftPlan::fast, int plan_threads = 0, int ghost_planes = 0);
  ~FftMesh();
  FftMesh(const FftMesh&) = delete;
  FftMesh& operator=(const FftMesh&) = delete;

  int n() const { return n_; }
  int local_x0() const { return local_x0_; }
  int local_nx() const { return local_nx_; }
  int nz_complex() const { return n_ / 2 + 1; }
  int nz_padded() const { return 2 * (n_ / 2 + 1); }
  const Comm& comm() const { return comm_; }
  bool distributed() const { return comm_.size() > 1; }
  // Real values of the local slab (padding included), local_nx * n * nz_padded.
  std::size_t local_real_count() const { return static_cast<std::size_t>(local_nx_) * n_ * nz_padded(); }

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

  // Ghost planes (see above): how many, the local plane of a global plane index i in [0, n)
  // (< local_nx: the slab, then the ghosts; >= local_nx + ghost_planes(): not held), and a
  // row of any held plane.
  int ghost_planes() const { return ghost_planes_; }
  int local_plane(int i) const {
    const int p = i - local_x0_;
    return p < 0 ? p + n_ : p;
  }
  int held_planes() const { return local_nx_ + ghost_planes_; }
  Real* plane_row(int local_plane, int j) {
    return data_ + (static_cast<std::size_t>(local_plane) * n_ + j) * nz_padded();
  }
  const Real* plane_row(int local_plane, int j) const {
    return data_ + (static_cast<std::size_t>(local_plane) * n_ + j) * nz_padded();
  }
  void add_ghost_planes();     // collective; the ghost planes are zero afterwards
  void fetch_ghost_planes();   // collective
  // The same for the 64-bit integer node sums of fixed-point assignment
  // (pm/fixed_point_mesh.hpp), kept as two 32-bit halves: lo[e] and hi[e] for the element e
  // of this mesh's layout over the held planes (each array as many elements as this mesh
  // holds Reals: the storage of two meshes like this one). Integer sums: the owners' planes
  // get the same bits in any order. Collective; the ghost planes are zero afterwards.
  void add_ghost_planes_fixed(std::uint32_t* lo, std::uint32_t* hi) const;

  void fill_real(Real value);        // slab and ghost planes, padding included
  void forward();                    // real -> complex; collective
  void backward();                   // complex -> real; collective

  // Signed integer wavenumber of index i on an n-point axis: 0, 1, ..., n/2, -n/2+1, ..., -1.
  static int signed_index(int i, int n) { return i <= n / 2 ? i : i - n; }
  std::size_t bytes() const;         // held by this rank

 private:
  struct Plans;
  // Ghost planes to their owners (add) or owners' planes to their ghosts: pack(local plane,
  // vector) appends a plane's n * nz_padded values of T, unpack(local plane, values) adds or
  // copies them.
  template <typename T, typename Pack, typename Unpack>
  void exchange_ghost_planes(bool add, Pack pack, Unpack unpack) const;
  int n_, local_x0_ = 0, local_nx_, ghost_planes_ = 0, requested_ghosts_ = 0;
  Comm comm_;
  FftPlan plan_;
  std::size_t allocated_ = 0;        // Reals
  Real* data_ = nullptr;
  std::unique_ptr<Plans> plans_;
  std::unique_ptr<ReproducibleFft<Real>> lines_;   // FftPlan::reproducible
};

extern template class FftMesh<float>;
extern template class FftMesh<double>;

}  // namespace orbis
