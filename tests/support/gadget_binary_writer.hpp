// Writes a file in GADGET's binary snapshot layout (SnapFormat 1 or 2, either byte order)
// byte by byte, as GADGET-2's write_file and N-GenIC do, independently of orbis's reader
// (io/gadget_binary.hpp): for the tests that read such files.
#pragma once
#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "core/vec3.hpp"

namespace orbis::test {

struct GadgetBinaryLayout {
  int format = 1;              // SnapFormat 1 or 2 (block labels)
  bool swap = false;           // the other byte order
  bool double_pos = false;     // 8-byte positions, velocities and masses
  bool long_ids = false;       // 64-bit IDs
  bool mass_block = false;     // massarr[1] = 0 and a MASS block
  std::uint32_t gas = 0;       // type-0 particles first (at the origin, ID 1)
  int num_files = 1;
  std::uint64_t total = 0;     // npartTotal[1]; 0: this file's count
  bool drop_mass_block = false;   // write_gadget_binary_types: no MASS block where one is due (a broken file)
};

struct GadgetBinaryHeaderValues {
  double mass = 1, box = 1, time = 1, omega_m = 0.3, omega_lambda = 0.7, h = 0.7;
};

inline void write_gadget_binary(const std::string& path, const std::vector<Vec3d>& pos, const std::vector<Vec3d>& vel,
                                const std::vector<std::uint64_t>& ids, const GadgetBinaryHeaderValues& h,
                                const GadgetBinaryLayout& o) {
  std::ofstream out(path, std::ios::binary);
  const auto put = [&](const void* v, int n) {
    unsigned char b[8];
    std::memcpy(b, v, static_cast<std::size_t>(n));
    if (o.swap)
      for (int i = 0; i < n / 2; ++i) std::swap(b[i], b[n - 1 - i]);
    out.write(reinterpret_cast<const char*>(b), n);
  };
  const auto u32 = [&](std::uint32_t v) { put(&v, 4); };
  const auto f64 = [&](double v) { put(&v, 8); };
  const auto real = [&](double v) {
    if (o.double_pos) f64(v);
    else {
      const float f = static_cast<float>(v);
      put(&f, 4);
    }
  };
  const auto label = [&](const char* tag, std::uint32_t next) {
    if (o.format != 2) return;
    u32(8);
    out.write(tag, 4);
    u32(next + 8);
    u32(8);
  };
  const auto n = static_cast<std::uint32_t>(pos.size());
  const std::uint32_t all = n + o.gas, bytes = o.double_pos ? 8 : 4;
  label("HEAD", 256);
  u32(256);
  for (std::uint32_t c : {o.gas, n, 0u, 0u, 0u, 0u}) u32(c);
  for (int t = 0; t < 6; ++t) f64(t == 0 ? h.mass : (t == 1 && !o.mass_block ? h.mass : 0.0));
  f64(h.time);
  f64(1 / h.time - 1);
  u32(0);
  u32(0);
  for (int t = 0; t < 6; ++t) u32(t == 0 ? o.gas : (t == 1 ? static_cast<std::uint32_t>(o.total ? o.total : n) : 0));
  u32(0);
  u32(static_cast<std::uint32_t>(o.num_files));
  f64(h.box);
  f64(h.omega_m);
  f64(h.omega_lambda);
  f64(h.h);
  u32(0);
  u32(0);
  for (int t = 0; t < 6; ++t) u32(0);
  for (int i = 0; i < 64; ++i) out.put(0);   // padding to 256 bytes
  u32(256);
  for (const std::vector<Vec3d>* block : {&pos, &vel}) {
    label(block == &pos ? "POS " : "VEL ", 3 * all * bytes);
    u32(3 * all * bytes);
    for (std::uint32_t i = 0; i < o.gas; ++i)
      for (int d = 0; d < 3; ++d) real(0.0);
    for (const Vec3d& v : *block)
      for (int d = 0; d < 3; ++d) real(v[d]);
    u32(3 * all * bytes);
  }
  const std::uint32_t id_bytes = o.long_ids ? 8 : 4;
  label("ID  ", all * id_bytes);
  u32(all * id_bytes);
  for (std::uint32_t i = 0; i < all; ++i) {
    const std::uint64_t id = i < o.gas ? 1 : ids[i - o.gas];
    if (o.long_ids) put(&id, 8);
    else u32(static_cast<std::uint32_t>(id));
  }
  u32(all * id_bytes);
  if (o.mass_block) {
    label("MASS", n * bytes);
    u32(n * bytes);
    for (std::uint32_t i = 0; i < n; ++i) real(h.mass);
    u32(n * bytes);
  }
}

// One type's particles for write_gadget_binary_types.
struct GadgetBinaryType {
  std::vector<Vec3d> pos, vel;
  std::vector<std::uint64_t> ids;
  double table_mass = 0;        // massarr[t]; 0: `masses` (one per particle) go to the MASS block
  std::vector<double> masses;
};

// A file of particles of several types, as GADGET-2's write_file writes them: every block in
// type order, the MASS block holding the types with particles and massarr 0. totals: the
// set's npartTotal (null: this file's counts).
inline void write_gadget_binary_types(const std::string& path, const std::array<GadgetBinaryType, 6>& types,
                                      const GadgetBinaryHeaderValues& h, const GadgetBinaryLayout& o,
                                      const std::array<std::uint32_t, 6>* totals = nullptr) {
  std::ofstream out(path, std::ios::binary);
  const auto put = [&](const void* v, int n) {
    unsigned char b[8];
    std::memcpy(b, v, static_cast<std::size_t>(n));
    if (o.swap)
      for (int i = 0; i < n / 2; ++i) std::swap(b[i], b[n - 1 - i]);
    out.write(reinterpret_cast<const char*>(b), n);
  };
  const auto u32 = [&](std::uint32_t v) { put(&v, 4); };
  const auto f64 = [&](double v) { put(&v, 8); };
  const std::uint32_t bytes = o.double_pos ? 8 : 4, id_bytes = o.long_ids ? 8 : 4;
  const auto real = [&](double v) {
    if (o.double_pos) f64(v);
    else {
      const float f = static_cast<float>(v);
      put(&f, 4);
    }
  };
  const auto label = [&](const char* tag, std::uint32_t next) {
    if (o.format != 2) return;
    u32(8);
    out.write(tag, 4);
    u32(next + 8);
    u32(8);
  };
  std::uint32_t all = 0, in_mass = 0;
  for (const GadgetBinaryType& t : types) {
    all += static_cast<std::uint32_t>(t.pos.size());
    if (t.table_mass == 0) in_mass += static_cast<std::uint32_t>(t.pos.size());
  }
  label("HEAD", 256);
  u32(256);
  for (const GadgetBinaryType& t : types) u32(static_cast<std::uint32_t>(t.pos.size()));
  for (const GadgetBinaryType& t : types) f64(t.table_mass);
  f64(h.time);
  f64(0.0);   // redshift
  u32(0);
  u32(0);
  for (int t = 0; t < 6; ++t) u32(totals ? (*totals)[t] : static_cast<std::uint32_t>(types[t].pos.size()));
  u32(0);
  u32(static_cast<std::uint32_t>(o.num_files));
  f64(h.box);
  f64(h.omega_m);
  f64(h.omega_lambda);
  f64(h.h);
  u32(0);
  u32(0);
  for (int t = 0; t < 6; ++t) u32(0);
  for (int i = 0; i < 64; ++i) out.put(0);   // padding to 256 bytes
  u32(256);
  for (bool velocities : {false, true}) {
    label(velocities ? "VEL " : "POS ", 3 * all * bytes);
    u32(3 * all * bytes);
    for (const GadgetBinaryType& t : types)
      for (const Vec3d& v : velocities ? t.vel : t.pos)
        for (int d = 0; d < 3; ++d) real(v[d]);
    u32(3 * all * bytes);
  }
  label("ID  ", all * id_bytes);
  u32(all * id_bytes);
  for (const GadgetBinaryType& t : types)
    for (std::uint64_t id : t.ids) {
      if (o.long_ids) put(&id, 8);
      else u32(static_cast<std::uint32_t>(id));
    }
  u32(all * id_bytes);
  if (in_mass > 0 && !o.drop_mass_block) {
    label("MASS", in_mass * bytes);
    u32(in_mass * bytes);
    for (const GadgetBinaryType& t : types)
      if (t.table_mass == 0)
        for (double m : t.masses) real(m);
    u32(in_mass * bytes);
  }
}

}  // namespace orbis::test
