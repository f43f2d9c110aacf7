// Writing an isolated system's snapshot of several particle types or individual masses
// (io/snapshot.hpp's write_snapshot hands it over): one rank (isolated systems run on one),
// each type in its own /PartTypeN group, ordered by type and then by ID, as GADGET-4 writes
// them: NumPart_ThisFile and NumPart_Total per type, MassTable[t] the type's mass where all its
// particles share one, else 0 and /PartTypeN/Masses. With files_per_snapshot = F each type is
// cut into F consecutive shares, file f holding share f of every type (GADGET's multi-file
// layout), so a reader taking the types in order and the files in order gets the same order.
#include <algorithm>
#include <memory>
#include <numeric>

#include "core/error.hpp"
#include "core/params.hpp"
#include "io/gadget_units.hpp"
#include "io/hdf5_file.hpp"
#include "io/id_order.hpp"
#include "io/provenance.hpp"
#include "io/snapshot.hpp"
#include "io/snapshot_layout.hpp"

namespace orbis {

std::vector<std::string> write_typed_snapshot(const std::vector<std::string>& names, const Particles& p, double a,
                                              const Params& params, const SnapshotExtras& extras) {
  const std::vector<Vec3d>* accelerations = extras.accelerations;
  const std::vector<double>* potentials = extras.potentials;
  const int files = static_cast<int>(names.size());
  // By type, then ID.
  std::vector<std::size_t> order(p.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    const int tx = p.type_of(x), ty = p.type_of(y);
    return tx != ty ? tx < ty : p.id[x] < p.id[y];
  });
  TypeCounts total{};
  std::array<std::size_t, 7> begin{};   // type t: order[begin[t], begin[t + 1])
  for (std::size_t i = 0; i < p.size(); ++i) {
    const int t = p.type_of(i);
    if (t < 0 || t > 5) fail("snapshot '{}': particle {} (ID {}) has type {}; GADGET's types are 0..5", names.front(), i,
                             p.id[i], t);
    ++total[t];
  }
  for (int t = 0; t < 6; ++t) begin[t + 1] = begin[t] + total[t];
  // A type's MassTable entry: its one mass, else 0 (then its particles' Masses).
  std::array<double, 6> table{};
  for (int t = 0; t < 6; ++t) {
    if (total[t] == 0) continue;
    const double first = p.mass_of(order[begin[t]]);
    const bool one = std::all_of(order.begin() + static_cast<std::ptrdiff_t>(begin[t]),
                                 order.begin() + static_cast<std::ptrdiff_t>(begin[t + 1]),
                                 [&](std::size_t i) { return p.mass_of(i) == first; });
    table[t] = one ? first : 0.0;
  }
  const double velocity_scale = snapshot_velocity_scale(params, a);
  std::vector<std::unique_ptr<H5Writer>> made;
  for (int f = 0; f < files; ++f) {
    TypeCounts here{};
    std::array<std::size_t, 6> first{};
    for (int t = 0; t < 6; ++t) {
      first[t] = begin[t] + equal_share_begin(total[t], files, f);
      here[t] = begin[t] + equal_share_begin(total[t], files, f + 1) - first[t];
    }
    auto file = std::make_unique<H5Writer>(names[f]);
    write_snapshot_header(*file, here, total, table, files, a, params);
    for (int t = 0; t < 6; ++t) {
      if (here[t] == 0) continue;
      const std::string group = "/PartType" + std::to_string(t);
      const std::size_t n = here[t];
      const auto member = [&](std::size_t k) { return order[first[t] + k]; };
      const auto vectors = [&](const std::vector<Vec3d>& v, double scale) {
        std::vector<double> out(3 * n);
        for (std::size_t k = 0; k < n; ++k)
          for (int d = 0; d < 3; ++d) out[3 * k + d] = v[member(k)][d] * scale;
        return out;
      };
      file->create_group(group);
      file->write(group + "/Coordinates", vectors(p.pos, 1.0).data(), n, 3);
      file->write(group + "/Velocities", vectors(p.mom, velocity_scale).data(), n, 3);
      std::vector<std::uint64_t> ids(n);
      for (std::size_t k = 0; k < n; ++k) ids[k] = p.id[member(k)];
      file->write(group + "/ParticleIDs", ids);
      if (accelerations) file->write(group + "/Acceleration", vectors(*accelerations, 1.0).data(), n, 3);
      if (potentials) {
        std::vector<double> phi(n);
        for (std::size_t k = 0; k < n; ++k) phi[k] = (*potentials)[member(k)];
        file->write(group + "/Potential", phi);
      }
      if (table[t] == 0) {
        std::vector<double> masses(n);
        for (std::size_t k = 0; k < n; ++k) masses[k] = p.mass_of(member(k));
        file->write(group + "/Masses", masses);
      }
      describe_particle_datasets(*file, t, accelerations != nullptr, potentials != nullptr, table[t] == 0, params);
    }
    write_provenance(*file, params);
    made.push_back(std::move(file));
  }
  // Only once every file is complete do they take their final names.
  for (auto& file : made) file->commit();
  return names;
}

}  // namespace orbis
