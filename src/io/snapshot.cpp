#include "io/snapshot.hpp"

#include <array>
#include <cmath>
#include <algorithm>
#include <filesystem>
#include <memory>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "cosmology/cosmology.hpp"
#include "io/gadget_units.hpp"
#include "io/hdf5_file.hpp"
#include "io/id_order.hpp"
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

namespace {

// Part p of `parts` equal shares of `total` items begins at share_begin(p) (p = parts: the end).
// total * p fits 64 bits: at most 8192^3 particles (2^39) times 2^16 files or ranks.
std::uint64_t share_begin(std::uint64_t total, int parts, int p) {
  return total * static_cast<std::uint64_t>(p) / static_cast<std::uint64_t>(parts);
}
// The rank that writes file f of `files` over `ranks` ranks: the files spread evenly.
int writer_of(int f, int files, int ranks) {
  return static_cast<int>(static_cast<std::int64_t>(f) * ranks / files);
}

// One particle of a snapshot file; 80 bytes, no padding, so it travels between ranks as is.
struct SnapshotRow {
  Vec3d pos, mom, acc;
  std::uint64_t id;
};

// One file of a snapshot: `count` particles of the `total` in `files` files, row(i) for
// i in [0, count). Each column is built and written in turn, so the writer holds one column
// beside its rows.
template <typename Row>
void write_file(H5Writer& file, const Row& row, bool with_acc, std::uint64_t count, std::uint64_t total, int files,
                double particle_mass, double a, const Params& params) {
  file.create_group("/Header");
  file.attribute("/Header", "BoxSize", params.get_real("box.size_mpc_h"));
  file.attribute("/Header", "Time", a);
  file.attribute("/Header", "Redshift", 1.0 / a - 1.0);
  file.attribute("/Header", "NumPart_ThisFile", std::vector<std::uint64_t>{0, count, 0, 0, 0, 0});
  file.attribute("/Header", "NumPart_Total", std::vector<std::uint64_t>{0, total, 0, 0, 0, 0});
  // NumPart_Total holds the whole 64-bit count (GADGET-4), so the high words are 0: readers
  // that add HighWord << 32 (the GADGET-2 convention) then count right too.
  file.attribute("/Header", "NumPart_Total_HighWord", std::vector<std::uint32_t>(6, 0));
  file.attribute("/Header", "MassTable", std::vector<double>{0, particle_mass, 0, 0, 0, 0});
  const CosmologyParams cosmology = cosmology_params(params);
  file.attribute("/Header", "Omega0", cosmology.omega_m);
  file.attribute("/Header", "OmegaLambda", cosmology.omega_lambda);
  file.attribute("/Header", "HubbleParam", params.get_real("cosmology.h"));
  file.attribute("/Header", "NumFilesPerSnapshot", static_cast<std::int32_t>(files));
  file.attribute("/Header", "Flag_DoublePrecision", std::int32_t{1});
  file.attribute("/Header", "UnitLength_in_cm", kMpcInCm);
  file.attribute("/Header", "UnitMass_in_g", kMassUnitInG);
  file.attribute("/Header", "UnitVelocity_in_cm_per_s", kKmInCm);

  auto column = [&](Vec3d SnapshotRow::*member, double scale) {
    std::vector<double> out(3 * count);
    for (std::uint64_t i = 0; i < count; ++i) {
      const Vec3d v = row(i).*member;
      for (int d = 0; d < 3; ++d) out[3 * i + d] = v[d] * scale;
    }
    return out;
  };
  file.create_group("/PartType1");
  file.write("/PartType1/Coordinates", column(&SnapshotRow::pos, 1.0).data(), count, 3);
  describe_dataset(file, "/PartType1/Coordinates", kUnitLength, "comoving position, Mpc/h");
  // GADGET convention: u = sqrt(a) dx/dt = p / a^(3/2); v_pec = sqrt(a) u.
  file.write("/PartType1/Velocities", column(&SnapshotRow::mom, std::pow(a, -1.5)).data(), count, 3);
  describe_dataset(file, "/PartType1/Velocities", kUnitVelocityU,
                   "u = sqrt(a) dx/dt (GADGET convention), km/s; peculiar velocity = sqrt(a) u");
  {
    std::vector<std::uint64_t> ids(count);
    for (std::uint64_t i = 0; i < count; ++i) ids[i] = row(i).id;
    file.write("/PartType1/ParticleIDs", ids.data(), count);
  }
  if (with_acc) {
    file.write("/PartType1/Acceleration", column(&SnapshotRow::acc, 1.0).data(), count, 3);
    describe_dataset(file, "/PartType1/Acceleration", GadgetUnit{-2, 1, -1, 0, 2, kKmInCm * kKmInCm / kMpcInCm},
                     "comoving gravitational acceleration g = G sum_j m_j (x_j - x_i) / |x_j - x_i|^3 "
                    "(periodic, softened), (km/s)^2/(Mpc/h); dp/dt = g / a; the physical peculiar "
                    "acceleration is g / a^2 (GADGET-4 OUTPUT_ACCELERATION convention)");
  }
  write_provenance(file, params);
}

}  // namespace

