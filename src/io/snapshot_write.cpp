// Writing snapshots (io/snapshot.hpp): the GADGET-4 layout, the files in ID order. Each file
// is made by its writer rank with serial HDF5 (header, /Parameters, the datasets' storage
// allocated), closed, and then filled by every rank at once: rank r writes the rows of its
// share of the ID order (positions [r N / P, (r + 1) N / P)) with plain writes at the
// datasets' offsets, the particles sent straight to the rank whose share they fall in.
#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "core/error.hpp"
#include "core/gravity_mode.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "io/gadget_units.hpp"
#include "io/hdf5_file.hpp"
#include "io/id_order.hpp"
#include "io/provenance.hpp"
#include "io/raw_file.hpp"
#include "io/snapshot.hpp"
#include "io/snapshot_layout.hpp"

namespace orbis {
namespace {

// The rank that writes file f of `files` over `ranks` ranks: the files spread evenly (with
// files <= ranks, every file has its own writer).
int writer_of(int f, int files, int ranks) {
  return static_cast<int>(static_cast<std::int64_t>(f) * ranks / files);
}

// Where the values of a file's datasets begin in it (bytes; H5Writer::create_dataset).
struct DataOffsets {
  std::uint64_t pos = 0, vel = 0, id = 0, acc = 0, pot = 0;
};

// The header, /Parameters and /Config of one file of a snapshot, and its datasets for
// `count` particles of the `total` in `files` files, allocated to be filled by write_rows.
DataOffsets start_file(H5Writer& file, bool with_acc, bool with_pot, std::uint64_t count, std::uint64_t total,
                       int files, double particle_mass, double a, const Params& params) {
  write_snapshot_header(file, TypeCounts{0, count, 0, 0, 0, 0}, TypeCounts{0, total, 0, 0, 0, 0},
                        {0, particle_mass, 0, 0, 0, 0}, files, a, params);
  file.create_group("/PartType1");
  DataOffsets offsets;
  offsets.pos = file.create_dataset<double>("/PartType1/Coordinates", count, 3).value_or(0);
  offsets.vel = file.create_dataset<double>("/PartType1/Velocities", count, 3).value_or(0);
  offsets.id = file.create_dataset<std::uint64_t>("/PartType1/ParticleIDs", count).value_or(0);
  if (with_acc) offsets.acc = file.create_dataset<double>("/PartType1/Acceleration", count, 3).value_or(0);
  if (with_pot) offsets.pot = file.create_dataset<double>("/PartType1/Potential", count).value_or(0);
  describe_particle_datasets(file, 1, with_acc, with_pot, false, params);
  write_provenance(file, params);
  return offsets;
}

// The particles a rank's rows are taken from: element e is the rank's own particle e for
// e < own, else arrival e - own (one rank: its particles alone).
struct Columns {
  bool with_acc;
  const Vec3d *pos, *mom, *acc;
  const std::uint64_t* id;
  std::size_t own;
  const Vec3d *pos_in, *mom_in, *acc_in;
  const std::uint64_t* id_in;
  const double *pot = nullptr, *pot_in = nullptr;   // the potentials (none: null)
  template <typename T> static const T& pick(const T* mine, const T* in, std::size_t own, std::size_t e) {
    return e < own ? mine[e] : in[e - own];
  }
};

// The columns write_rows builds, kept from call to call: allocated and faulted in once.
struct ColumnScratch {
  std::vector<double> values;
  std::vector<std::uint64_t> ids;
};

// Rows [first, first + count) of a file whose values begin at `offsets` (open as `file`),
// row i from element at(i) of `from`. Each column in turn, built and written a block of rows
// at a time: sequential writes of up to 24 MiB, one block held beside the particles.
template <typename At>
void write_rows(RawFile& file, const DataOffsets& offsets, const Columns& from, const At& at, std::uint64_t first,
                std::uint64_t count, double velocity_scale, ColumnScratch& scratch) {
  constexpr std::uint64_t kBlock = std::uint64_t{1} << 20;   // rows
  auto vectors = [&](const Vec3d* mine, const Vec3d* in, double scale, std::uint64_t offset) {
    scratch.values.resize(3 * std::min(kBlock, count));
    double* out = scratch.values.data();
    for (std::uint64_t b = 0; b < count; b += kBlock) {
      const std::uint64_t n = std::min(kBlock, count - b);
      for (std::uint64_t i = 0; i < n; ++i) {
        const Vec3d& v = Columns::pick(mine, in, from.own, at(b + i));
        for (int d = 0; d < 3; ++d) out[3 * i + d] = v[d] * scale;
      }
      file.write_at(offset + (first + b) * 3 * sizeof(double), out, n * 3 * sizeof(double));
    }
  };
  vectors(from.pos, from.pos_in, 1.0, offsets.pos);
  vectors(from.mom, from.mom_in, velocity_scale, offsets.vel);
  scratch.ids.resize(std::min(kBlock, count));
  for (std::uint64_t b = 0; b < count; b += kBlock) {
    const std::uint64_t n = std::min(kBlock, count - b);
    for (std::uint64_t i = 0; i < n; ++i) scratch.ids[i] = Columns::pick(from.id, from.id_in, from.own, at(b + i));
    file.write_at(offsets.id + (first + b) * sizeof(std::uint64_t), scratch.ids.data(), n * sizeof(std::uint64_t));
  }
  if (from.with_acc) vectors(from.acc, from.acc_in, 1.0, offsets.acc);
  if (from.pot) {
    scratch.values.resize(std::min(kBlock, count));
    for (std::uint64_t b = 0; b < count; b += kBlock) {
      const std::uint64_t n = std::min(kBlock, count - b);
      for (std::uint64_t i = 0; i < n; ++i) scratch.values[i] = Columns::pick(from.pot, from.pot_in, from.own, at(b + i));
      file.write_at(offsets.pot + (first + b) * sizeof(double), scratch.values.data(), n * sizeof(double));
    }
  }
}

// What every rank needs to know about the snapshot's files.
struct SnapshotPlan {
  const std::vector<std::string>& names;
  const std::vector<std::uint64_t>& bounds;   // file f: positions [bounds[f], bounds[f + 1]) of the ID order
  bool with_acc, with_pot;
  double mass, a;
  const Params& params;
  int files() const { return static_cast<int>(names.size()); }
  std::uint64_t total() const { return bounds.back(); }
  std::uint64_t count(int f) const { return bounds[f + 1] - bounds[f]; }
  // File f made and closed, its datasets allocated for write_rows.
  std::unique_ptr<H5Writer> start(int f, DataOffsets& offsets) const {
    auto file = std::make_unique<H5Writer>(names[f]);
    offsets = start_file(*file, with_acc, with_pot, count(f), total(), files(), mass, a, params);
    file->close();
    return file;
  }
};

// Every rank's files (file f by writer_of(f)), made and closed: the writers' H5Writers (to
// commit), and on every rank each file's temporary name and offsets.
struct MadeFiles {
  std::vector<std::unique_ptr<H5Writer>> mine;
  std::vector<std::string> temp_path;
  std::vector<DataOffsets> offsets;
};

MadeFiles make_files(const SnapshotPlan& plan, const Comm& comm) {
  const int files = plan.files(), ranks = comm.size(), me = comm.rank();
  MadeFiles made;
  // A writer's files are consecutive, so their names and offsets gathered in rank order are in file order.
  std::string error, names;
  std::vector<DataOffsets> offsets;
  try {
    for (int f = 0; f < files; ++f) {
      if (writer_of(f, files, ranks) != me) continue;
      DataOffsets o;
      made.mine.push_back(plan.start(f, o));
      offsets.push_back(o);
      names += made.mine.back()->temp_path();
      names.push_back('\0');
    }
  } catch (const Error& e) {
    error = e.what();
  }
  comm.throw_if_any_failed(error);
  made.offsets = comm.allgatherv(offsets);
  const std::vector<char> all_names = comm.allgatherv(std::vector<char>(names.begin(), names.end()));
  for (std::size_t k = 0; k < all_names.size(); ++k) {
    if (k == 0 || all_names[k - 1] == '\0') made.temp_path.emplace_back();
    if (all_names[k] != '\0') made.temp_path.back().push_back(all_names[k]);
  }
  if (made.temp_path.size() != static_cast<std::size_t>(files) || made.offsets.size() != static_cast<std::size_t>(files))
    fail("internal: snapshot '{}': {} file names and {} offsets from the writers for {} files", plan.names.front(),
         made.temp_path.size(), made.offsets.size(), files);
  return made;
}

// The particles of other ranks in this rank's share, column by column.
struct Arrivals {
  std::vector<Vec3d> pos, mom, acc;
  std::vector<std::uint64_t> id;
};

// This rank's share of the ID order, positions [first, first + count), written into the
// files it overlaps and flushed to disk (every rank its own rows, all at once; the writers'
// commits then find little left to flush); row i of the share is element at(i) of `from`.
template <typename At>
void write_share(const SnapshotPlan& plan, const MadeFiles& made, const Columns& from, const At& at,
                 std::uint64_t first, std::uint64_t count) {
  const double scale = snapshot_velocity_scale(plan.params, plan.a);
  ColumnScratch scratch;
  for (int f = 0; f < plan.files(); ++f) {
    const std::uint64_t lo = std::max(first, plan.bounds[f]), hi = std::min(first + count, plan.bounds[f + 1]);
    if (lo >= hi) continue;
    RawFile file(made.temp_path[f], plan.names[f]);
    write_rows(file, made.offsets[f], from, [&](std::uint64_t i) { return at(lo - first + i); }, lo - plan.bounds[f],
               hi - lo, scale, scratch);
    file.sync_and_close();
  }
}

// Several ranks: the particles travel to the rank whose share of the ID order they fall in
// (each once, in one message a rank pair and column; those of this rank's own share stay
// where they are), which puts its share in ID order and writes it. Every rank holds its
// particles and the arrivals: about N / P particles more.
void write_shares(const SnapshotPlan& plan, const MadeFiles& made, const Particles& particles,
                  const std::vector<Vec3d>* accelerations, const Comm& comm) {
  const auto ranks = static_cast<std::size_t>(comm.size()), me = static_cast<std::size_t>(comm.rank());
  std::vector<std::uint64_t> shares(ranks + 1);
  for (std::size_t r = 0; r <= ranks; ++r) shares[r] = equal_share_begin(plan.total(), comm.size(), static_cast<int>(r));
  const IdOrderPieces pieces(particles.id, shares, comm);
  std::vector<std::size_t> counts(ranks, 0);
  for (std::size_t r = 0; r < ranks; ++r) counts[r] = pieces.count(r);
  const std::size_t own = std::exchange(counts[me], 0);
  // Packed by destination; this rank's own share's IDs beside them, for the order.
  Arrivals send, in;
  const std::size_t sending = Comm::total(counts);
  send.pos.resize(sending), send.mom.resize(sending), send.id.resize(sending);
  if (accelerations) send.acc.resize(sending);
  std::vector<std::uint64_t> ids(own);
  for (std::size_t r = 0, k = 0; r < ranks; ++r)
    for (std::size_t m = 0; m < pieces.count(r); ++m) {
      const std::size_t j = pieces.member(r, m);
      if (r == me) {
        ids[m] = particles.id[j];
        continue;
      }
      send.pos[k] = particles.pos[j];
      send.mom[k] = particles.mom[j];
      send.id[k] = particles.id[j];
      if (accelerations) send.acc[k] = (*accelerations)[j];
      ++k;
    }
  comm.alltoallv_into(send.pos, counts, in.pos, 0);
  comm.alltoallv_into(send.mom, counts, in.mom, 0);
  comm.alltoallv_into(send.id, counts, in.id, 0);
  if (accelerations) comm.alltoallv_into(send.acc, counts, in.acc, 0);
  send = Arrivals{};
  // Row i of the share: element where[i] of the own particles (index into `particles`) and
  // then the arrivals (numbered from particles.size()).
  std::string error;
  try {
    ids.insert(ids.end(), in.id.begin(), in.id.end());
    if (ids.size() != shares[me + 1] - shares[me])
      fail("snapshot '{}': this rank received {} particles for its share of the ID order, expected {}: particle IDs "
           "are not unique", plan.names.front(), ids.size(), shares[me + 1] - shares[me]);
    std::vector<std::size_t> where = pieces.order_of(ids, shares[me], "snapshot '" + plan.names.front() + "'");
    if (where.empty()) {
      where.resize(ids.size());
      for (std::size_t i = 0; i < where.size(); ++i) where[i] = i;
    }
    ids = {};
    const std::size_t n = particles.size();
    for (std::size_t& e : where) e = e < own ? pieces.member(me, e) : n + (e - own);
    const Columns from{accelerations != nullptr,
                       particles.pos.data(),
                       particles.mom.data(),
                       accelerations ? accelerations->data() : nullptr,
                       particles.id.data(),
                       n,
                       in.pos.data(),
                       in.mom.data(),
                       accelerations ? in.acc.data() : nullptr,
                       in.id.data()};
    write_share(plan, made, from, [&](std::uint64_t i) { return where[i]; }, shares[me], where.size());
  } catch (const Error& e) {
    error = e.what();
  }
  // The ranks that finish first wait for the others' writes asleep.
  comm.idle_barrier();
  comm.throw_if_any_failed(error);
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
                                        const Params& params, const SnapshotExtras& extras, const Comm& comm) {
  const int files = static_cast<int>(params.get_int("output.files_per_snapshot"));
  const int ranks = comm.size();
  const std::vector<Vec3d>* accelerations = extras.accelerations;
  if (accelerations && accelerations->size() != particles.size())
    fail("write_snapshot: {} accelerations for {} particles", accelerations->size(), particles.size());
  if (extras.potentials && extras.potentials->size() != particles.size())
    fail("write_snapshot: {} potentials for {} particles", extras.potentials->size(), particles.size());
  const bool with_acc = accelerations != nullptr;
  const bool with_pot = comm.any(extras.potentials != nullptr);
  if (with_pot && (ranks > 1 || gravity_mode(params).periodic()))
    fail("snapshot '{}': particle potentials are an isolated system's ([gravity] boundary = \"vacuum\"), written from "
         "one rank (isolated systems run on one); this snapshot is {}: nothing was written", path,
         ranks > 1 ? fmt::format("written by {} ranks", ranks) : std::string("a periodic box's"));
  const std::vector<std::string> names = snapshot_file_names(path, files);
  // Several types or individual masses (an isolated system's): their own writer, on one rank.
  if (comm.any(!particles.type.empty() || particles.has_individual_masses())) {
    if (ranks > 1)
      fail("snapshot '{}': the particles have several types or individual masses, which are written from one rank "
           "only (isolated systems run on one), but this run has {} ranks: nothing was written", path, ranks);
    if (gravity_mode(params).periodic())
      fail("snapshot '{}': the particles have several types or individual masses, which only an isolated system's "
           "snapshot holds ([gravity] boundary = \"vacuum\"); a cosmological run has one particle mass", path);
    return write_typed_snapshot(names, particles, a, params, extras);
  }
  const std::uint64_t total = comm.sum(static_cast<std::uint64_t>(particles.size()));
  const double mass = comm.max(particles.mass);   // a rank without particles may not know it
  // File f holds the particles at positions [bounds[f], bounds[f + 1]) of the whole set in ID
  // order, whatever the rank count.
  std::vector<std::uint64_t> bounds(static_cast<std::size_t>(files) + 1);
  for (int f = 0; f <= files; ++f) bounds[f] = equal_share_begin(total, files, f);
  const SnapshotPlan plan{names, bounds, with_acc, with_pot, mass, a, params};

  MadeFiles made = make_files(plan, comm);
  if (ranks == 1) {
    // The particles where they are, through the ID order: the k-th is particle order[k] (k
    // itself when empty).
    const std::vector<std::size_t> order = id_sort_order(particles.id);
    const Columns from{with_acc,           particles.pos.data(), particles.mom.data(),
                       with_acc ? accelerations->data() : nullptr,
                       particles.id.data(), particles.size(),     nullptr, nullptr, nullptr, nullptr,
                       with_pot ? extras.potentials->data() : nullptr};
    write_share(plan, made, from, [&](std::uint64_t i) { return order.empty() ? i : order[i]; }, 0, total);
  } else {
    write_shares(plan, made, particles, accelerations, comm);
    log::info("snapshot {}: {} file{} from {} ranks, each rank writing its share of the ID order", path, files,
              files == 1 ? "" : "s", ranks);
  }
  // Only once every file is complete do they take their final names.
  std::string error;
  try {
    for (auto& file : made.mine) file->commit();
  } catch (const Error& e) {
    error = e.what();
  }
  comm.idle_barrier();
  comm.throw_if_any_failed(error);
  return names;
}

}  // namespace orbis
