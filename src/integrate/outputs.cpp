#include "integrate/outputs.hpp"

#include <chrono>
#include <future>

#include <fmt/format.h>

#include "analysis/fof.hpp"
#include "analysis/halo_catalogue.hpp"
#include "analysis/power_spectrum.hpp"
#include "analysis/power_spectrum_io.hpp"
#include "core/comm.hpp"
#include "core/log.hpp"
#include "core/params.hpp"
#include "core/timer.hpp"
#include "cosmology/cosmology.hpp"
#include "cosmology/linear_power.hpp"
#include "io/atomic_file.hpp"
#include "io/output_guard.hpp"
#include "io/snapshot.hpp"
#include "integrate/step_engine.hpp"

namespace orbis {
namespace {

// The names of output `index`'s files; empty: not written.
struct OutputNames {
  std::string snapshot, pk_base, catalogue;
};

// A periodic run's estimators (their keys are absent in an isolated system's parameters).
bool asked(const Params& params, const char* name) { return params.has(name) && params.get_bool(name); }

OutputNames output_names(const Params& params, const std::string& directory, int index) {
  const std::string number = fmt::format("{:03d}", index);
  OutputNames names;
  if (params.get_bool("output.snapshots")) names.snapshot = join_path(directory, "snapshot_" + number + ".hdf5");
  if (asked(params, "analysis.pk")) names.pk_base = join_path(directory, "powerspec_" + number);
  if (asked(params, "analysis.fof")) names.catalogue = join_path(directory, halo::catalogue_file_name(index));
  return names;
}

}  // namespace

void validate_outputs(const Params& params) {
  // Building the settings checks them; nothing is measured here.
  if (asked(params, "analysis.pk")) {
    PowerSpectrumSettings::from_params(params);
    LinearPower::from_params(params);
  }
  if (asked(params, "analysis.fof")) fof::config_from_params(params);
  check_folder_writable(params.get_string("output.directory"), params.describe("output.directory"));
}

std::vector<std::string> output_file_names(const Params& params, const std::string& directory, int index) {
  const OutputNames names = output_names(params, directory, index);
  std::vector<std::string> files;
  if (!names.snapshot.empty())
    files = snapshot_file_names(names.snapshot, static_cast<int>(params.get_int("output.files_per_snapshot")));
  if (!names.pk_base.empty()) {
    files.push_back(names.pk_base + ".txt");
    files.push_back(names.pk_base + ".hdf5");
  }
  if (!names.catalogue.empty()) {
    files.push_back(names.catalogue);
    files.push_back(halo::mass_function_path(names.catalogue));
  }
  return files;
}

bool snapshot_potentials(const Params& params) {
  return params.get_bool("output.snapshots") && params.has("output.potential") && params.get_bool("output.potential");
}

double particle_record_bytes(const Params& params) {
  // An isolated system's snapshot may hold each particle's mass (/PartTypeN/Masses): counted.
  const double masses = params.has("box.particles_per_side") ? 0 : 8;
  return 48 + 8 + masses + (params.get_bool("output.accelerations") ? 24 : 0) +
         (snapshot_potentials(params) ? 8 : 0);
}

double output_file_bytes(const Params& params, std::uint64_t particles) {
  const double n = static_cast<double>(particles);
  double bytes = 1 << 20;   // headers, /Parameters, P(k), mass function: well under a MiB
  if (params.get_bool("output.snapshots")) bytes += n * particle_record_bytes(params);
  // At most every particle in a group: its ID in /IDs/ID.
  if (asked(params, "analysis.fof")) bytes += 8 * n;
  return bytes;
}

std::optional<PowerSpectrum> engine_power_spectrum(const Params& params, StepEngine& engine) {
  if (!asked(params, "analysis.pk")) return std::nullopt;
  Stopwatch watch;
  std::optional<PowerSpectrum> pk = engine.power_spectrum(PowerSpectrumSettings::from_params(params));
  if (pk) log::info("P(k) measured by the step engine in {:.1f} ms", 1e3 * watch.seconds());
  return pk;
}

std::optional<fof::LocalLinks> engine_fof_links(const Params& params, StepEngine& engine, const Comm& comm) {
  if (!asked(params, "analysis.fof")) return std::nullopt;
  Stopwatch watch;
  const double b = fof::config_from_params(params).linking_length_over_spacing;
  const double box = params.get_real("box.size_mpc_h");
  if (comm.size() == 1) {
    std::optional<std::vector<std::uint32_t>> labels = engine.fof_labels(b);
    if (!labels) return std::nullopt;
    log::info("FoF groups linked by the step engine in {:.1f} ms", 1e3 * watch.seconds());
    fof::LocalLinks links;
    links.label = std::move(*labels);
    links.box_mpc_h = box;
    links.link_mpc_h = fof::linking_length(engine.particles().size(), box, b);
    return links;
  }
  // Every rank or none: the ghost import is collective.
  if (!comm.all(engine.links_fof_with_ghosts())) return std::nullopt;
  // The host copy of the particles: the output takes it next (particles_copy), so it is made
  // here rather than there, not twice; the log says what it took.
  Stopwatch part;
  const Particles& particles = engine.particles();
  const double copied = part.seconds();
  const double link = fof::linking_length(comm.sum<std::uint64_t>(particles.size()), box, b);
  bool on_engine = false;
  double imported = 0;
  part.restart();
  fof::LocalLinks links =
      fof::link_locally(particles, box, link, comm,
                        [&](const std::vector<Vec3d>&, const std::vector<Vec3d>& ghosts, double, double l) {
                          imported = part.seconds();
                          part.restart();
                          std::optional<std::vector<std::uint32_t>> labels = engine.fof_labels_with_ghosts(ghosts, l);
                          on_engine = labels.has_value();
                          return labels ? std::move(*labels) : std::vector<std::uint32_t>{};
                        });
  const double linked_seconds = part.seconds();
  const int linked = comm.sum(on_engine ? 1 : 0);
  log::info("FoF: particles and ghosts linked by the step engine on {} of {} ranks in {:.1f} ms{} (rank 0: host copy "
            "of the particles {:.1f} ms, {} ghosts imported in {:.1f} ms, linked in {:.1f} ms)",
            linked, comm.size(), 1e3 * watch.seconds(), linked < comm.size() ? ", the others link on the host" : "",
            1e3 * copied, links.ghosts.size(), 1e3 * imported, 1e3 * linked_seconds);
  return links;
}

std::vector<std::string> write_run_outputs(const OutputContext& c, const Particles& particles,
                                           const ParticleFields& fields, const Comm& comm,
                                           const PowerSpectrum* measured,
                                           const fof::LocalLinks* fof_links) {
  std::vector<std::string> files;
  const Params& params = c.params;
  const OutputNames names = output_names(params, c.directory, c.index);
  if (c.cosmology) log::info("output {:03d} at a = {:.6f} (z = {:.4f})", c.index, c.a, 1 / c.a - 1);
  else log::info("output {:03d} at t = {:.6g}", c.index, c.a);
  SnapshotExtras extras;
  if (params.get_bool("output.accelerations")) extras.accelerations = &fields.accelerations;
  if (snapshot_potentials(params)) extras.potentials = &fields.potentials;
  Stopwatch total, part;
  double snapshot_seconds = 0, pk_seconds = 0, fof_seconds = 0;
  auto catalogue_of = [&] {
    return halo::find_haloes_across_ranks(particles, params.get_real("box.size_mpc_h"), c.a, params, comm, fof_links);
  };
  // On one rank the catalogue takes no communication: it is made on a thread of its own while
  // the snapshot is written (0.3-0.4 s of host work at 256^3, which the run's last output
  // waited for on top of the snapshot's write). Over ranks it is collective on `comm`, as the
  // snapshot is, so it comes after. (A std::async future waits in its destructor: an error in
  // the snapshot leaves nothing running.)
  const bool catalogue_beside = !names.catalogue.empty() && comm.size() == 1;
  std::future<GroupCatalogue> catalogue_ahead;
  if (catalogue_beside) catalogue_ahead = std::async(std::launch::async, catalogue_of);

  if (!names.snapshot.empty()) {
    // Collective: each file's particles go to its writer rank, none gathers them all.
    const auto written = write_snapshot(names.snapshot, particles, c.a, params, extras, comm);
    files.insert(files.end(), written.begin(), written.end());
    snapshot_seconds = part.seconds();
  }
  if (!names.pk_base.empty()) {
    part.restart();
    const LinearPower power = LinearPower::from_params(params);
    const double box = params.get_real("box.size_mpc_h");
    const double d = c.cosmology->growth(c.a);
    const LinearPowerFn linear = [&](double k) { return power(k) * d * d; };
    PowerSpectrum pk;
    if (measured) {   // by the engine, where the particles are
      pk = *measured;
      for (PowerSpectrumBin& bin : pk.bins) bin.linear = linear(bin.k_mean);
    } else {
      // Collective: the mesh in slabs over the ranks, the particles where they are.
      pk = measure_power_spectrum(particles.pos, box, PowerSpectrumSettings::from_params(params), linear, comm);
    }
    run_collectively(comm, [&] {
      if (comm.is_root()) write_power_spectrum(names.pk_base, pk, c.a, params);
    });
    files.push_back(names.pk_base + ".txt");
    files.push_back(names.pk_base + ".hdf5");
    pk_seconds = part.seconds();
  }
  if (!names.catalogue.empty()) {
    part.restart();
    // Collective: groups linked across ranks, the catalogue on rank 0. From the engine's links
    // the same catalogue, without linking here (one rank) or with only the merge and the
    // gather left (over ranks).
    const GroupCatalogue catalogue = catalogue_beside ? catalogue_ahead.get() : catalogue_of();
    run_collectively(comm, [&] {
      if (!comm.is_root()) return;
      halo::write_halo_outputs(names.catalogue, catalogue, params);
      log::info("  {} haloes with at least {} particles", catalogue.len.size(), params.get_int("analysis.fof_min_members"));
    });
    files.push_back(names.catalogue);
    files.push_back(halo::mass_function_path(names.catalogue));
    fof_seconds = part.seconds();
  }
  for (const auto& f : files) log::info("  wrote {}", f);
  log::info("output {:03d} written in {:.2f} s: snapshot {:.2f} s, P(k) {:.2f} s, FoF catalogue {:.2f} s{}", c.index,
            total.seconds(), snapshot_seconds, pk_seconds, fof_seconds,
            catalogue_beside ? " (made beside the snapshot)" : "");
  return files;
}

BackgroundOutputs::~BackgroundOutputs() {
  if (!pending_.valid()) return;
  try {
    pending_.get();
  } catch (const std::exception& e) {
    log::info("output not completed: {}", e.what());
  }
}

void BackgroundOutputs::start(const OutputContext& context, Particles particles, ParticleFields fields,
                              std::vector<std::string>& files, std::optional<PowerSpectrum> power_spectrum,
                              const Comm& comm, std::optional<fof::LocalLinks> fof_links) {
  finish(files);
  pending_ = std::async(std::launch::async,
                        [context, particles = std::move(particles), fields = std::move(fields),
                         pk = std::move(power_spectrum), comm, links = std::move(fof_links)]() mutable {
                          Stopwatch watch;
                          Written written{write_run_outputs(context, particles, fields, comm,
                                                            pk ? &*pk : nullptr, links ? &*links : nullptr),
                                          0, Particles{}};
                          written.seconds = watch.seconds();
                          written.spent = std::move(particles);
                          return written;
                        });
}

void BackgroundOutputs::poll(std::vector<std::string>& files) {
  if (pending_.valid() && pending_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) finish(files);
}

void BackgroundOutputs::finish(std::vector<std::string>& files) {
  if (!pending_.valid()) return;
  auto future = std::move(pending_);   // invalid from here on, even if get() throws
  Written written = future.get();
  files.insert(files.end(), written.files.begin(), written.files.end());
  seconds_ += written.seconds;
  ++timed_;
  spent_ = std::move(written.spent);
}

}  // namespace orbis
