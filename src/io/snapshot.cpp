#include "io/snapshot.hpp"

#include <array>
#include <cmath>
#include <filesystem>

#include "core/error.hpp"
#include "core/params.hpp"
#include "cosmology/cosmology.hpp"
#include "io/gadget_units.hpp"
#include "io/hdf5_file.hpp"
#include "io/provenance.hpp"

namespace orbis {
namespace {

// The files of a snapshot: PATH itself, or the numbered files of a multi-file set.
std::vector<std::string> snapshot_files(const std::string& path) {
  namespace fs = std::filesystem;
  std::string first = path;
  if (!fs::exists(first)) {
    for (const char* suffix : {".hdf5", ".0.hdf5"})
      if (fs::exists(path + suffix)) { first = path + suffix; break; }
  }
  if (!fs::exists(first)) fail("snapshot '{}' not found (tried also '{}.hdf5' and '{}.0.hdf5')", path, path, path);
  int num_files = 1;
  {
    H5Reader reader(first);
    if (!reader.has("/Header")) fail("'{}' has no /Header group: not a GADGET-layout HDF5 snapshot", first);
    if (reader.has_attribute("/Header", "NumFilesPerSnapshot"))
      num_files = reader.attribute<std::int32_t>("/Header", "NumFilesPerSnapshot");
  }
  if (num_files <= 1) return {first};
  const std::string tail = ".0.hdf5";
  if (first.size() < tail.size() || first.compare(first.size() - tail.size(), tail.size(), tail) != 0)
    fail("'{}' says NumFilesPerSnapshot = {}, but its name does not end in '.0.hdf5', so the other "
         "files cannot be found", first, num_files);
  std::string base = first.substr(0, first.size() - tail.size());
  std::vector<std::string> files;
  for (int i = 0; i < num_files; ++i) {
    files.push_back(base + "." + std::to_string(i) + ".hdf5");
    if (!fs::exists(files.back()))
      fail("multi-file snapshot '{}': file {} of {} ('{}') is missing", base, i, num_files, files.back());
  }
  return files;
}

// Header attribute, else the same key in /Parameters (GADGET-4 keeps cosmology there), else fallback.
double header_or_parameter(const H5Reader& r, const char* name, double fallback) {
  if (r.has_attribute("/Header", name)) return r.attribute<double>("/Header", name);
  if (r.has_attribute("/Parameters", name)) return r.attribute<double>("/Parameters", name);
  return fallback;
}

// A foreign file's unit in ours (Mpc/h, 1e10 Msun/h, km/s): its value in cgs, as GADGET-4
// (/Parameters or /Header: UnitLength_in_cm, ...) or monofonIC (/Units) record it, divided by
// ours; 1 when the file does not say.
double unit_in_ours(const H5Reader& r, const char* gadget_name, const char* monofonic_name, double ours_cgs) {
  for (auto [object, name] : {std::pair{"/Parameters", gadget_name}, std::pair{"/Header", gadget_name},
                              std::pair{"/Units", monofonic_name}})
    if (r.has_attribute(object, name)) return r.attribute<double>(object, name) / ours_cgs;
  return 1.0;
}

struct FileUnits {
  double length = 1, mass = 1, velocity = 1;
  explicit FileUnits(const H5Reader& r)
      : length(unit_in_ours(r, "UnitLength_in_cm", "Unit length in cm (U_L)", kMpcInCm)),
        mass(unit_in_ours(r, "UnitMass_in_g", "Unit mass in g (U_M)", kMassUnitInG)),
        velocity(unit_in_ours(r, "UnitVelocity_in_cm_per_s", "Unit velocity in cm/s (U_V)", kKmInCm)) {}
};

}  // namespace

std::uint64_t gadget_total_count(std::uint64_t num_part_total, std::uint64_t high_word) {
  constexpr std::uint64_t two_to_32 = std::uint64_t{1} << 32;
  return num_part_total < two_to_32 ? num_part_total + (high_word << 32) : num_part_total;
}

void write_snapshot(const std::string& path, const Particles& particles, double a,
                    const Params& params, const std::vector<Vec3d>* accelerations) {
  const std::uint64_t n = particles.size();
  H5Writer file(path);
  file.create_group("/Header");
  file.attribute("/Header", "BoxSize", params.get_real("box.size_mpc_h"));
  file.attribute("/Header", "Time", a);
  file.attribute("/Header", "Redshift", 1.0 / a - 1.0);
  std::vector<std::uint64_t> counts{0, n, 0, 0, 0, 0};
  file.attribute("/Header", "NumPart_ThisFile", counts);
  file.attribute("/Header", "NumPart_Total", counts);
  // NumPart_Total holds the whole 64-bit count (GADGET-4), so the high words are 0: readers
  // that add HighWord << 32 (the GADGET-2 convention) then count right too.
  file.attribute("/Header", "NumPart_Total_HighWord", std::vector<std::uint32_t>(6, 0));
  file.attribute("/Header", "MassTable", std::vector<double>{0, particles.mass, 0, 0, 0, 0});
  const CosmologyParams cosmology = cosmology_params(params);
  file.attribute("/Header", "Omega0", cosmology.omega_m);
  file.attribute("/Header", "OmegaLambda", cosmology.omega_lambda);
  file.attribute("/Header", "HubbleParam", params.get_real("cosmology.h"));
  file.attribute("/Header", "NumFilesPerSnapshot", std::int32_t{1});
  file.attribute("/Header", "Flag_DoublePrecision", std::int32_t{1});
  file.attribute("/Header", "UnitLength_in_cm", kMpcInCm);
  file.attribute("/Header", "UnitMass_in_g", kMassUnitInG);
  file.attribute("/Header", "UnitVelocity_in_cm_per_s", kKmInCm);

  file.create_group("/PartType1");
  file.write("/PartType1/Coordinates", flatten(particles.pos, 1.0).data(), n, 3);
  describe_dataset(file, "/PartType1/Coordinates", kUnitLength, "comoving position, Mpc/h");
  // GADGET convention: u = sqrt(a) dx/dt = p / a^(3/2); v_pec = sqrt(a) u.
  file.write("/PartType1/Velocities", flatten(particles.mom, std::pow(a, -1.5)).data(), n, 3);
  describe_dataset(file, "/PartType1/Velocities", kUnitVelocityU,
                   "u = sqrt(a) dx/dt (GADGET convention), km/s; peculiar velocity = sqrt(a) u");
  file.write("/PartType1/ParticleIDs", particles.id);
  if (accelerations) {
    file.write("/PartType1/Acceleration", flatten(*accelerations, 1.0).data(), n, 3);
    describe_dataset(file, "/PartType1/Acceleration", GadgetUnit{-2, 1, -1, 0, 2, kKmInCm * kKmInCm / kMpcInCm},
                     "comoving gravitational acceleration g = G sum_j m_j (x_j - x_i) / |x_j - x_i|^3 "
                    "(periodic, softened), (km/s)^2/(Mpc/h); dp/dt = g / a; the physical peculiar "
                    "acceleration is g / a^2 (GADGET-4 OUTPUT_ACCELERATION convention)");
  }
  write_provenance(file, params);
  file.commit();
}

Snapshot read_snapshot(const std::string& path) {
  Snapshot snap;
  const auto files = snapshot_files(path);
  snap.header.num_files = static_cast<int>(files.size());
  Particles& p = snap.particles;
  FileUnits units{H5Reader(files.front())};
  bool mass_set = false;
  for (std::size_t f = 0; f < files.size(); ++f) {
    H5Reader r(files[f]);
    if (f == 0) {
      snap.header.box_mpc_h = r.attribute<double>("/Header", "BoxSize") * units.length;
      snap.header.a = r.attribute<double>("/Header", "Time");
      snap.header.redshift = r.has_attribute("/Header", "Redshift") ? r.attribute<double>("/Header", "Redshift")
                                                                  : 1.0 / snap.header.a - 1.0;
      snap.header.omega_m = header_or_parameter(r, "Omega0", 0);
      snap.header.omega_lambda = header_or_parameter(r, "OmegaLambda", 0);
      snap.header.h = header_or_parameter(r, "HubbleParam", 0);
      auto total = r.attribute_array<std::uint64_t>("/Header", "NumPart_Total");
      if (total.size() < 2) fail("'{}': /Header NumPart_Total has {} entries, expected 6", files[f], total.size());
      std::uint64_t high_word = 0;
      if (r.has_attribute("/Header", "NumPart_Total_HighWord")) {
        auto high = r.attribute_array<std::uint64_t>("/Header", "NumPart_Total_HighWord");
        if (high.size() > 1) high_word = high[1];
      }
      snap.header.num_total = gadget_total_count(total[1], high_word);
      if (!(snap.header.box_mpc_h > 0) || !(snap.header.a > 0))
        fail("'{}': BoxSize = {} and Time = {} must be positive", files[f], snap.header.box_mpc_h, snap.header.a);
    }
    auto counts = r.attribute_array<std::uint64_t>("/Header", "NumPart_ThisFile");
    for (std::size_t type = 0; type < counts.size(); ++type)
      if (type != 1 && counts[type] != 0)
        fail("'{}' holds {} particles of type {}: orbis simulates dark matter only (PartType1)",
             files[f], counts[type], type);
    const std::uint64_t n = counts.size() > 1 ? counts[1] : 0;
    if (n == 0) continue;
    auto pos = r.read<double>("/PartType1/Coordinates");
    auto vel = r.read<double>("/PartType1/Velocities");
    auto ids = r.read<std::uint64_t>("/PartType1/ParticleIDs");
    if (pos.size() != 3 * n || vel.size() != 3 * n || ids.size() != n)
      fail("'{}': PartType1 datasets disagree with NumPart_ThisFile[1] = {} (Coordinates {}, "
           "Velocities {}, ParticleIDs {} values)", files[f], n, pos.size(), vel.size(), ids.size());
    const double mass_table = r.attribute_array<double>("/Header", "MassTable").at(1);
    double mass = mass_table;
    if (mass_table == 0) {
      if (!r.has("/PartType1/Masses"))
        fail("'{}': MassTable[1] is 0 and there is no /PartType1/Masses dataset", files[f]);
      auto masses = r.read<double>("/PartType1/Masses");
      for (double m : masses)
        if (std::abs(m - masses[0]) > 1e-6 * masses[0])
          fail("'{}': particles of PartType1 have different masses; orbis needs equal masses", files[f]);
      mass = masses[0];
    }
    mass *= units.mass;
    if (mass_set && std::abs(mass - p.mass) > 1e-6 * p.mass)
      fail("'{}': particle mass {} differs from the first file's {}", files[f], mass, p.mass);
    p.mass = mass;
    mass_set = true;
    const double box = snap.header.box_mpc_h;
    const double momentum_factor = std::pow(snap.header.a, 1.5) * units.velocity;   // p = a^(3/2) u
    const std::size_t offset = p.size();
    p.resize(offset + n);
    for (std::size_t i = 0; i < n; ++i) {
      for (int d = 0; d < 3; ++d) {
        p.pos[offset + i][d] = periodic_wrap_position(pos[3 * i + d] * units.length, box);
        p.mom[offset + i][d] = vel[3 * i + d] * momentum_factor;
      }
      p.id[offset + i] = ids[i];
    }
  }
  if (p.size() != snap.header.num_total)
    fail("snapshot '{}': read {} particles but NumPart_Total[1] says {}", path, p.size(), snap.header.num_total);
  return snap;
}

}  // namespace orbis
