// ICs across ranks: every rank makes its slab of the particle grid, and the particles, their
// report and the IC files are bitwise those of one rank (computed here on each rank alone as
// the reference), for grids that the rank count does not divide and with a rank holding no
// particles (4^3 on 3 ranks); single- and multi-file IC files read back whole or in shares.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <string>

#include "core/comm.hpp"
#include "cosmology/cosmology.hpp"
#include "cosmology/linear_power.hpp"
#include "ic/ic_command.hpp"
#include "ic/initial_conditions.hpp"
#include "io/hdf5_file.hpp"
#include "io/snapshot.hpp"
#include "pm/fft_mesh.hpp"
#include "support/mpi_scratch.hpp"

using orbis::Comm;

namespace {

bool same_bytes(const void* a, const void* b, std::size_t bytes) { return bytes == 0 || std::memcmp(a, b, bytes) == 0; }

// The slice [first, first + count) of the reference equals `p` bitwise.
bool equals_slice(const orbis::Particles& p, const orbis::Particles& ref, std::size_t first) {
  if (first + p.size() > ref.size()) return false;
  return same_bytes(p.pos.data(), ref.pos.data() + first, p.size() * sizeof(orbis::Vec3d)) &&
         same_bytes(p.mom.data(), ref.mom.data() + first, p.size() * sizeof(orbis::Vec3d)) &&
         same_bytes(p.id.data(), ref.id.data() + first, p.size() * sizeof(std::uint64_t)) && p.mass == ref.mass;
}

}  // namespace

TEST_CASE("2LPT particles: each rank's slab is bitwise the one-rank set's") {
  const Comm world = Comm::world();
  const orbis::Cosmology cosmology({0.3144, 0.6856, -1.0});
  const auto power = orbis::LinearPower::eisenstein_hu(0.3144, 0.0494, 0.6732, 0.966, 0.812, true);
  for (int n : {4, 16, 18}) {
    orbis::IcSettings s;
    s.n = n;
    s.box_mpc_h = 20.0 * n / 16;
    s.z_init = 9.0;   // large displacements: a difference in the last bit would show
    s.seed = 20240607;
    s.self_test = true;
    orbis::IcReport ref_report, report;
    const orbis::Particles ref = orbis::make_initial_conditions(s, cosmology, power, &ref_report, Comm::self());
    const orbis::Particles p = orbis::make_initial_conditions(s, cosmology, power, &report, world);
    const auto slab = orbis::slab_planes(n, world.size(), world.rank());
    INFO("n = " << n << ", rank " << world.rank() << " of " << world.size() << ", planes " << slab.count);
    CHECK(p.size() == static_cast<std::size_t>(slab.count) * n * n);
    CHECK(equals_slice(p, ref, static_cast<std::size_t>(slab.first) * n * n));
    CHECK(world.sum(static_cast<std::uint64_t>(p.size())) == ref.size());
    // Global statistics agree to the reductions' rounding.
    CHECK(report.displacement_max_mpc_h == ref_report.displacement_max_mpc_h);
    CHECK(report.displacement_rms_mpc_h == doctest::Approx(ref_report.displacement_rms_mpc_h).epsilon(1e-12));
    CHECK(report.delta_rms == doctest::Approx(ref_report.delta_rms).epsilon(1e-12));
    REQUIRE(report.delta_power.size() == ref_report.delta_power.size());
    for (std::size_t b = 0; b < report.delta_power.size(); ++b) {
      CHECK(report.delta_power[b].modes == ref_report.delta_power[b].modes);
      CHECK(report.delta_power[b].p_measured == doctest::Approx(ref_report.delta_power[b].p_measured).epsilon(1e-12));
      CHECK(report.displacement_power[b].p_measured ==
            doctest::Approx(ref_report.displacement_power[b].p_measured).epsilon(1e-12));
    }
  }
}

TEST_CASE("orbis ic on several ranks writes the one-rank IC files, one or several per set") {
  const Comm world = Comm::world();
  orbis::test::SharedScratchDir dir("ic_ranks", world);
  for (int files : {1, 2, 5}) {
    INFO(files << " files per snapshot");
    const std::string text = std::string(R"([cosmology]
omega_m = 0.3
[box]
size_mpc_h = 20.0
particles_per_side = 10
[ic]
z_init = 9.0
seed = 77
self_test = false
[output]
files_per_snapshot = )") + std::to_string(files) + "\n";
    const std::string param_file = dir.file("ic.toml");
    if (world.is_root()) std::ofstream(param_file) << text;
    world.barrier();
    const std::string ref_dir = dir.file("one_" + std::to_string(files)), many_dir = dir.file("many_" + std::to_string(files));
    if (world.is_root()) orbis::run_ic_command(param_file, {"output.directory=" + ref_dir}, Comm::self());
    orbis::run_ic_command(param_file, {"output.directory=" + many_dir}, world);
    const auto ref_names = orbis::snapshot_file_names(ref_dir + "/ics.hdf5", files);
    const auto names = orbis::snapshot_file_names(many_dir + "/ics.hdf5", files);
    if (world.is_root()) {
      // Every file's datasets and header counts, bitwise.
      for (int f = 0; f < files; ++f) {
        const orbis::H5Reader a(ref_names[f]), b(names[f]);
        for (const char* set : {"/PartType1/Coordinates", "/PartType1/Velocities"})
          CHECK(a.read<double>(set) == b.read<double>(set));
        CHECK(a.read<std::uint64_t>("/PartType1/ParticleIDs") == b.read<std::uint64_t>("/PartType1/ParticleIDs"));
        CHECK(a.attribute_array<std::uint64_t>("/Header", "NumPart_ThisFile") ==
              b.attribute_array<std::uint64_t>("/Header", "NumPart_ThisFile"));
        CHECK(b.attribute<std::int32_t>("/Header", "NumFilesPerSnapshot") == files);
      }
    }
    // Read back whole on one rank and in shares over all: the shares concatenate to the whole.
    const orbis::Snapshot whole = orbis::read_snapshot(names.front(), Comm::self());
    const orbis::Snapshot share = orbis::read_snapshot(names.front(), world);
    CHECK(whole.particles.size() == 1000);
    CHECK(share.header.num_total == 1000);
    const std::uint64_t first = world.exclusive_sum(static_cast<std::uint64_t>(share.particles.size()));
    CHECK(share.particles.size() == 1000 * (world.rank() + 1) / world.size() - 1000 * world.rank() / world.size());
    CHECK(equals_slice(share.particles, whole.particles, first));
  }
}
