#include "io/system_file.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "core/error.hpp"
#include "io/gadget_binary.hpp"
#include "io/hdf5_file.hpp"
#include "io/snapshot.hpp"

namespace orbis {
namespace {

// The file's units in the run's: stored values times these.
struct Conversion {
  double length = 1, mass = 1, velocity = 1;
};

// An HDF5 file's unit attributes (GADGET-4: /Parameters; others: /Header), in cgs; absent ones empty.
std::optional<double> unit_attribute(const H5Reader& r, const char* name) {
  for (const char* object : {"/Parameters", "/Header"})
    if (r.has_attribute(object, name)) return r.attribute<double>(object, name);
  return std::nullopt;
}

Conversion hdf5_conversion(const H5Reader& r, const PhysicalUnits& run, std::string& note) {
  const char* names[3] = {"UnitLength_in_cm", "UnitMass_in_g", "UnitVelocity_in_cm_per_s"};
  const double ours[3] = {run.length_in_cm, run.mass_in_g, run.velocity_in_cm_per_s};
  std::optional<double> given[3];
  std::string listed;
  bool any = false, all_one = true;
  for (int k = 0; k < 3; ++k) {
    given[k] = unit_attribute(r, names[k]);
    if (!given[k]) continue;
    if (!(*given[k] > 0) || !std::isfinite(*given[k]))
      fail("'{}': {} = {} is not a unit (it must be positive)", r.path(), names[k], *given[k]);
    any = true;
    all_one = all_one && *given[k] == 1.0;
    listed += fmt::format("{}{} = {:g}", listed.empty() ? "" : ", ", names[k], *given[k]);
  }
  Conversion c;
  const std::string run_units = fmt::format("{}, {}, {}", run.length, run.mass, run.velocity);
  if (!any) {
    note = fmt::format("the file gives no units: taken in the run's [units] system = \"{}\" ({})", run.system, run_units);
    return c;
  }
  if (all_one != (run.system == "nbody"))
    fail("'{}' gives its units as {}: {}, but the run's [units] system = \"{}\" {}; set [units] system = \"{}\"",
         r.path(), listed, all_one ? "N-body units (no physical scale, G = 1)" : "physical units", run.system,
         all_one ? "has physical ones (G = 43007.1)" : "has no physical scale to convert them to",
         all_one ? "nbody" : "galaxy");
  if (all_one) {
    note = "the file is in N-body units (its unit attributes 1), as the run";
    return c;
  }
  double* factors[3] = {&c.length, &c.mass, &c.velocity};
  for (int k = 0; k < 3; ++k)
    if (given[k]) *factors[k] = *given[k] / ours[k];
  note = fmt::format("converted from the file's units ({}) to {}", listed, run_units);
  return c;
}

// What a set's first file says of the whole set.
struct SetHeader {
  double time = 0, box = 0;
  TypeCounts total{};
};

SetHeader hdf5_header(const H5Reader& r) {
  SetHeader h;
  if (r.has_attribute("/Header", "Time")) h.time = r.attribute<double>("/Header", "Time");
  if (r.has_attribute("/Header", "BoxSize")) h.box = r.attribute<double>("/Header", "BoxSize");
  const auto total = r.attribute_array<std::uint64_t>("/Header", "NumPart_Total");
  std::vector<std::uint64_t> high(6, 0);
  if (r.has_attribute("/Header", "NumPart_Total_HighWord"))
    high = r.attribute_array<std::uint64_t>("/Header", "NumPart_Total_HighWord");
  for (std::size_t t = 0; t < 6 && t < total.size(); ++t) h.total[t] = gadget_total_count(total[t], t < high.size() ? high[t] : 0);
  if (r.has_attribute("/Parameters", "ComovingIntegrationOn") &&
      r.attribute<std::int64_t>("/Parameters", "ComovingIntegrationOn") != 0)
    fail("'{}' comes from a comoving (cosmological) run (/Parameters ComovingIntegrationOn = 1): its positions are "
         "comoving and its velocities sqrt(a) dx/dt; an isolated system ([gravity] boundary = \"vacuum\") starts from "
         "a non-comoving file", r.path());
  return h;
}

SetHeader binary_header(const GadgetBinaryHeader& b) {
  SetHeader h;
  h.time = b.time;
  h.box = b.box;
  for (int t = 0; t < 6; ++t) h.total[t] = gadget_total_count(b.npart_total[t], b.npart_total_high[t]);
  return h;
}

// Where the particles of the result came from: file `file`'s particles of `type`, [first, first + count) of the result.
struct Piece {
  std::size_t file = 0;
  int type = 1;
  std::size_t first = 0, count = 0;
};

class Origins {
 public:
  Origins(const std::vector<std::string>& files, const Particles& p) : files_(files), p_(p) {}
  void add(const Piece& piece) { pieces_.push_back(piece); }
  // "particle k of type t (ID i) of 'file'"
  std::string operator()(std::size_t i) const {
    for (const Piece& piece : pieces_)
      if (i >= piece.first && i < piece.first + piece.count)
        return fmt::format("particle {} of type {} (ID {}) of '{}'", i - piece.first, piece.type, p_.id[i],
                           files_[piece.file]);
    return fmt::format("particle {}", i);
  }

