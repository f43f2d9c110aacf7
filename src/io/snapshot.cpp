#include "io/snapshot.hpp"

#include <cmath>
#include <algorithm>
#include <filesystem>
#include <memory>

#include "core/error.hpp"
#include "core/log.hpp"
#include "io/gadget_binary.hpp"
#include "io/gadget_units.hpp"
#include "io/hdf5_file.hpp"
#include "io/id_order.hpp"
#include "io/particle_file.hpp"

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
              : std::vector<std::string>{path, path + ".hdf5", path + ".0.hdf5", path + ".0"};
  for (const std::string& candidate : tried)
    if (fs::exists(candidate)) return candidate;
  std::string list;
  for (const std::string& candidate : tried) list += (list.empty() ? "'" : ", '") + candidate + "'";
  fail("snapshot '{}' not found (tried {})", path, list);
}

std::vector<std::string> snapshot_file_set(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string first = snapshot_first_file(path);
  if (GadgetBinaryFile::detect(first)) {   // GADGET's binary formats: a set is PATH.0, PATH.1, ...
    const int num_files = GadgetBinaryFile(first).header().num_files;
    if (num_files <= 1) return {first};
    if (first.size() < 2 || first.compare(first.size() - 2, 2, ".0") != 0)
      fail("'{}' says num_files = {}, but its name does not end in '.0', so the other files cannot be found", first,
           num_files);
    const std::string base = first.substr(0, first.size() - 2);
    std::vector<std::string> files;
    for (int i = 0; i < num_files; ++i) {
      files.push_back(base + "." + std::to_string(i));
      if (!fs::exists(files.back()))
        fail("multi-file snapshot '{}': file {} of {} ('{}') is missing", base, i, num_files, files.back());
    }
    return files;
  }
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

namespace {

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

// The mass of a file's type-1 particles [first, first + count): the header's mass table, else
// their masses, which must all be equal (a cosmological run has one particle mass).
double type1_mass(ParticleFile& file, std::uint64_t first, std::uint64_t count) {
  const double table = file.mass_table()[1];
  if (table != 0) return table;
  if (!file.has_masses(1))
    fail("'{}': MassTable[1] is 0 and there is no {} dataset", file.path(), file.where(1, ParticleFile::Column::mass));
  const auto masses = file.masses(1, first, std::max<std::uint64_t>(count, 1));
  const auto [lightest, heaviest] = std::minmax_element(masses.begin(), masses.end());
  if (std::abs(*lightest - masses[0]) > 1e-6 * masses[0] || std::abs(*heaviest - masses[0]) > 1e-6 * masses[0])
    fail("'{}': its particles of type 1 have different masses ({} to {}); a cosmological run needs one particle "
         "mass (isolated systems, [gravity] boundary = \"vacuum\", take individual masses)", file.path(), *lightest,
         *heaviest);
  return masses[0];
}

struct FormatUnits {
  double length = 1, mass = 1, velocity = 1;   // the file's units in Mpc/h, 1e10 Msun/h, km/s
};

// This rank's particles [r N / P, (r + 1) N / P) of the set, in file order (in_file[f]: file
// f's type-1 count, summing to the header's total), converted: positions wrapped into the box,
// momenta p = a^(3/2) u. The mass comes from the first file with particles (every rank reads
// it) and must be the same in every file.
void read_particles(const std::vector<std::string>& files, const std::vector<std::uint64_t>& in_file,
                    const FormatUnits& units, const std::string& path, int rank, int ranks, Snapshot& snap) {
  std::uint64_t sum = 0;
  for (auto c : in_file) sum += c;
  if (sum != snap.header.num_total)
    fail("snapshot '{}': its files hold {} particles but the header's total of type 1 says {}", path, sum,
         snap.header.num_total);
  const std::uint64_t mine_lo = equal_share_begin(sum, ranks, rank), mine_hi = equal_share_begin(sum, ranks, rank + 1);
  Particles& p = snap.particles;
  OutsideTheBox outside;
  bool mass_set = false;
  std::uint64_t file_first = 0;
  for (std::size_t f = 0; f < files.size(); file_first += in_file[f], ++f) {
    const std::uint64_t n = in_file[f];
    if (n == 0) continue;
    const std::uint64_t lo = std::max(mine_lo, file_first), hi = std::min(mine_hi, file_first + n);
    if (hi <= lo && mass_set) continue;
    const std::unique_ptr<ParticleFile> file = ParticleFile::open(files[f]);
    const std::uint64_t first = hi > lo ? lo - file_first : 0, count = hi > lo ? hi - lo : 0;
    const double mass = type1_mass(*file, first, count) * units.mass;
    if (mass_set && std::abs(mass - p.mass) > 1e-6 * p.mass)
      fail("'{}': particle mass {} differs from the first file's {}", files[f], mass, p.mass);
    if (!mass_set) p.mass = mass;
    mass_set = true;
    if (count == 0) continue;
    const auto pos = file->positions(1, first, count), vel = file->velocities(1, first, count);
    const auto ids = file->ids(1, first, count);
    const double box = snap.header.box_mpc_h;
    const double momentum_factor = std::pow(snap.header.a, 1.5) * units.velocity;   // p = a^(3/2) u
    const std::size_t offset = p.size();
    p.resize(offset + count);
    for (std::size_t i = 0; i < count; ++i) {
      for (int d = 0; d < 3; ++d) {
        const double x = pos[3 * i + d] * units.length, u = vel[3 * i + d];
        if (!std::isfinite(x) || !std::isfinite(u))
          fail("'{}': particle {} (ID {}) has {} {} in {} (a corrupt file, or ICs made from a broken power "
               "spectrum)", files[f], first + i, ids[i], std::isfinite(x) ? "velocity" : "position",
               std::isfinite(x) ? u : x,
               file->where(1, std::isfinite(x) ? ParticleFile::Column::velocity : ParticleFile::Column::position));
        outside.add(x, box, files[f], first + i, ids[i]);
        p.pos[offset + i][d] = x >= 0 && x < box ? x : periodic_wrap_position(x, box);
        p.mom[offset + i][d] = u * momentum_factor;
      }
      p.id[offset + i] = ids[i];
    }
  }
  outside.report(path, snap.header.box_mpc_h);
}

// The share of an HDF5 snapshot (GADGET-4 layout, units from the file).
Snapshot read_hdf5_share(const std::vector<std::string>& files, const std::string& path, int rank, int ranks) {
  Snapshot snap;
  snap.header.num_files = static_cast<int>(files.size());
  const FileUnits file_units{H5Reader(files.front())};
  {
    H5Reader r(files.front());
    snap.header.box_mpc_h = r.attribute<double>("/Header", "BoxSize") * file_units.length;
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
  std::vector<std::uint64_t> in_file(files.size());
  for (std::size_t f = 0; f < files.size(); ++f) {
    H5Reader r(files[f]);
    auto counts = r.attribute_array<std::uint64_t>("/Header", "NumPart_ThisFile");
    for (std::size_t type = 0; type < counts.size(); ++type)
      if (type != 1 && counts[type] != 0)
        fail("'{}' holds {} particles of type {}: a cosmological run takes dark matter of one mass only "
             "(PartType1); files of several particle types are read by isolated-system runs ([gravity] boundary = "
             "\"vacuum\")", files[f], counts[type], type);
    in_file[f] = counts.size() > 1 ? counts[1] : 0;
  }
  const FormatUnits units{file_units.length, file_units.mass, file_units.velocity};
  read_particles(files, in_file, units, path, rank, ranks, snap);
  return snap;
}

// The share of GADGET binary files (io/gadget_binary.hpp): no units in the files; lengths in
// `length_unit` Mpc/h, masses in 1e10 Msun/h, velocities in km/s.
Snapshot read_binary_share(const std::vector<std::string>& files, const std::string& path, int rank, int ranks,
                           double length_unit) {
  Snapshot snap;
  snap.header.num_files = static_cast<int>(files.size());
  {
    const GadgetBinaryFile first(files.front());
    const GadgetBinaryHeader& h = first.header();
    snap.header.box_mpc_h = h.box * length_unit;
    snap.header.a = h.time;
    snap.header.redshift = h.redshift;
    snap.header.omega_m = h.omega0;
    snap.header.omega_lambda = h.omega_lambda;
    snap.header.h = h.hubble;
    snap.header.num_total = gadget_total_count(h.npart_total[1], h.npart_total_high[1]);
    if (!(snap.header.box_mpc_h > 0) || !(snap.header.a > 0))
      fail("'{}': BoxSize = {} and Time = {} must be positive", files.front(), h.box, h.time);
  }
  std::vector<std::uint64_t> in_file(files.size());
  for (std::size_t f = 0; f < files.size(); ++f) {
    const GadgetBinaryFile file(files[f]);
    for (int type = 0; type < 6; ++type)
      if (type != 1 && file.header().npart[type] != 0)
        fail("'{}' holds {} particles of type {}: a cosmological run takes dark matter of one mass only (type 1); "
             "files of several particle types are read by isolated-system runs ([gravity] boundary = \"vacuum\")",
             files[f], file.header().npart[type], type);
    in_file[f] = file.header().npart[1];
  }
  read_particles(files, in_file, FormatUnits{length_unit, 1, 1}, path, rank, ranks, snap);
  return snap;
}

// This rank's share of a snapshot (read_snapshot).
Snapshot read_share(const std::string& path, int rank, int ranks, double binary_length_unit) {
  const auto files = snapshot_file_set(path);
  return GadgetBinaryFile::detect(files.front()) ? read_binary_share(files, path, rank, ranks, binary_length_unit)
                                                 : read_hdf5_share(files, path, rank, ranks);
}

}  // namespace

Snapshot read_snapshot(const std::string& path, const Comm& comm, double binary_length_unit) {
  Snapshot snap;
  run_collectively(comm, [&] { snap = read_share(path, comm.rank(), comm.size(), binary_length_unit); });
  return snap;
}

}  // namespace orbis
