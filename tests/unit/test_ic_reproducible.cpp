// The ICs are bitwise identical for 1, 2 and 4 OpenMP threads (the ICs do
// not depend on how the work is split), and the white noise at a grid point does not depend
// on the grid it sits in.
#include <doctest/doctest.h>
#include <omp.h>

#include <cstring>

#include "cosmology/cosmology.hpp"
#include "cosmology/linear_power.hpp"
#include "ic/initial_conditions.hpp"
#include "ic/white_noise.hpp"
#include "pm/fft_mesh.hpp"

TEST_CASE("ICs are bitwise identical for 1, 2, 4 and 8 threads") {
  const orbis::Cosmology cosmology({0.3144, 0.6856, -1.0});
  const auto power = orbis::LinearPower::eisenstein_hu(0.3144, 0.0494, 0.6732, 0.966, 0.812, true);
  orbis::IcSettings s;
  // 100^3: FFTW plans this size differently for 8 threads than for 1 (last-bit differences),
  // which the IC generator must not let through (ic/initial_conditions.cpp).
  s.n = 100;
  s.box_mpc_h = 100.0;
  s.z_init = 9.0;   // large displacements: any difference in the last bit would show
  s.seed = 987654321987ull;
  s.lpt_order = 2;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const orbis::Particles reference = orbis::make_initial_conditions(s, cosmology, power);
  for (int threads : {2, 4, 8}) {
    omp_set_num_threads(threads);
    const orbis::Particles p = orbis::make_initial_conditions(s, cosmology, power);
    INFO(threads << " threads");
    REQUIRE(p.size() == reference.size());
    CHECK(std::memcmp(p.pos.data(), reference.pos.data(), p.size() * sizeof(orbis::Vec3d)) == 0);
    CHECK(std::memcmp(p.mom.data(), reference.mom.data(), p.size() * sizeof(orbis::Vec3d)) == 0);
    CHECK(p.id == reference.id);
    CHECK(p.mass == reference.mass);
  }
  omp_set_num_threads(saved);
}

TEST_CASE("white noise depends only on (seed, grid point)") {
  // The same point of a 16^3 and a 32^3 mesh, filled in parallel, holds the same value, and
  // it is the value of the point function.
  orbis::FftMesh<double> small(16), large(32);
  orbis::ic::fill_white_noise(small, 42);
  orbis::ic::fill_white_noise(large, 42);
  for (int i = 0; i < 16; i += 3)
    for (int j = 0; j < 16; j += 5)
      for (int k = 0; k < 16; k += 7) {
        CHECK(small.real(i, j, k) == large.real(i, j, k));
        CHECK(small.real(i, j, k) == orbis::ic::white_noise(42, i, j, k));
      }
  CHECK(orbis::ic::white_noise(42, 1, 2, 3) != orbis::ic::white_noise(43, 1, 2, 3));
  // The seed's high 32 bits matter too.
  CHECK(orbis::ic::white_noise(42, 1, 2, 3) != orbis::ic::white_noise(42 + (1ull << 32), 1, 2, 3));
}
