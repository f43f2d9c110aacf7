// Writing snapshots (io/snapshot.hpp): the GADGET-4 layout, the files in ID order, and over
// several ranks the files written in shares with serial HDF5.
#include <algorithm>
#include <cmath>
#include <memory>

#include "core/error.hpp"
#include "core/gravity_mode.hpp"
#include "core/physical_units.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "cosmology/cosmology.hpp"
#include "io/gadget_units.hpp"
#include "io/hdf5_file.hpp"
#include "io/id_order.hpp"
#include "io/provenance.hpp"
#include "io/snapshot.hpp"

namespace orbis {
namespace {

// One particle of a snapshot file; 80 bytes, no padding, so it travels between ranks as is.
struct SnapshotRow {
  Vec3d pos, mom, acc;
  std::uint64_t id;
};

// The rank that writes file f of `files` over `ranks` ranks: the files spread evenly (with
// files <= ranks, every file has its own writer).
int writer_of(int f, int files, int ranks) {
  return static_cast<int>(static_cast<std::int64_t>(f) * ranks / files);
}

// The velocity the files hold per unit of momentum: GADGET's u = sqrt(a) dx/dt = p / a^(3/2)
// in a comoving run; dx/dt = p itself for an isolated system (the Newtonian clock).
double velocity_scale(const Params& params, double a) {
  return gravity_mode(params).periodic() ? std::pow(a, -1.5) : 1.0;
}

// The /Header of an isolated system's snapshot: what GADGET-4 writes without comoving
// integration (Time = t, Redshift 0, no box, no cosmology; units physical, h = 1).
void write_vacuum_header(H5Writer& file, double t, const Params& params) {
  const PhysicalUnits units = physical_units(params);
  file.attribute("/Header", "BoxSize", 0.0);
  file.attribute("/Header", "Time", t);
  file.attribute("/Header", "Redshift", 0.0);
  file.attribute("/Header", "Omega0", 0.0);
  file.attribute("/Header", "OmegaLambda", 0.0);
  file.attribute("/Header", "HubbleParam", 1.0);
  file.attribute("/Header", "UnitLength_in_cm", units.length_in_cm);
  file.attribute("/Header", "UnitMass_in_g", units.mass_in_g);
  file.attribute("/Header", "UnitVelocity_in_cm_per_s", units.velocity_in_cm_per_s);
}

// The header, /Parameters and /Config of one file of a snapshot, and its datasets for
// `count` particles of the `total` in `files` files, to be filled by write_rows.
void start_file(H5Writer& file, bool with_acc, std::uint64_t count, std::uint64_t total, int files,
                double particle_mass, double a, const Params& params) {
  const bool comoving = gravity_mode(params).periodic();
  file.create_group("/Header");
  if (comoving) {
    file.attribute("/Header", "BoxSize", params.get_real("box.size_mpc_h"));
    file.attribute("/Header", "Time", a);
    file.attribute("/Header", "Redshift", 1.0 / a - 1.0);
  }
  file.attribute("/Header", "NumPart_ThisFile", std::vector<std::uint64_t>{0, count, 0, 0, 0, 0});
  file.attribute("/Header", "NumPart_Total", std::vector<std::uint64_t>{0, total, 0, 0, 0, 0});
  // NumPart_Total holds the whole 64-bit count (GADGET-4), so the high words are 0: readers
  // that add HighWord << 32 (the GADGET-2 convention) then count right too.
  file.attribute("/Header", "NumPart_Total_HighWord", std::vector<std::uint32_t>(6, 0));
  file.attribute("/Header", "MassTable", std::vector<double>{0, particle_mass, 0, 0, 0, 0});
  if (comoving) {
    const CosmologyParams cosmology = cosmology_params(params);
    file.attribute("/Header", "Omega0", cosmology.omega_m);
    file.attribute("/Header", "OmegaLambda", cosmology.omega_lambda);
    file.attribute("/Header", "HubbleParam", params.get_real("cosmology.h"));
  }
  file.attribute("/Header", "NumFilesPerSnapshot", static_cast<std::int32_t>(files));
  file.attribute("/Header", "Flag_DoublePrecision", std::int32_t{1});
  if (comoving) {
    file.attribute("/Header", "UnitLength_in_cm", kMpcInCm);
    file.attribute("/Header", "UnitMass_in_g", kMassUnitInG);
    file.attribute("/Header", "UnitVelocity_in_cm_per_s", kKmInCm);
  } else {
    write_vacuum_header(file, a, params);
  }

  file.create_group("/PartType1");
  file.create_dataset<double>("/PartType1/Coordinates", count, 3);
  file.create_dataset<double>("/PartType1/Velocities", count, 3);
  file.create_dataset<std::uint64_t>("/PartType1/ParticleIDs", count);
  if (with_acc) file.create_dataset<double>("/PartType1/Acceleration", count, 3);
  if (comoving) {
    describe_dataset(file, "/PartType1/Coordinates", kUnitLength, "comoving position, Mpc/h");
    describe_dataset(file, "/PartType1/Velocities", kUnitVelocityU,
                     "u = sqrt(a) dx/dt (GADGET convention), km/s; peculiar velocity = sqrt(a) u");
    if (with_acc)
      describe_dataset(file, "/PartType1/Acceleration", GadgetUnit{-2, 1, -1, 0, 2, kKmInCm * kKmInCm / kMpcInCm},
                       "comoving gravitational acceleration g = G sum_j m_j (x_j - x_i) / |x_j - x_i|^3 "
                       "(periodic, softened), (km/s)^2/(Mpc/h); dp/dt = g / a; the physical peculiar "
                       "acceleration is g / a^2 (GADGET-4 OUTPUT_ACCELERATION convention)");
  } else {
    const PhysicalUnits u = physical_units(params);
    describe_dataset(file, "/PartType1/Coordinates", GadgetUnit{0, 0, 1, 0, 0, u.length_in_cm},
                     "position, " + u.length + " (isolated system: physical, no h)");
    describe_dataset(file, "/PartType1/Velocities", GadgetUnit{0, 0, 0, 0, 1, u.velocity_in_cm_per_s},
                     "velocity dx/dt, " + u.velocity);
    if (with_acc)
      describe_dataset(file, "/PartType1/Acceleration",
                       GadgetUnit{0, 0, -1, 0, 2, u.velocity_in_cm_per_s * u.velocity_in_cm_per_s / u.length_in_cm},
                       "gravitational acceleration G sum_j m_j (x_j - x_i) / (|x_j - x_i|^2 + eps^2)^(3/2), (" +
                           u.velocity + ")^2/" + u.length);
  }
  write_provenance(file, params);
}

// Rows [first, first + count) of a file begun by start_file: row(i) for i in [0, count).
// Each column is built and written in turn, so the writer holds one column beside its rows.
template <typename Row>
void write_rows(H5Writer& file, const Row& row, bool with_acc, std::uint64_t first, std::uint64_t count,
                double velocity_scale) {
  if (count == 0) return;
  auto column = [&](Vec3d SnapshotRow::*member, double scale) {
    std::vector<double> out(3 * count);
    for (std::uint64_t i = 0; i < count; ++i) {
      const Vec3d v = row(i).*member;
      for (int d = 0; d < 3; ++d) out[3 * i + d] = v[d] * scale;
    }
    return out;
  };
  file.write_rows("/PartType1/Coordinates", column(&SnapshotRow::pos, 1.0).data(), first, count);
  file.write_rows("/PartType1/Velocities", column(&SnapshotRow::mom, velocity_scale).data(), first, count);
  {
    std::vector<std::uint64_t> ids(count);
    for (std::uint64_t i = 0; i < count; ++i) ids[i] = row(i).id;
    file.write_rows("/PartType1/ParticleIDs", ids.data(), first, count);
  }
  if (with_acc) file.write_rows("/PartType1/Acceleration", column(&SnapshotRow::acc, 1.0).data(), first, count);
}

// What every way of writing needs to know about the snapshot.
struct SnapshotPlan {
  const std::vector<std::string>& names;
  const std::vector<std::uint64_t>& bounds;   // file f: positions [bounds[f], bounds[f + 1]) of the ID order
  bool with_acc;
  double mass, a;
  const Params& params;
  int files() const { return static_cast<int>(names.size()); }
  std::uint64_t total() const { return bounds.back(); }
  std::uint64_t count(int f) const { return bounds[f + 1] - bounds[f]; }
  std::unique_ptr<H5Writer> start(int f) const {
    auto file = std::make_unique<H5Writer>(names[f]);
    start_file(*file, with_acc, count(f), total(), files(), mass, a, params);
    return file;
  }
};

// Collective: the rows of this rank's particles (local_row(k): the k-th in ID order) for the
// global positions [bounds[r], bounds[r + 1]), sent to `dest(r)` for every r (dest must not
// decrease with r), in ID order on arrival.
template <typename LocalRow, typename Dest>
std::vector<SnapshotRow> route_by_id_order(const std::vector<std::uint64_t>& sorted_ids, const LocalRow& local_row,
                                           const std::vector<std::uint64_t>& bounds, const Dest& dest,
                                           const Comm& comm) {
  const std::vector<std::size_t> cuts = id_order_cuts(sorted_ids, bounds, comm);
  // The pieces' ID ranges ascend with r and so do their destinations: the local ID order is
  // already grouped by destination.
  std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()), 0);
  for (std::size_t r = 0; r + 1 < bounds.size(); ++r) counts[dest(static_cast<int>(r))] += cuts[r + 1] - cuts[r];
  std::vector<SnapshotRow> received;
  {
    std::vector<SnapshotRow> send(sorted_ids.size());
    for (std::size_t k = 0; k < send.size(); ++k) send[k] = local_row(k);
    received = comm.alltoallv(send, counts);
  }
  std::sort(received.begin(), received.end(), [](const SnapshotRow& x, const SnapshotRow& y) { return x.id < y.id; });
  return received;
}

