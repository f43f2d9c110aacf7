#include "pm/fft_mesh.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "pm/fft_lines.hpp"
#include "pm/fftw_traits.hpp"

#ifdef ORBIS_HAVE_MPI
#include <fftw3-mpi.h>
#include <mpi.h>
#endif

namespace orbis {

std::mutex& fftw_planner_mutex() {
  static std::mutex m;
  return m;
}

SlabPlanes slab_planes(int n, int ranks, int rank) {
  const int block = (n + ranks - 1) / ranks;
  SlabPlanes s;
  s.first = std::min(n, block * rank);
  s.count = std::max(0, std::min(block, n - s.first));
  return s;
}

int slab_owner(int i, int n, int ranks) { return i / ((n + ranks - 1) / ranks); }

int ghost_plane_count(int n, const SlabPlanes& slab, int wanted) {
  return slab.count == 0 ? 0 : std::max(0, std::min(wanted, n - slab.count));
}

namespace {

#ifdef ORBIS_HAVE_MPI
MPI_Comm mpi_comm(const Comm& comm) {
  MPI_Comm out;
  const std::intptr_t handle = comm.native_handle();
  std::memcpy(&out, &handle, sizeof(MPI_Comm));
  return out;
}

// FFTW-MPI for float and double.
template <typename Real> struct FftwMpi;
template <> struct FftwMpi<double> {
  using plan = fftw_plan;
  static void init() { static const int ok = (fftw_mpi_init(), 1); (void)ok; }
  static std::ptrdiff_t local_size(int n, MPI_Comm c, std::ptrdiff_t& nx, std::ptrdiff_t& x0) {
    return fftw_mpi_local_size_3d(n, n, n / 2 + 1, c, &nx, &x0);
  }
  static plan r2c(int n, double* d, MPI_Comm c) {
    return fftw_mpi_plan_dft_r2c_3d(n, n, n, d, reinterpret_cast<fftw_complex*>(d), c, FFTW_ESTIMATE);
  }
  static plan c2r(int n, double* d, MPI_Comm c) {
    return fftw_mpi_plan_dft_c2r_3d(n, n, n, reinterpret_cast<fftw_complex*>(d), d, c, FFTW_ESTIMATE);
  }
};
template <> struct FftwMpi<float> {
  using plan = fftwf_plan;
  static void init() { static const int ok = (fftwf_mpi_init(), 1); (void)ok; }
  static std::ptrdiff_t local_size(int n, MPI_Comm c, std::ptrdiff_t& nx, std::ptrdiff_t& x0) {
    return fftwf_mpi_local_size_3d(n, n, n / 2 + 1, c, &nx, &x0);
  }
  static plan r2c(int n, float* d, MPI_Comm c) {
    return fftwf_mpi_plan_dft_r2c_3d(n, n, n, d, reinterpret_cast<fftwf_complex*>(d), c, FFTW_ESTIMATE);
  }
  static plan c2r(int n, float* d, MPI_Comm c) {
    return fftwf_mpi_plan_dft_c2r_3d(n, n, n, reinterpret_cast<fftwf_complex*>(d), d, c, FFTW_ESTIMATE);
  }
};
#endif

}  // namespace

template <typename Real>
struct FftMesh<Real>::Plans {
  typename Fftw<Real>::plan forward = nullptr, backward = nullptr;
};

template <typename Real>
FftMesh<Real>::FftMesh(int n, int plan_threads) : FftMesh(n, Comm::self(), FftPlan::fast, plan_threads) {}

template <typename Real>
FftMesh<Real>::FftMesh(int n, const Comm& comm, FftPlan plan, int plan_threads, int ghost_planes)
    : n_(n), local_nx_(n), comm_(comm), plan_(plan), plans_(std::make_unique<Plans>()) {
  if (n < 2 || n % 2 != 0) fail("FFT mesh size {} must be even and at least 2", n);
  const SlabPlanes slab = slab_planes(n, comm.size(), comm.rank());
  local_x0_ = slab.first;
  local_nx_ = slab.count;
  requested_ghosts_ = ghost_planes;
  ghost_planes_ = ghost_plane_count(n, slab, ghost_planes);
  allocated_ = std::max<std::size_t>(static_cast<std::size_t>(held_planes()) * n * nz_padded(), 2);
  const int threads = plan_threads > 0 ? plan_threads : omp_get_max_threads();
  const bool mpi_plan = plan == FftPlan::fast && comm.size() > 1;
#ifdef ORBIS_HAVE_MPI
  std::ptrdiff_t mpi_nx = 0, mpi_x0 = 0;
  if (mpi_plan) {
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    Fftw<Real>::init_threads();
    FftwMpi<Real>::init();
    const std::ptrdiff_t complex_count = FftwMpi<Real>::local_size(n, mpi_comm(comm), mpi_nx, mpi_x0);
    if (mpi_nx != local_nx_ || (mpi_nx > 0 && mpi_x0 != local_x0_))
      fail("FFTW-MPI gives rank {} the x planes [{}, {}), orbis expected [{}, {})", comm.rank(), mpi_x0,
           mpi_x0 + mpi_nx, local_x0_, local_x0_ + local_nx_);
    allocated_ = std::max<std::size_t>(allocated_, 2 * static_cast<std::size_t>(complex_count));
  }
#else
  if (mpi_plan) fail("internal: a distributed FFT mesh in a build without MPI");
#endif
  data_ = Fftw<Real>::malloc(allocated_);
  if (!data_)
    fail("cannot allocate an FFT mesh slab of {} x {}^2 ({:.1f} MiB)", local_nx_, n,
         allocated_ * sizeof(Real) / 1048576.0);
  if (plan == FftPlan::reproducible) {
    lines_ = std::make_unique<ReproducibleFft<Real>>(n, comm, local_x0_, local_nx_);
  } else {
    // FFTW-MPI plans are collective: every rank plans, the lock only guards this process.
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    Fftw<Real>::init_threads();
    Fftw<Real>::plan_with_nthreads(threads);
#ifdef ORBIS_HAVE_MPI
    if (mpi_plan) {
      plans_->forward = FftwMpi<Real>::r2c(n, data_, mpi_comm(comm));
      plans_->backward = FftwMpi<Real>::c2r(n, data_, mpi_comm(comm));
    }
#endif
    if (!mpi_plan) {
      plans_->forward = Fftw<Real>::r2c_3d(n, data_);
      plans_->backward = Fftw<Real>::c2r_3d(n, data_);
    }
    if (!plans_->forward || !plans_->backward) fail("FFTW could not plan a {}^3 transform", n);
  }
  fill_real(0);
}

template <typename Real>
FftMesh<Real>::~FftMesh() {
  {
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    if (plans_->forward) Fftw<Real>::destroy(plans_->forward);
    if (plans_->backward) Fftw<Real>::destroy(plans_->backward);
  }
  lines_.reset();
  Fftw<Real>::free(data_);
}

template <typename Real>
void FftMesh<Real>::add_ghost_planes() {
  const std::size_t plane = static_cast<std::size_t>(n_) * nz_padded();
  exchange_ghost_planes<Real>(
      true, [&](int p, std::vector<Real>& send) { send.insert(send.end(), data_ + p * plane, data_ + (p + 1) * plane); },
      [&](int p, const Real* in) {
        Real* dst = data_ + p * plane;
        for (std::size_t k = 0; k < plane; ++k) dst[k] += in[k];
      });
  std::fill(data_ + static_cast<std::size_t>(local_nx_) * plane, data_ + static_cast<std::size_t>(held_planes()) * plane,
            Real(0));
}

template <typename Real>
void FftMesh<Real>::fetch_ghost_planes() {
  const std::size_t plane = static_cast<std::size_t>(n_) * nz_padded();
  exchange_ghost_planes<Real>(
      false, [&](int p, std::vector<Real>& send) { send.insert(send.end(), data_ + p * plane, data_ + (p + 1) * plane); },
      [&](int p, const Real* in) { std::copy_n(in, plane, data_ + p * plane); });
}

template <typename Real>
void FftMesh<Real>::add_ghost_planes_fixed(std::uint32_t* lo, std::uint32_t* hi) const {
  const std::size_t plane = static_cast<std::size_t>(n_) * nz_padded();
  exchange_ghost_planes<std::uint64_t>(
      true,
      [&](int p, std::vector<std::uint64_t>& send) {
        for (std::size_t e = p * plane; e < (p + 1) * plane; ++e)
          send.push_back(static_cast<std::uint64_t>(hi[e]) << 32 | lo[e]);
      },
      [&](int p, const std::uint64_t* in) {
        for (std::size_t k = 0, e = p * plane; k < plane; ++k, ++e) {
          const std::uint64_t sum = (static_cast<std::uint64_t>(hi[e]) << 32 | lo[e]) + in[k];
          lo[e] = static_cast<std::uint32_t>(sum);
          hi[e] = static_cast<std::uint32_t>(sum >> 32);
        }
      });
  const std::size_t ghosts_begin = static_cast<std::size_t>(local_nx_) * plane;
  const std::size_t ghosts_end = static_cast<std::size_t>(held_planes()) * plane;
  std::fill(lo + ghosts_begin, lo + ghosts_end, 0u);
  std::fill(hi + ghosts_begin, hi + ghosts_end, 0u);
}

// Ghost plane g of rank s is the global plane (x0_s + nx_s + g) mod n. Each rank computes
// every rank's ghost list from the slab rule alone, so both sides of the all-to-all agree
// on which planes travel and in what order (ghost order within a source, sources in rank
// order: the sums do not depend on timing).
template <typename Real>
template <typename T, typename Pack, typename Unpack>
void FftMesh<Real>::exchange_ghost_planes(bool add, Pack pack, Unpack unpack) const {
  const int p = comm_.size();
  if (p == 1) return;
  const std::size_t plane = static_cast<std::size_t>(n_) * nz_padded();
  auto ghosts_of = [&](int s) {
    // The ghost planes that rank s holds: (global index, owner) pairs in ghost order (every
    // rank asked for the same count; what each keeps depends on its slab).
    std::vector<std::pair<int, int>> out;
    const SlabPlanes slab = slab_planes(n_, p, s);
    const int count = ghost_plane_count(n_, slab, requested_ghosts_);
    for (int g = 0; g < count; ++g) {
      const int i = (slab.first + slab.count + g) % n_;
      out.emplace_back(i, slab_owner(i, n_, p));
    }
    return out;
  };
  const int me = comm_.rank();
  std::vector<std::size_t> counts(p, 0);
  std::vector<T> send;
  if (add) {
    // Mine to their owners, grouped by owner.
    const auto mine = ghosts_of(me);
    for (int dest = 0; dest < p; ++dest)
      for (std::size_t g = 0; g < mine.size(); ++g)
        if (mine[g].second == dest) {
          pack(local_nx_ + static_cast<int>(g), send);
          counts[dest] += plane;
        }
  } else {
    // My planes to the ranks that hold them as ghosts.
    for (int dest = 0; dest < p; ++dest)
      for (const auto& [i, owner] : ghosts_of(dest))
        if (owner == me) {
          pack(i - local_x0_, send);
          counts[dest] += plane;
        }
  }
  const std::vector<T> got = comm_.alltoallv(send, counts);
  std::size_t at = 0;
  if (add) {
    for (int source = 0; source < p; ++source)
      for (const auto& [i, owner] : ghosts_of(source))
        if (owner == me) {
          unpack(i - local_x0_, got.data() + at);
          at += plane;
        }
  } else {
    const auto mine = ghosts_of(me);
    for (int source = 0; source < p; ++source)
      for (std::size_t g = 0; g < mine.size(); ++g)
        if (mine[g].second == source) {
          unpack(local_nx_ + static_cast<int>(g), got.data() + at);
          at += plane;
        }
  }
}

template <typename Real>
void FftMesh<Real>::fill_real(Real value) {
  const std::ptrdiff_t count = static_cast<std::ptrdiff_t>(held_planes()) * n_ * nz_padded();
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < count; ++i) data_[i] = value;
}

template <typename Real> void FftMesh<Real>::forward() {
  if (lines_) lines_->forward(data_);
  else Fftw<Real>::execute(plans_->forward);
}
template <typename Real> void FftMesh<Real>::backward() {
  if (lines_) lines_->backward(data_);
  else Fftw<Real>::execute(plans_->backward);
}

template <typename Real>
std::size_t FftMesh<Real>::bytes() const {
  return allocated_ * sizeof(Real);
}

template class FftMesh<float>;
template class FftMesh<double>;

}  // namespace orbis
