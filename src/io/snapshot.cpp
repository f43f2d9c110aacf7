#include "io/snapshot.hpp"

#include <cmath>
#include <algorithm>
#include <filesystem>

#include "core/error.hpp"
#include "core/log.hpp"
#include "io/gadget_units.hpp"
#include "io/hdf5_file.hpp"
#include "io/id_order.hpp"

namespace orbis {

std::string snapshot_first_file(const std::string& path) {
  namespace fs = std::filesystem;
  // A name ending in .hdf5 is the one the run was given (output names end in .hdf5 whatever
  // the file count) and the writer numbers a set by dropping that .hdf5 (snapshot_file_names):
  // X.hdf5 may be the set X.0.hdf5, X.1.hdf5, ... Any other name may lack the extension.
  const std::string ext = ".hdf5";
  const bool has_ext = path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
  const std::vector<std::string> tried =
      has_ext ? std::vector<std::string>{path, path.substr(0, path.size() - ext.size()) + ".0.hdf5"}
              : std::vector<std::string>{path, path + ".hdf5", path + ".0.hdf5"};
  for (const std::string& candidate : tried)
    if (fs::exists(candidate)) return candidate;
  std::string list;
  for (const std::string& candidate : tried) list += (list.empty() ? "'" : ", '") + candidate + "'";
  fail("snapshot '{}' not found (tried {})", path, list);
}

namespace {

// The files of a snapshot: PATH itself, or the numbered files of a multi-file set.
std::vector<std::string> snapshot_files(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string first = snapshot_first_file(path);
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

namespace {

// PartType1 of a file with n particles: Coordinates and Velocities n x 3, ParticleIDs n.
void check_particle_layout(const H5Reader& r, std::uint64_t n) {
  for (const std::string name : {"Coordinates", "Velocities", "ParticleIDs"}) {
    const std::string set = "/PartType1/" + name;
    if (!r.has(set))
      fail("'{}' has no dataset {}, but its /Header says it holds {} particles of type 1: not a GADGET-layout "
           "snapshot, or an incomplete one", r.path(), set, n);
    const auto dims = r.shape(set);
    const bool ids = name == "ParticleIDs";
    const bool ok = ids ? dims.size() == 1 && dims[0] == n : dims.size() == 2 && dims[0] == n && dims[1] == 3;
    if (!ok) {
      std::string shape;
      for (auto d : dims) shape += (shape.empty() ? "" : " x ") + std::to_string(d);
      fail("'{}': dataset {} is {}, expected {} ({} particles, NumPart_ThisFile[1])", r.path(), set,
           dims.empty() ? std::string("a scalar") : "of shape " + shape, ids ? std::to_string(n) : std::to_string(n) + " x 3", n);
    }
  }
}

// Positions outside [0, BoxSize). Within one box length they are periodic images (IC codes
// and float rounding put particles at exactly BoxSize or a hair below 0): they are wrapped
// into the box, as every periodic code does, with one warning. Farther out a coordinate is
// no rounding but the wrong unit (kpc/h coordinates with a BoxSize in Mpc/h) or a corrupt
// file, and wrapping would scramble the particles silently: an error.
struct OutsideTheBox {
  std::uint64_t count = 0;
  double farthest = 0;   // Mpc/h beyond the nearer face
  void add(double x, double box, const std::string& file, std::uint64_t index, std::uint64_t id) {
    if (x >= 0 && x < box) return;
    const double beyond = x < 0 ? -x : x - box;
    if (x < -box || x >= 2 * box)
      fail("'{}': particle {} (ID {}) has coordinate {} Mpc/h, more than one box length outside [0, {}): "
           "not a periodic image but the wrong unit (kpc/h coordinates?) or a corrupt file", file, index, id, x, box);
    ++count;
    farthest = std::max(farthest, beyond);
  }
  void report(const std::string& path, double box) const {
    if (count > 0)
      log::warn("'{}': {} particle coordinates lie outside [0, BoxSize = {}) Mpc/h, at most {:.3g} Mpc/h out; "
                "wrapped periodically into the box", path, count, box, farthest);
  }
};

// This rank's share of a snapshot (read_snapshot).
Snapshot read_share(const std::string& path, int rank, int ranks) {
  Snapshot snap;
  const auto files = snapshot_files(path);
  snap.header.num_files = static_cast<int>(files.size());
  Particles& p = snap.particles;
  const FileUnits units{H5Reader(files.front())};
  {
    H5Reader r(files.front());
    snap.header.box_mpc_h = r.attribute<double>("/Header", "BoxSize") * units.length;
    snap.header.a = r.attribute<double>("/Header", "Time");
    snap.header.redshift = r.has_attribute("/Header", "Redshift") ? r.attribute<double>("/Header", "Redshift")
                                                                : 1.0 / snap.header.a - 1.0;
    snap.header.omega_m = header_or_parameter(r, "Omega0", 0);
    snap.header.omega_lambda = header_or_parameter(r, "OmegaLambda", 0);
    snap.header.h = header_or_parameter(r, "HubbleParam", 0);
    auto total = r.attribute_array<std::uint64_t>("/Header", "NumPart_Total");
    if (total.size() < 2) fail("'{}': /Header NumPart_Total has {} entries, expected 6", files.front(), total.size());
    std::uint64_t high_word = 0;
    if (r.has_attribute("/Header", "NumPart_Total_HighWord")) {
      auto high = r.attribute_array<std::uint64_t>("/Header", "NumPart_Total_HighWord");
      if (high.size() > 1) high_word = high[1];
    }
    snap.header.num_total = gadget_total_count(total[1], high_word);
    if (!(snap.header.box_mpc_h > 0) || !(snap.header.a > 0))
      fail("'{}': BoxSize = {} and Time = {} must be positive", files.front(), snap.header.box_mpc_h, snap.header.a);
  }
  // Particles per file, and this rank's share of their concatenation.
  std::vector<std::uint64_t> in_file(files.size());
  for (std::size_t f = 0; f < files.size(); ++f) {
    H5Reader r(files[f]);
    auto counts = r.attribute_array<std::uint64_t>("/Header", "NumPart_ThisFile");
    for (std::size_t type = 0; type < counts.size(); ++type)
      if (type != 1 && counts[type] != 0)
        fail("'{}' holds {} particles of type {}: orbis simulates dark matter only (PartType1)",
             files[f], counts[type], type);
    in_file[f] = counts.size() > 1 ? counts[1] : 0;
  }
  std::uint64_t sum = 0;
  for (auto c : in_file) sum += c;
  if (sum != snap.header.num_total)
    fail("snapshot '{}': its files hold {} particles but NumPart_Total[1] says {}", path, sum, snap.header.num_total);
  const std::uint64_t mine_lo = equal_share_begin(sum, ranks, rank), mine_hi = equal_share_begin(sum, ranks, rank + 1);

  OutsideTheBox outside;
  bool mass_set = false;
  std::uint64_t file_first = 0;
  for (std::size_t f = 0; f < files.size(); file_first += in_file[f], ++f) {
    const std::uint64_t n = in_file[f];
    if (n == 0) continue;
    // The particle mass comes from the first file with particles (every rank reads it).
    const std::uint64_t lo = std::max(mine_lo, file_first), hi = std::min(mine_hi, file_first + n);
    if (hi <= lo && mass_set) continue;
    H5Reader r(files[f]);
    const std::uint64_t first = hi > lo ? lo - file_first : 0, count = hi > lo ? hi - lo : 0;
    const double mass_table = r.attribute_array<double>("/Header", "MassTable").at(1);
    double mass = mass_table;
    if (mass_table == 0) {
      if (!r.has("/PartType1/Masses"))
        fail("'{}': MassTable[1] is 0 and there is no /PartType1/Masses dataset", files[f]);
      auto masses = r.read_rows<double>("/PartType1/Masses", first, std::max<std::uint64_t>(count, 1));
      for (double m : masses)
        if (std::abs(m - masses[0]) > 1e-6 * masses[0])
          fail("'{}': particles of PartType1 have different masses; orbis needs equal masses", files[f]);
      mass = masses[0];
    }
    mass *= units.mass;
    if (mass_set && std::abs(mass - p.mass) > 1e-6 * p.mass)
      fail("'{}': particle mass {} differs from the first file's {}", files[f], mass, p.mass);
    if (!mass_set) p.mass = mass;
    mass_set = true;
    if (count == 0) continue;
    check_particle_layout(r, n);
    auto pos = r.read_rows<double>("/PartType1/Coordinates", first, count);
    auto vel = r.read_rows<double>("/PartType1/Velocities", first, count);
    auto ids = r.read_rows<std::uint64_t>("/PartType1/ParticleIDs", first, count);
    const double box = snap.header.box_mpc_h;
    const double momentum_factor = std::pow(snap.header.a, 1.5) * units.velocity;   // p = a^(3/2) u
    const std::size_t offset = p.size();
    p.resize(offset + count);
    for (std::size_t i = 0; i < count; ++i) {
      for (int d = 0; d < 3; ++d) {
        const double x = pos[3 * i + d] * units.length, u = vel[3 * i + d];
        if (!std::isfinite(x) || !std::isfinite(u))
          fail("'{}': particle {} (ID {}) has {} {} in /PartType1/{} (a corrupt file, or ICs made from a broken "
               "power spectrum)", files[f], first + i, ids[i], std::isfinite(x) ? "velocity" : "position",
               std::isfinite(x) ? u : x, std::isfinite(x) ? "Velocities" : "Coordinates");
        outside.add(x, box, files[f], first + i, ids[i]);
        p.pos[offset + i][d] = x >= 0 && x < box ? x : periodic_wrap_position(x, box);
        p.mom[offset + i][d] = u * momentum_factor;
      }
      p.id[offset + i] = ids[i];
    }
  }
  outside.report(path, snap.header.box_mpc_h);
  return snap;
}

}  // namespace

Snapshot read_snapshot(const std::string& path, const Comm& comm) {
  Snapshot snap;
  run_collectively(comm, [&] { snap = read_share(path, comm.rank(), comm.size()); });
  return snap;
}

}  // namespace orbis