// Several ranks, at least as many files: each file's particles go to its writer, which
// writes the whole file (the writers work at the same time). A writer holds its files'
// particles: ceil(F / P) N / F <= 2 N / P.
template <typename LocalRow>
std::vector<std::unique_ptr<H5Writer>> write_whole_files(const SnapshotPlan& plan,
                                                         const std::vector<std::uint64_t>& sorted_ids,
                                                         const LocalRow& local_row, const Comm& comm) {
  const int files = plan.files(), ranks = comm.size();
  const std::vector<SnapshotRow> rows = route_by_id_order(
      sorted_ids, local_row, plan.bounds, [&](int f) { return writer_of(f, files, ranks); }, comm);
  std::vector<std::unique_ptr<H5Writer>> written;
  run_collectively(comm, [&] {
    std::uint64_t at = 0;
    for (int f = 0; f < files; ++f) {
      if (writer_of(f, files, ranks) != comm.rank()) continue;
      written.push_back(plan.start(f));
      write_rows(*written.back(), [&](std::uint64_t i) { return rows[at + i]; }, plan.with_acc, 0, plan.count(f),
                 velocity_scale(plan.params, plan.a));
      at += plan.count(f);
    }
    if (at != rows.size())
      fail("snapshot '{}': this rank received {} particles for its files, expected {}: particle IDs are not unique",
           plan.names.front(), rows.size(), at);
  });
  return written;
}

