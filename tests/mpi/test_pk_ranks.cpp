// P(k) across ranks: the particles spread over the ranks (each rank some from everywhere, one
// rank none in one case), the mesh in slabs, against the one-rank spectrum of all of them on
// one thread: every bin bit for bit (fixed-point assignment, reproducible transforms, bins
// summed in plane order), on 1 and 2 threads a rank; interlaced and folded, CIC and TSC, a
// mesh side that the rank count does not divide. The same for `orbis pk`'s files.
#include <doctest/doctest.h>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "analysis/power_spectrum.hpp"
#include "analysis/power_spectrum_io.hpp"
#include "core/comm.hpp"
#include "core/params.hpp"
#include "io/hdf5_file.hpp"
#include "io/snapshot.hpp"
#include "support/clustered_particles.hpp"
#include "support/mpi_scratch.hpp"

using orbis::Comm;

namespace {

template <typename T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Every field bit for bit (field by field: the struct's padding is not compared).
bool same_bits(const orbis::PowerSpectrumBin& a, const orbis::PowerSpectrumBin& b) {
  return same_bits(a.k_mean, b.k_mean) && same_bits(a.power, b.power) && same_bits(a.modes, b.modes) &&
         same_bits(a.shot_noise, b.shot_noise) && same_bits(a.linear, b.linear) && same_bits(a.fold, b.fold);
}

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("distributed P(k) on 1 and 2 threads a rank is the one-rank, one-thread P(k) bit for bit") {
  const Comm world = Comm::world();
  const int saved_threads = omp_get_max_threads();
  const double box = 64.0;
  const std::vector<orbis::Vec3d> all = orbis::test::clustered_particles(16, box, 5);
  struct Case {
    int grid;
    orbis::Window window;
    bool interlacing;
    int fold;
    bool empty_rank;
  };
  for (const Case& c : {Case{28, orbis::Window::tsc, true, 1, false}, Case{32, orbis::Window::cic, false, 1, true},
                        Case{16, orbis::Window::tsc, true, 4, false}}) {
    orbis::PowerSpectrumSettings s;
    s.grid_side = c.grid;
    s.window = c.window;
    s.interlacing = c.interlacing;
    s.fold_factor = c.fold;
    const int ranks = c.empty_rank && world.size() > 1 ? world.size() - 1 : world.size();
    std::vector<orbis::Vec3d> mine;
    for (std::size_t i = 0; i < all.size(); ++i)
      if (static_cast<int>(i % ranks) == world.rank()) mine.push_back(all[i]);
    omp_set_num_threads(1);
    const auto ref = orbis::measure_power_spectrum(all, box, s, {}, Comm::self());
    for (int threads : {1, 2}) {
      INFO("grid " << c.grid << ", fold " << c.fold << ", " << world.size() << " ranks, " << threads << " threads");
      omp_set_num_threads(threads);
      const auto pk = orbis::measure_power_spectrum(mine, box, s, {}, world);
      CHECK(pk.num_particles == all.size());
      REQUIRE(pk.bins.size() == ref.bins.size());
      std::size_t differ = 0;
      for (std::size_t b = 0; b < ref.bins.size(); ++b)
        if (!same_bits(pk.bins[b], ref.bins[b])) ++differ;
      CHECK(differ == 0);
    }
  }
  omp_set_num_threads(saved_threads);
}

TEST_CASE("orbis pk on several ranks writes the one-rank files of a snapshot's spectrum") {
  const Comm world = Comm::world();
  orbis::test::SharedScratchDir dir("pk_ranks", world);
  const double box = 40.0;
  orbis::Particles p;
  p.pos = orbis::test::clustered_particles(10, box, 9);
  p.mom.assign(p.pos.size(), orbis::Vec3d{});
  p.id.resize(p.pos.size());
  for (std::size_t i = 0; i < p.id.size(); ++i) p.id[i] = i + 1;
  p.mass = 1.0;
  const orbis::Params params = orbis::Params::parse("[box]\nsize_mpc_h = 40.0\nparticles_per_side = 10\n", "test");
  const std::string snapshot = dir.file("snap.hdf5");
  if (world.is_root()) orbis::write_snapshot(snapshot, p, 0.5, params, {}, Comm::self());
  world.barrier();
  orbis::PkCommandOptions o;
  o.snapshot = snapshot;
  o.out = dir.file("many");
  orbis::run_pk_command(o, world);
  if (world.is_root()) {
    o.out = dir.file("one");
    orbis::run_pk_command(o, Comm::self());
    CHECK(file_text(dir.file("one.txt")) == file_text(dir.file("many.txt")));
    const orbis::H5Reader a(dir.file("one.hdf5")), b(dir.file("many.hdf5"));
    const auto pa = a.read<double>("/PowerSpectrum/Power"), pb = b.read<double>("/PowerSpectrum/Power");
    REQUIRE(pa.size() == pb.size());
    CHECK(!pa.empty());
    CHECK(std::memcmp(pa.data(), pb.data(), pa.size() * sizeof(double)) == 0);
    CHECK(a.read<std::int64_t>("/PowerSpectrum/NumModes") == b.read<std::int64_t>("/PowerSpectrum/NumModes"));
  }
}
