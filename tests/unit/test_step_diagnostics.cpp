// The step log's checks: the host engine's total momentum against a direct sum, the log line
// carrying it and the step's peak host memory, and the peak itself following an allocation.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "core/host_memory.hpp"
#include "core/params.hpp"
#include "integrate/host_engine.hpp"
#include "integrate/step_log.hpp"

using namespace orbis;

TEST_CASE("the host engine's total momentum is the sum of the particles' momenta") {
  const Params params = Params::parse("[box]\nsize_mpc_h = 32.0\nparticles_per_side = 8\n[gravity]\nsolver = \"pm\"\n"
                                      "[gpu]\nbackend = \"cpu\"\n", "test");
  HostStepEngine engine(params);
  Particles p;
  p.resize(10000);   // more than one block of the ordered sum
  p.mass = 1;
  double sx = 0, sy = 0, sz = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    p.pos[i] = {1.0, 2.0, 3.0};
    p.mom[i] = {std::sin(0.1 * i), std::cos(0.3 * i), 1.0 / (1.0 + i)};
    p.id[i] = i + 1;
    sx += p.mom[i].x, sy += p.mom[i].y, sz += p.mom[i].z;
  }
  engine.load(p);
  const Vec3d total = engine.total_momentum();
  CHECK(total.x == doctest::Approx(sx).epsilon(1e-12));
  CHECK(total.y == doctest::Approx(sy).epsilon(1e-12));
  CHECK(total.z == doctest::Approx(sz).epsilon(1e-12));
}

TEST_CASE("the step line shows the momentum check at PM-step ends and the peak memory") {
  StepReport r;
  r.step = 7;
  r.a = 0.5;
  r.particles = 100;
  r.host_peak_bytes = std::uint64_t{3} << 30;
  ForceStats stats;
  stats.device_bytes = std::size_t{5} << 30;
  r.force = &stats;
  std::string line = step_line(r);
  CHECK(line.find("peak host 3.0 GiB device 5.0 GiB") != std::string::npos);
  CHECK(line.find("sum p") == std::string::npos);   // not measured: not shown
  r.momentum_ratio = 1.25e-7;
  line = step_line(r);
  CHECK(line.find("|sum p|/(N p_rms) 1.25e-07") != std::string::npos);
}

TEST_CASE("the peak resident set follows an allocation and starts again after a reset") {
  if (!reset_peak_resident_bytes()) {
    MESSAGE("this kernel refuses to reset the peak (clear_refs): skipped");
    return;
  }
  const std::uint64_t before = peak_resident_bytes();
  REQUIRE(before > 0);
  constexpr std::size_t kBytes = std::size_t{256} << 20;
  {
    std::unique_ptr<char[]> block(new char[kBytes]);
    std::memset(block.get(), 1, kBytes);   // touched: resident
    CHECK(peak_resident_bytes() >= before + kBytes / 2);
  }
  const std::uint64_t with_block = peak_resident_bytes();
  REQUIRE(reset_peak_resident_bytes());
  CHECK(peak_resident_bytes() < with_block - kBytes / 4);
}