 private:
  const std::vector<std::string>& files_;
  const Particles& p_;
  std::vector<Piece> pieces_;
};

// Two particles with one ID, or at one position: an error naming both (the first in the file first).
void check_distinct(const Particles& p, const Origins& origin, const std::string& path) {
  std::vector<std::size_t> order(p.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p.id[a] < p.id[b]; });
  for (std::size_t k = 1; k < order.size(); ++k)
    if (p.id[order[k]] == p.id[order[k - 1]])
      fail("'{}': duplicate particle ID {}: {} and {} (particle IDs must be unique)", path, p.id[order[k]],
           origin(order[k - 1]), origin(order[k]));
  const auto less = [&](std::size_t a, std::size_t b) {
    const Vec3d &x = p.pos[a], &y = p.pos[b];
    return x.x != y.x ? x.x < y.x : x.y != y.y ? x.y < y.y : x.z < y.z;
  };
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), less);
  for (std::size_t k = 1; k < order.size(); ++k)
    if (!less(order[k - 1], order[k]))
      fail("'{}': overlapping particles: {} and {} are both at ({}, {}, {}) (a generator's duplicate, or a file "
           "written twice into one)", path, origin(order[k - 1]), origin(order[k]), p.pos[order[k]].x,
           p.pos[order[k]].y, p.pos[order[k]].z);
}

}  // namespace

SystemFile read_system_file(const std::string& path, const PhysicalUnits& units) {
  const std::vector<std::string> files = snapshot_file_set(path);
  SystemFile out;
  Conversion c;
  SetHeader header;
  if (GadgetBinaryFile::detect(files.front())) {
    header = binary_header(GadgetBinaryFile(files.front()).header());
    out.units = fmt::format("a GADGET binary file carries no units: taken in the run's [units] system = \"{}\" ({}, "
                            "{}, {})", units.system, units.length, units.mass, units.velocity);
  } else {
    const H5Reader r(files.front());
    header = hdf5_header(r);
    c = hdf5_conversion(r, units, out.units);
  }
  out.time = header.time * c.length / c.velocity;
  out.box = header.box * c.length;

  std::vector<std::unique_ptr<ParticleFile>> opened;
  for (const std::string& file : files) {
    opened.push_back(ParticleFile::open(file));
    for (int t = 0; t < 6; ++t) out.per_type[t] += opened.back()->counts()[t];
  }
  std::uint64_t n = 0;
  for (int t = 0; t < 6; ++t) {
    if (out.per_type[t] != header.total[t])
      fail("'{}': its {} file(s) hold {} particles of type {}, but the header's total (NumPart_Total) says {}", path,
           files.size(), out.per_type[t], t, header.total[t]);
    n += out.per_type[t];
  }
  if (n == 0) fail("'{}' holds no particles", path);

  Particles& p = out.particles;
  std::vector<double> masses;
  std::vector<std::uint8_t> types;
  p.resize(n);
  masses.reserve(n);
  types.reserve(n);
  Origins origin(files, p);
  std::size_t at = 0;
  for (int t = 0; t < 6; ++t)
    for (std::size_t f = 0; f < files.size(); ++f) {
      ParticleFile& file = *opened[f];
      const std::uint64_t count = file.counts()[t];
      if (count == 0) continue;
      origin.add(Piece{f, t, at, count});
      const auto pos = file.positions(t, 0, count), vel = file.velocities(t, 0, count);
      const auto ids = file.ids(t, 0, count);
      std::vector<double> m;
      if (file.mass_table()[t] != 0) {
        m.assign(count, file.mass_table()[t]);
      } else if (file.has_masses(t)) {
        m = file.masses(t, 0, count);
      } else {
        fail("'{}': no masses for its {} particles of type {}: MassTable[{}] is 0 and there is no {} dataset", files[f],
             count, t, t, file.where(t, ParticleFile::Column::mass));
      }
      for (std::uint64_t k = 0; k < count; ++k, ++at) {
        p.id[at] = ids[k];
        for (int d = 0; d < 3; ++d) {
          const double x = pos[3 * k + d], v = vel[3 * k + d];
          if (!std::isfinite(x) || !std::isfinite(v))
            fail("'{}': {} has {} {} in {} (a corrupt file)", path, origin(at), std::isfinite(x) ? "velocity" : "position",
                 std::isfinite(x) ? v : x,
                 file.where(t, std::isfinite(x) ? ParticleFile::Column::velocity : ParticleFile::Column::position));
          p.pos[at][d] = x * c.length;
          p.mom[at][d] = v * c.velocity;   // p = dx/dt for the Newtonian clock
        }
        if (!(m[k] > 0) || !std::isfinite(m[k]))
          fail("'{}': {} has mass {} in {}: masses must be positive and finite", path, origin(at), m[k],
               file.mass_table()[t] != 0 ? fmt::format("MassTable[{}]", t) : file.where(t, ParticleFile::Column::mass));
        masses.push_back(m[k] * c.mass);
        types.push_back(static_cast<std::uint8_t>(t));
      }
    }
  check_distinct(p, origin, path);

  // One mass for all: the run's constant, no per-particle array (the equal-mass kernels' path).
  const bool equal = std::all_of(masses.begin(), masses.end(), [&](double m) { return m == masses.front(); });
  if (equal) {
    p.mass = masses.front();
  } else {
    double sum = 0;
    for (double m : masses) sum += m;
    p.mass = sum / static_cast<double>(n);
    p.masses = std::move(masses);
  }
  if (out.per_type[1] != n) p.type = std::move(types);
  return out;
}

}  // namespace orbis
