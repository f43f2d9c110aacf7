// P(k) across ranks: the particles spread over the ranks (each rank some from everywhere, one
// rank none in one case), the mesh in slabs, against the one-rank spectrum of all of them:
// every bin's power equal to 1e-10, the same bins and mode counts; interlaced and folded, CIC
// and TSC, a mesh side that the rank count does not divide.
#include <doctest/doctest.h>

#include <cmath>

#include "analysis/power_spectrum.hpp"
#include "analysis/power_spectrum_io.hpp"
#include "core/comm.hpp"
#include "core/params.hpp"
#include "io/hdf5_file.hpp"
#include "io/snapshot.hpp"
#include "support/clustered_particles.hpp"
#include "support/mpi_scratch.hpp"

using orbis::Comm;

TEST_CASE("distributed P(k) equals the one-rank P(k) to 1e-10") {
  const Comm world = Comm::world();
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
    INFO("grid " << c.grid << ", fold " << c.fold << ", " << world.size() << " ranks");
    orbis::PowerSpectrumSettings s;
    s.grid_side = c.grid;
    s.window = c.window;
    s.interlacing = c.interlacing;
    s.fold_factor = c.fold;
    const int ranks = c.empty_rank && world.size() > 1 ? world.size() - 1 : world.size();
    std::vector<orbis::Vec3d> mine;
    for (std::size_t i = 0; i < all.size(); ++i)
      if (static_cast<int>(i % ranks) == world.rank()) mine.push_back(all[i]);
    const auto ref = orbis::measure_power_spectrum(all, box, s, {}, Comm::self());
    const auto pk = orbis::measure_power_spectrum(mine, box, s, {}, world);
    CHECK(pk.num_particles == all.size());
    REQUIRE(pk.bins.size() == ref.bins.size());
    double worst = 0;
    for (std::size_t b = 0; b < ref.bins.size(); ++b) {
      CHECK(pk.bins[b].modes == ref.bins[b].modes);
      CHECK(pk.bins[b].fold == ref.bins[b].fold);
      worst = std::max(worst, std::abs(pk.bins[b].power / ref.bins[b].power - 1));
      worst = std::max(worst, std::abs(pk.bins[b].k_mean / ref.bins[b].k_mean - 1));
      worst = std::max(worst, std::abs(pk.bins[b].shot_noise / ref.bins[b].shot_noise - 1));
    }
    CHECK(worst < 1e-10);
  }
}

TEST_CASE("orbis pk on several ranks: the one-rank spectrum of a snapshot") {
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
  if (world.is_root()) orbis::write_snapshot(snapshot, p, 0.5, params, nullptr, Comm::self());
  world.barrier();
  orbis::PkCommandOptions o;
  o.snapshot = snapshot;
  o.out = dir.file("many");
  orbis::run_pk_command(o, world);
  if (world.is_root()) {
    o.out = dir.file("one");
    orbis::run_pk_command(o, Comm::self());
    const orbis::H5Reader a(dir.file("one.hdf5")), b(dir.file("many.hdf5"));
    const auto pa = a.read<double>("/PowerSpectrum/Power"), pb = b.read<double>("/PowerSpectrum/Power");
    REQUIRE(pa.size() == pb.size());
    for (std::size_t i = 0; i < pa.size(); ++i) CHECK(pb[i] == doctest::Approx(pa[i]).epsilon(1e-10));
    CHECK(a.read<std::int64_t>("/PowerSpectrum/NumModes") == b.read<std::int64_t>("/PowerSpectrum/NumModes"));
  }
}
