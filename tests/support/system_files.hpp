// Small isolated-system files for the tests that read them (io/system_file.hpp): particles
// of several GADGET types with MassTable entries or per-particle masses, written in the HDF5
// layout (GADGET-2/3/4: /Header, /PartTypeN, units in /Parameters) through the plain HDF5
// wrapper, or in GADGET's binary formats (support/gadget_binary_writer.hpp).
#pragma once
#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "io/hdf5_file.hpp"
#include "support/gadget_binary_writer.hpp"

namespace orbis::test {

using TypeSet = std::array<GadgetBinaryType, 6>;

// Particle k of type t: a position, velocity and ID of its own (no two alike).
inline Vec3d system_position(int t, std::size_t k) {
  const double u = static_cast<double>(k), s = static_cast<double>(t);
  return {s + 0.125 * u, 2 * s - 0.375 * u, 0.0625 * u * u - s};
}
inline Vec3d system_velocity(int t, std::size_t k) {
  return {10.0 * t + static_cast<double>(k), -static_cast<double>(k), 0.5 * t};
}
inline std::uint64_t system_id(int t, std::size_t k) { return 100 * static_cast<std::uint64_t>(t) + k + 1; }

// counts[t] particles of type t; masses[t] their MassTable entry, or 0 for per-particle
// masses 0.5 + 0.25 k (unequal).
inline TypeSet make_type_set(const std::array<std::size_t, 6>& counts, const std::array<double, 6>& table) {
  TypeSet set;
  for (int t = 0; t < 6; ++t) {
    GadgetBinaryType& s = set[t];
    s.table_mass = table[t];
    for (std::size_t k = 0; k < counts[t]; ++k) {
      s.pos.push_back(system_position(t, k));
      s.vel.push_back(system_velocity(t, k));
      s.ids.push_back(system_id(t, k));
      if (table[t] == 0) s.masses.push_back(0.5 + 0.25 * static_cast<double>(k));
    }
  }
  return set;
}

// A small galaxy in galaxy units: `disc` disc particles (type 2, per-particle masses 0.01 +
// 1e-4 k) in a thin layer, the rest halo particles (type 1, MassTable 0.02) in a sphere of
// 5 kpc, slowly moving; uniform deviates of mt19937_64(seed), IDs 1..particles.
inline TypeSet two_type_galaxy(int particles, int disc, std::uint64_t seed) {
  TypeSet set;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int k = 0; k < particles; ++k) {
    const int t = k < disc ? 2 : 1;
    GadgetBinaryType& s = set[t];
    s.pos.push_back({5 * u(rng), 5 * u(rng), t == 2 ? 0.2 * u(rng) : 5 * u(rng)});
    s.vel.push_back({20 * u(rng), 20 * u(rng), 5 * u(rng)});
    s.ids.push_back(static_cast<std::uint64_t>(k + 1));
    if (t == 2) s.masses.push_back(0.01 + 1e-4 * k);
  }
  set[1].table_mass = 0.02;
  return set;
}

// Unit attributes in cgs, as GADGET-4 writes them in /Parameters; empty: none.
struct FileUnits {
  std::vector<double> cgs;   // UnitLength_in_cm, UnitMass_in_g, UnitVelocity_in_cm_per_s
};
inline FileUnits kpc_msun_kms() { return {{3.085678e21, 1.989e33, 1e5}}; }
inline FileUnits galaxy_units() { return {{3.085678e21, 1.989e43, 1e5}}; }

struct Hdf5SystemOptions {
  double time = 0, box = 0;
  FileUnits units;
  int num_files = 1;
  const std::array<std::uint32_t, 6>* totals = nullptr;   // NumPart_Total; null: this file's counts
  bool comoving = false;                                  // /Parameters ComovingIntegrationOn = 1
  bool float_positions = false;
};

// One file of the HDF5 layout: a type with table_mass 0 gets /PartTypeN/Masses when it has
// masses (leave them out to make a file without masses).
inline void write_hdf5_system(const std::string& path, const TypeSet& types, const Hdf5SystemOptions& o) {
  H5Writer w(path);
  std::vector<std::uint32_t> here(6), total(6), high(6, 0);
  std::vector<double> table(6);
  for (int t = 0; t < 6; ++t) {
    here[t] = static_cast<std::uint32_t>(types[t].pos.size());
    total[t] = o.totals ? (*o.totals)[t] : here[t];
    table[t] = types[t].table_mass;
  }
  w.create_group("/Header");
  w.attribute("/Header", "NumPart_ThisFile", here);
  w.attribute("/Header", "NumPart_Total", total);
  w.attribute("/Header", "NumPart_Total_HighWord", high);
  w.attribute("/Header", "MassTable", table);
  w.attribute("/Header", "Time", o.time);
  w.attribute("/Header", "Redshift", 0.0);
  w.attribute("/Header", "BoxSize", o.box);
  w.attribute("/Header", "NumFilesPerSnapshot", static_cast<std::int32_t>(o.num_files));
  w.create_group("/Parameters");
  if (!o.units.cgs.empty()) {
    w.attribute("/Parameters", "UnitLength_in_cm", o.units.cgs[0]);
    w.attribute("/Parameters", "UnitMass_in_g", o.units.cgs[1]);
    w.attribute("/Parameters", "UnitVelocity_in_cm_per_s", o.units.cgs[2]);
  }
  if (o.comoving) w.attribute("/Parameters", "ComovingIntegrationOn", std::int32_t{1});
  for (int t = 0; t < 6; ++t) {
    const GadgetBinaryType& s = types[t];
    if (s.pos.empty()) continue;
    const std::string g = "/PartType" + std::to_string(t);
    w.create_group(g);
    std::vector<double> pos, vel;
    std::vector<float> pos_f;
    for (std::size_t k = 0; k < s.pos.size(); ++k)
      for (int d = 0; d < 3; ++d) {
        pos.push_back(s.pos[k][d]);
        pos_f.push_back(static_cast<float>(s.pos[k][d]));
        vel.push_back(s.vel[k][d]);
      }
    if (o.float_positions) w.write(g + "/Coordinates", pos_f.data(), s.pos.size(), 3);
    else w.write(g + "/Coordinates", pos.data(), s.pos.size(), 3);
    w.write(g + "/Velocities", vel.data(), s.pos.size(), 3);
    std::vector<std::uint32_t> ids(s.ids.begin(), s.ids.end());
    w.write(g + "/ParticleIDs", ids);
    if (!s.masses.empty()) w.write(g + "/Masses", s.masses);
  }
  w.commit();
}

}  // namespace orbis::test
