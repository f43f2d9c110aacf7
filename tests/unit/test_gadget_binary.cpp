// GADGET's binary formats read as ICs (io/gadget_binary.hpp through read_snapshot): files
// written here byte by byte, as GADGET-2's write_file and N-GenIC do (SnapFormat 1 and 2,
// native and swapped byte order, float and double positions, 32- and 64-bit IDs, a MASS
// block, a set of two files), read back particle by particle; and broken files refused with
// the file and the block named.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/gadget_binary.hpp"
#include "io/snapshot.hpp"
#include "support/gadget_binary_writer.hpp"
#include "support/scratch_dir.hpp"

using namespace orbis;

namespace {

constexpr double kBoxKpc = 50000.0, kTime = 0.02, kMass = 8.6;

// Particle k of the whole set: position (kpc/h), velocity (u, km/s), ID.
double position(std::uint64_t k, int d) { return std::fmod(1234.5 * static_cast<double>(k + 1) + 7000.0 * d, kBoxKpc); }
double velocity(std::uint64_t k, int d) { return 10.0 * static_cast<double>(k) - 3.5 * d; }
std::uint64_t id_of(std::uint64_t k) { return 1000 + 3 * k; }

// One file of a set of `files` holding particles [first, first + n) of `total`.
void write_file(const std::string& path, test::GadgetBinaryLayout o, std::uint64_t first, std::uint32_t n,
                std::uint64_t total, int files) {
  std::vector<Vec3d> pos(n), vel(n);
  std::vector<std::uint64_t> ids(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    for (int d = 0; d < 3; ++d) {
      pos[i][d] = position(first + i, d);
      vel[i][d] = velocity(first + i, d);
    }
    ids[i] = id_of(first + i);
  }
  o.num_files = files;
  o.total = total;
  test::GadgetBinaryHeaderValues h;
  h.mass = kMass;
  h.box = kBoxKpc;
  h.time = kTime;
  test::write_gadget_binary(path, pos, vel, ids, h, o);
}

void check_particles(const Snapshot& s, std::uint64_t total, bool double_pos) {
  REQUIRE(s.particles.size() == total);
  CHECK(s.header.box_mpc_h == doctest::Approx(kBoxKpc * 1e-3));
  CHECK(s.header.a == doctest::Approx(kTime));
  CHECK(s.header.omega_m == doctest::Approx(0.3));
  CHECK(s.particles.mass == doctest::Approx(kMass));
  const double tolerance = double_pos ? 1e-12 : 1e-6;
  for (std::uint64_t k = 0; k < total; ++k) {
    CAPTURE(k);
    CHECK(s.particles.id[k] == id_of(k));
    for (int d = 0; d < 3; ++d) {
      CHECK(s.particles.pos[k][d] == doctest::Approx(position(k, d) * 1e-3).epsilon(tolerance));
      CHECK(s.particles.mom[k][d] == doctest::Approx(velocity(k, d) * std::pow(kTime, 1.5)).epsilon(tolerance));
    }
  }
}

std::string error_of(const std::string& path) {
  try {
    read_snapshot(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("GADGET binary ICs: format 1 and 2, both byte orders, float and double, one file and a set") {
  const test::ScratchDir dir("gadget_binary");
  for (int format : {1, 2})
    for (bool swap : {false, true})
      for (bool wide : {false, true}) {
        CAPTURE(format);
        CAPTURE(swap);
        CAPTURE(wide);
        test::GadgetBinaryLayout o;
        o.format = format;
        o.swap = swap;
        o.double_pos = wide;
        o.long_ids = wide;
        o.mass_block = wide;
        const std::string one = dir.path() + "/one_" + std::to_string(format) + (swap ? "s" : "n") + (wide ? "w" : "f");
        write_file(one, o, 0, 40, 40, 1);
        CHECK(GadgetBinaryFile::detect(one));
        CHECK(GadgetBinaryFile(one).format() == format);
        check_particles(read_snapshot(one), 40, wide);
        // A set of two files, named by its stem: STEM.0, STEM.1.
        const std::string set = one + "_set";
        write_file(set + ".0", o, 0, 25, 40, 2);
        write_file(set + ".1", o, 25, 15, 40, 2);
        check_particles(read_snapshot(set), 40, wide);
      }
}

TEST_CASE("GADGET binary ICs: broken files are refused with the file and the block named") {
  const test::ScratchDir dir("gadget_binary_bad");
  test::GadgetBinaryLayout o;
  const std::string gas = dir.path() + "/gas";
  o.gas = 3;
  write_file(gas, o, 0, 10, 10, 1);
  CHECK(error_of(gas).find("type 0") != std::string::npos);

  o.gas = 0;
  const std::string good = dir.path() + "/good";
  write_file(good, o, 0, 10, 10, 1);
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto write = [&](const std::string& name, const std::string& content) {
    std::ofstream(dir.path() + "/" + name, std::ios::binary) << content;
    return dir.path() + "/" + name;
  };
  // The POS block's closing byte count changed: its record lengths differ.
  std::string bad = bytes;
  const std::size_t pos_end = 4 + 256 + 4 + 4 + 3 * 10 * 4;
  bad[pos_end] = static_cast<char>(bad[pos_end] + 1);
  const std::string mismatch = error_of(write("mismatch", bad));
  CHECK(mismatch.find("POS") != std::string::npos);
  CHECK(mismatch.find("record lengths differ") != std::string::npos);
  // Cut inside the ID block.
  const std::string cut = error_of(write("cut", bytes.substr(0, bytes.size() - 12)));
  CHECK(cut.find("ID") != std::string::npos);
  CHECK(cut.find("truncated") != std::string::npos);
  // A header that says 11 particles for blocks of 10.
  std::string counts = bytes;
  counts[8] = 11;   // npart[1], little-endian low byte
  CHECK(error_of(write("counts", counts)).find("not 33 values of 4 or 8 bytes") != std::string::npos);
  // Not GADGET at all.
  CHECK(!GadgetBinaryFile::detect(write("text", "hello, world")));
}
