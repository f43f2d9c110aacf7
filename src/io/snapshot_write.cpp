// Writing snapshots (io/snapshot.hpp): the GADGET-4 layout, the files in ID order, and over
// several ranks each file written by its writer rank with serial HDF5, the particles sent
// straight to it.
#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

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

// The particle data a file's rows are taken from: row i of a piece is element at(i) of each
// column (acc null without accelerations).
struct Columns {
  const Vec3d* pos;
  const Vec3d* mom;
  const Vec3d* acc;
  const std::uint64_t* id;
};

// The columns write_rows builds, kept from call to call: allocated and faulted in once.
struct ColumnScratch {
  std::vector<double> values;
  std::vector<std::uint64_t> ids;
};

// Rows [first, first + count) of a file begun by start_file, row i from element at(i) of
// `from`. Each column is built and written in turn, so the writer holds one column beside
// the particles.
template <typename At>
void write_rows(H5Writer& file, const Columns& from, const At& at, std::uint64_t first, std::uint64_t count,
                double velocity_scale, ColumnScratch& scratch) {
  if (count == 0) return;
  auto column = [&](const Vec3d* values, double scale) {
    scratch.values.resize(3 * count);
    double* out = scratch.values.data();
    for (std::uint64_t i = 0; i < count; ++i) {
      const Vec3d& v = values[at(i)];
      for (int d = 0; d < 3; ++d) out[3 * i + d] = v[d] * scale;
    }
    return out;
  };
  file.write_rows("/PartType1/Coordinates", column(from.pos, 1.0), first, count);
  file.write_rows("/PartType1/Velocities", column(from.mom, velocity_scale), first, count);
  scratch.ids.resize(count);
  for (std::uint64_t i = 0; i < count; ++i) scratch.ids[i] = from.id[at(i)];
  file.write_rows("/PartType1/ParticleIDs", scratch.ids.data(), first, count);
  if (from.acc) file.write_rows("/PartType1/Acceleration", column(from.acc, 1.0), first, count);
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

// The particles of one turn on their way to the writers, column by column.
struct TurnColumns {
  std::vector<Vec3d> pos, mom, acc;
  std::vector<std::uint64_t> id;
  void resize(std::size_t n, bool with_acc) {
    pos.resize(n);
    mom.resize(n);
    id.resize(n);
    acc.resize(with_acc ? n : 0);
  }
  Columns view() const { return {pos.data(), mom.data(), acc.empty() ? nullptr : acc.data(), id.data()}; }
};

// Several ranks: file f is written by rank writer_of(f) in `windows` turns, turn t writing
// the file's t-th window (windows: consecutive, nearly equal parts of the file; one, the
// whole file, with at least as many files as ranks; ceil(P / F), of at most about N / P
// particles each, with fewer files). In turn t every rank sends its particles of the t-th
// window of every file straight to that file's writer (each particle travels once, in one
// message a rank pair and column), and every writer puts what arrived in ID order and writes
// it in place; all writers work in the same turn. A writer holds its files' windows of one
// turn: about N / P particles with fewer files than ranks, at most 2 N / P with more.
std::vector<std::unique_ptr<H5Writer>> write_in_turns(const SnapshotPlan& plan, const Particles& particles,
                                                      const std::vector<Vec3d>* accelerations, const Comm& comm) {
  const int files = plan.files(), ranks = comm.size(), me = comm.rank();
  const int windows = files >= ranks ? 1 : (ranks + files - 1) / files;
  // Window t of file f: positions [edges[w], edges[w + 1]) of the ID order, w = f windows + t.
  std::vector<std::uint64_t> edges(static_cast<std::size_t>(files) * windows + 1);
  for (int f = 0; f < files; ++f)
    for (int t = 0; t < windows; ++t)
      edges[static_cast<std::size_t>(f) * windows + t] = plan.bounds[f] + equal_share_begin(plan.count(f), windows, t);
  edges.back() = plan.total();
  auto window = [&](int f, int t) { return static_cast<std::size_t>(f) * windows + t; };
  const IdOrderPieces pieces(particles.id, edges, comm);
  const double scale = velocity_scale(plan.params, plan.a);

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
    for (int f = 0; f < files; ++f)
      if (writer_of(f, files, ranks) == me) written[f] = plan.start(f);
  });
  TurnColumns send, arrived;   // kept from turn to turn: allocated and faulted in once
  ColumnScratch scratch;
  for (int t = 0; t < windows; ++t) {
    // The windows' particles in file order, so grouped by writer (writer_of ascends with f);
    // those of this rank's own files go to the front of `arrived` at once, not through MPI.
    std::vector<std::size_t> counts(static_cast<std::size_t>(ranks), 0);
    for (int f = 0; f < files; ++f) counts[writer_of(f, files, ranks)] += pieces.count(window(f, t));
    const std::size_t mine = std::exchange(counts[me], 0);
    send.resize(Comm::total(counts), accelerations != nullptr);
    arrived.resize(mine, accelerations != nullptr);
    std::size_t sent = 0, kept = 0;
    for (int f = 0; f < files; ++f) {
      const bool own = writer_of(f, files, ranks) == me;
      TurnColumns& to = own ? arrived : send;
      std::size_t& k = own ? kept : sent;
      for (std::size_t m = 0; m < pieces.count(window(f, t)); ++m, ++k) {
        const std::size_t j = pieces.member(window(f, t), m);
        to.pos[k] = particles.pos[j];
        to.mom[k] = particles.mom[j];
        to.id[k] = particles.id[j];
        if (accelerations) to.acc[k] = (*accelerations)[j];
      }
    }
    // The writers are still writing the last turn's windows: wait for them asleep.
    comm.idle_barrier();
    comm.alltoallv_into(send.pos, counts, arrived.pos, mine);
    comm.alltoallv_into(send.mom, counts, arrived.mom, mine);
    comm.alltoallv_into(send.id, counts, arrived.id, mine);
    if (accelerations) comm.alltoallv_into(send.acc, counts, arrived.acc, mine);
    attempt([&] {
      // The windows of this rank's files in this turn are consecutive positions of the ID
      // order (one file a writer with fewer files than ranks, whole consecutive files with
      // more): [first, first + arrived).
      std::uint64_t first = 0, expected = 0;
      for (int f = 0; f < files; ++f) {
        if (writer_of(f, files, ranks) != me) continue;
        if (expected == 0) first = edges[window(f, t)];
        if (edges[window(f, t)] != first + expected) fail("internal: snapshot windows of one writer not consecutive");
        expected += edges[window(f, t) + 1] - edges[window(f, t)];
      }
      if (arrived.id.size() != expected)
        fail("snapshot '{}': this rank received {} particles for its files, expected {}: particle IDs are not unique",
             plan.names.front(), arrived.id.size(), expected);
      const std::vector<std::size_t> order =
          pieces.order_of(arrived.id, first, "snapshot '" + plan.names.front() + "'");
      std::uint64_t at = 0;
      for (int f = 0; f < files; ++f) {
        if (writer_of(f, files, ranks) != me) continue;
        const std::uint64_t count = edges[window(f, t) + 1] - edges[window(f, t)];
        write_rows(*written[f], arrived.view(), [&](std::uint64_t i) { return order.empty() ? at + i : order[at + i]; },
                   edges[window(f, t)] - plan.bounds[f], count, scale, scratch);
        at += count;
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
  const std::uint64_t total = comm.sum(static_cast<std::uint64_t>(particles.size()));
  const double mass = comm.max(particles.mass);   // a rank without particles may not know it
  // File f holds the particles at positions [bounds[f], bounds[f + 1]) of the whole set in ID
  // order, whatever the rank count.
  std::vector<std::uint64_t> bounds(static_cast<std::size_t>(files) + 1);
  for (int f = 0; f <= files; ++f) bounds[f] = equal_share_begin(total, files, f);
  const SnapshotPlan plan{names, bounds, with_acc, mass, a, params};

  std::vector<std::unique_ptr<H5Writer>> written;
  if (ranks == 1) {
    // The particles where they are, through the ID order: the k-th is particle order[k] (k
    // itself when empty).
    const std::vector<std::size_t> order = id_sort_order(particles.id);
    const Columns columns{particles.pos.data(), particles.mom.data(), with_acc ? accelerations->data() : nullptr,
                          particles.id.data()};
    ColumnScratch scratch;
    std::uint64_t at = 0;
    for (int f = 0; f < files; ++f) {
      written.push_back(plan.start(f));
      write_rows(*written.back(), columns, [&](std::uint64_t i) { return order.empty() ? at + i : order[at + i]; }, 0,
                 plan.count(f), velocity_scale(params, a), scratch);
      at += plan.count(f);
    }
  } else {
    written = write_in_turns(plan, particles, accelerations, comm);
    log::info("snapshot {}: {} file{} from {} ranks, {}", path, files, files == 1 ? "" : "s", ranks,
              files >= ranks ? "each written whole by its writer rank" : "each filled in turns by its writer rank");
  }
  // Only once every file is complete do they take their final names. The ranks without
  // files wait for the writers' flushes asleep.
  std::string error;
  try {
    for (auto& file : written) file->commit();
  } catch (const Error& e) {
    error = e.what();
  }
  comm.idle_barrier();
  comm.throw_if_any_failed(error);
  return names;
}

}  // namespace orbis