// Several ranks, fewer files: first every rank takes an equal share of the ID order (N / P
// particles), then in P turns rank t sends the rows of its share to the writers of the files
// they belong to, which write them in place. A writer holds its own share and one turn's
// rows: at most about 2 N / P.
template <typename LocalRow>
std::vector<std::unique_ptr<H5Writer>> write_files_in_turns(const SnapshotPlan& plan,
                                                            const std::vector<std::uint64_t>& sorted_ids,
                                                            const LocalRow& local_row, const Comm& comm) {
  const int files = plan.files(), ranks = comm.size(), me = comm.rank();
  std::vector<std::uint64_t> shares(static_cast<std::size_t>(ranks) + 1);
  for (int r = 0; r <= ranks; ++r) shares[r] = equal_share_begin(plan.total(), ranks, r);
  const std::vector<SnapshotRow> share = route_by_id_order(sorted_ids, local_row, shares, [](int r) { return r; }, comm);
  // The overlap of rank t's share with file f, as positions of the ID order.
  auto overlap = [&](int t, int f) {
    return std::pair{std::max(shares[t], plan.bounds[f]), std::min(shares[t + 1], plan.bounds[f + 1])};
  };
  // A failure stops this rank's writing but not its part in the turns; all ranks fail at the end.
  std::string error;
  auto attempt = [&](auto&& work) {
    if (!error.empty()) return;
    try {
      work();
    } catch (const Error& e) {
      error = e.what();
    }
  };
  std::vector<std::unique_ptr<H5Writer>> written(static_cast<std::size_t>(files));
  attempt([&] {
    if (share.size() != shares[me + 1] - shares[me])
      fail("snapshot '{}': this rank received {} particles of the ID order, expected {}: particle IDs are not unique",
           plan.names.front(), share.size(), shares[me + 1] - shares[me]);
    for (int f = 0; f < files; ++f)
      if (writer_of(f, files, ranks) == me) written[f] = plan.start(f);
  });
  const std::vector<SnapshotRow> none;
  for (int t = 0; t < ranks; ++t) {
    // Rank t's share is in ID order, so grouped by file and thus by writer.
    std::vector<std::size_t> counts(static_cast<std::size_t>(ranks), 0);
    if (t == me)
      for (int f = 0; f < files; ++f) {
        const auto [lo, hi] = overlap(t, f);
        if (hi > lo) counts[writer_of(f, files, ranks)] += hi - lo;
      }
    const std::vector<SnapshotRow> rows = comm.alltoallv(t == me ? share : none, counts);
    attempt([&] {
      std::size_t at = 0;
      for (int f = 0; f < files; ++f) {
        if (writer_of(f, files, ranks) != me) continue;
        const auto [lo, hi] = overlap(t, f);
        if (hi <= lo) continue;
        write_rows(*written[f], [&](std::uint64_t i) { return rows[at + i]; }, plan.with_acc, lo - plan.bounds[f],
                   hi - lo, velocity_scale(plan.params, plan.a));
        at += hi - lo;
      }
    });
  }
  comm.throw_if_any_failed(error);
  written.erase(std::remove(written.begin(), written.end(), nullptr), written.end());
  return written;
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
  for (int f = 0; f <= files; ++f) bounds[f] = equal_share_begin(total, files, f);
  const SnapshotPlan plan{names, bounds, with_acc, mass, a, params};

  // This rank's particles in ID order: local_row(k) is the k-th.
  const std::vector<std::size_t> order = id_sort_order(particles.id);
  auto local_row = [&](std::size_t k) {
    const std::size_t j = order.empty() ? k : order[k];
    return SnapshotRow{particles.pos[j], particles.mom[j], with_acc ? (*accelerations)[j] : Vec3d{}, particles.id[j]};
  };
  std::vector<std::unique_ptr<H5Writer>> written;
  if (ranks == 1) {
    // The particles where they are, through the ID order.
    std::uint64_t at = 0;
    for (int f = 0; f < files; ++f) {
      written.push_back(plan.start(f));
      write_rows(*written.back(), [&](std::uint64_t i) { return local_row(at + i); }, with_acc, 0, plan.count(f),
                 velocity_scale(params, a));
      at += plan.count(f);
    }
  } else {
    std::vector<std::uint64_t> sorted_ids;
    if (!order.empty()) {
      sorted_ids.resize(local);
      for (std::size_t k = 0; k < local; ++k) sorted_ids[k] = particles.id[order[k]];
    }
    const std::vector<std::uint64_t>& ids = order.empty() ? particles.id : sorted_ids;
    written = files >= ranks ? write_whole_files(plan, ids, local_row, comm) : write_files_in_turns(plan, ids, local_row, comm);
    log::info("snapshot {}: {} file{} from {} ranks, {}", path, files, files == 1 ? "" : "s", ranks,
              files >= ranks ? "each written whole by its writer rank" : "each filled in turns from the ranks' shares");
  }
  // Only once every file is complete do they take their final names.
  run_collectively(comm, [&] {
    for (auto& file : written) file->commit();
  });
  return names;
}

}  // namespace orbis