std::vector<std::string> snapshot_file_names(const std::string& path, int files) {
  if (files <= 1) return {path};
  const std::string ext = ".hdf5";
  std::string stem = path;
  if (stem.size() > ext.size() && stem.compare(stem.size() - ext.size(), ext.size(), ext) == 0)
    stem.resize(stem.size() - ext.size());
  std::vector<std::string> out;
  for (int f = 0; f < files; ++f) out.push_back(stem + "." + std::to_string(f) + ext);
  return out;
}

std::vector<std::string> write_snapshot(const std::string& path, const Particles& particles, double a,
                                        const Params& params, const std::vector<Vec3d>* accelerations,
                                        const Comm& comm) {
  const int files = static_cast<int>(params.get_int("output.files_per_snapshot"));
  const int ranks = comm.size();
  if (accelerations && accelerations->size() != particles.size())
    fail("write_snapshot: {} accelerations for {} particles", accelerations->size(), particles.size());
  const bool with_acc = accelerations != nullptr;
  const std::vector<std::string> names = snapshot_file_names(path, files);
  const std::uint64_t local = particles.size(), total = comm.sum(local);
  const double mass = comm.max(particles.mass);   // a rank without particles may not know it
  // File f holds the particles at positions [bounds[f], bounds[f + 1]) of the whole set in ID
  // order, whatever the rank count.
  std::vector<std::uint64_t> bounds(static_cast<std::size_t>(files) + 1);
  for (int f = 0; f <= files; ++f) bounds[f] = share_begin(total, files, f);

  // This rank's particles in ID order: local_row(k) is the k-th.
  const std::vector<std::size_t> order = id_sort_order(particles.id);
  auto local_row = [&](std::size_t k) {
    const std::size_t j = order.empty() ? k : order[k];
    return SnapshotRow{particles.pos[j], particles.mom[j], with_acc ? (*accelerations)[j] : Vec3d{}, particles.id[j]};
  };
  // On several ranks each particle goes to the writer of its file: the rows of this rank's
  // files, in ID order. One rank writes its own particles where they are.
  std::vector<SnapshotRow> received;
  if (ranks > 1) {
    std::vector<std::uint64_t> sorted_ids;
    if (!order.empty()) {
      sorted_ids.resize(local);
      for (std::size_t k = 0; k < local; ++k) sorted_ids[k] = particles.id[order[k]];
    }
    const std::vector<std::size_t> cuts = id_order_cuts(order.empty() ? particles.id : sorted_ids, bounds, comm);
    // The files' ID ranges ascend with f and their writers do not decrease with f, so the
    // local ID order is already grouped by destination.
    std::vector<std::size_t> counts(static_cast<std::size_t>(ranks), 0);
    for (int f = 0; f < files; ++f) counts[writer_of(f, files, ranks)] += cuts[f + 1] - cuts[f];
    std::vector<SnapshotRow> send(local);
    for (std::size_t k = 0; k < local; ++k) send[k] = local_row(k);
    received = comm.alltoallv(send, counts);
    std::sort(received.begin(), received.end(), [](const SnapshotRow& x, const SnapshotRow& y) { return x.id < y.id; });
    const std::uint64_t most = comm.max(static_cast<std::uint64_t>(received.size()));
    log::info("snapshot {}: {} file{} written by {} of {} ranks, at most {} particles on one writer{}", path, files,
              files == 1 ? "" : "s", std::min(files, ranks), ranks, most,
              files < ranks ? " ([output] files_per_snapshot = a multiple of the rank count spreads them over every rank)"
                            : "");
  }
  auto row = [&](std::uint64_t k) { return ranks > 1 ? received[k] : local_row(k); };

  std::vector<std::unique_ptr<H5Writer>> written;
  run_collectively(comm, [&] {
    std::uint64_t mine = 0;
    for (int f = 0; f < files; ++f)
      if (writer_of(f, files, ranks) == comm.rank()) mine += bounds[f + 1] - bounds[f];
    if (ranks > 1 && received.size() != mine)
      fail("snapshot '{}': this rank received {} particles for its files, expected {}: particle IDs are not unique",
           path, received.size(), mine);
    std::uint64_t at = 0;
    for (int f = 0; f < files; ++f) {
      if (writer_of(f, files, ranks) != comm.rank()) continue;
      const std::uint64_t count = bounds[f + 1] - bounds[f];
      written.push_back(std::make_unique<H5Writer>(names[f]));
      write_file(*written.back(), [&](std::uint64_t i) { return row(at + i); }, with_acc, count, total, files,
                 mass, a, params);
      at += count;
    }
  });
  // Only once every file is complete do they take their final names.
  run_collectively(comm, [&] {
    for (auto& file : written) file->commit();
  });
  return names;
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
  const std::uint64_t mine_lo = share_begin(sum, ranks, rank), mine_hi = share_begin(sum, ranks, rank + 1);

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
