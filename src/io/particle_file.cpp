#include "io/particle_file.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "io/gadget_binary.hpp"
#include "io/hdf5_file.hpp"

namespace orbis {
namespace {

std::string group_of(int type) { return "/PartType" + std::to_string(type); }

std::string shape_text(const std::vector<std::size_t>& dims) {
  if (dims.empty()) return "a scalar";
  std::string shape;
  for (auto d : dims) shape += (shape.empty() ? "" : " x ") + std::to_string(d);
  return "of shape " + shape;
}

class Hdf5ParticleFile final : public ParticleFile {
 public:
  explicit Hdf5ParticleFile(const std::string& path) : ParticleFile(path), r_(path) {
    if (!r_.has("/Header")) fail("'{}' has no /Header group: not a GADGET-layout HDF5 snapshot", path);
    const auto counts = r_.attribute_array<std::uint64_t>("/Header", "NumPart_ThisFile");
    for (std::size_t t = 0; t < counts.size() && t < 6; ++t) counts_[t] = counts[t];
    if (r_.has_attribute("/Header", "MassTable")) {
      const auto table = r_.attribute_array<double>("/Header", "MassTable");
      for (std::size_t t = 0; t < table.size() && t < 6; ++t) mass_table_[t] = table[t];
    }
  }
  bool has_masses(int type) const override { return r_.has(group_of(type) + "/Masses"); }
  std::vector<double> positions(int type, std::uint64_t first, std::uint64_t count) override {
    check_layout(type);
    return r_.read_rows<double>(group_of(type) + "/Coordinates", first, count);
  }
  std::vector<double> velocities(int type, std::uint64_t first, std::uint64_t count) override {
    check_layout(type);
    return r_.read_rows<double>(group_of(type) + "/Velocities", first, count);
  }
  std::vector<std::uint64_t> ids(int type, std::uint64_t first, std::uint64_t count) override {
    check_layout(type);
    return r_.read_rows<std::uint64_t>(group_of(type) + "/ParticleIDs", first, count);
  }
  std::vector<double> masses(int type, std::uint64_t first, std::uint64_t count) override {
    const std::string set = group_of(type) + "/Masses";
    if (!has_masses(type)) fail("internal: '{}' has no {} dataset", path(), set);
    const auto dims = r_.shape(set);
    if (dims.size() != 1 || dims[0] != counts_[type])
      fail("'{}': dataset {} is {}, expected {} ({} particles, NumPart_ThisFile[{}])", path(), set, shape_text(dims),
           counts_[type], counts_[type], type);
    return r_.read_rows<double>(set, first, count);
  }
  std::string where(int type, Column column) const override {
    const char* name = column == Column::position   ? "/Coordinates"
                       : column == Column::velocity ? "/Velocities"
                       : column == Column::id       ? "/ParticleIDs"
                                                    : "/Masses";
    return group_of(type) + name;
  }

 private:
  // PartTypeN of a file with n particles of that type: Coordinates and Velocities n x 3,
  // ParticleIDs n.
  void check_layout(int type) {
    if (checked_[type]) return;
    const std::uint64_t n = counts_[type];
    for (const std::string name : {"Coordinates", "Velocities", "ParticleIDs"}) {
      const std::string set = group_of(type) + "/" + name;
      if (!r_.has(set))
        fail("'{}' has no dataset {}, but its /Header says it holds {} particles of type {}: not a GADGET-layout "
             "snapshot, or an incomplete one", path(), set, n, type);
      const auto dims = r_.shape(set);
      const bool ids = name == "ParticleIDs";
      const bool ok = ids ? dims.size() == 1 && dims[0] == n : dims.size() == 2 && dims[0] == n && dims[1] == 3;
      if (!ok)
        fail("'{}': dataset {} is {}, expected {} ({} particles, NumPart_ThisFile[{}])", path(), set, shape_text(dims),
             ids ? std::to_string(n) : std::to_string(n) + " x 3", n, type);
    }
    checked_[type] = true;
  }

  H5Reader r_;
  std::array<bool, 6> checked_{};
};

// The blocks hold every type's particles in type order (the MASS block those of the types
// with particles and massarr 0): type t's particle k is at the sum of the counts before t, plus k.
class BinaryParticleFile final : public ParticleFile {
 public:
  explicit BinaryParticleFile(const std::string& path) : ParticleFile(path), f_(path) {
    for (int t = 0; t < 6; ++t) {
      counts_[t] = f_.header().npart[t];
      mass_table_[t] = f_.header().massarr[t];
    }
  }
  bool has_masses(int type) const override { return mass_table_[type] == 0 && counts_[type] > 0 && f_.has_masses(); }
  std::vector<double> positions(int type, std::uint64_t first, std::uint64_t count) override {
    return f_.positions(f_.first_of_type(type) + first, count);
  }
  std::vector<double> velocities(int type, std::uint64_t first, std::uint64_t count) override {
    return f_.velocities(f_.first_of_type(type) + first, count);
  }
  std::vector<std::uint64_t> ids(int type, std::uint64_t first, std::uint64_t count) override {
    return f_.ids(f_.first_of_type(type) + first, count);
  }
  std::vector<double> masses(int type, std::uint64_t first, std::uint64_t count) override {
    if (!has_masses(type)) fail("internal: '{}' has no MASS block entries for type {}", path(), type);
    return f_.masses(f_.first_mass_of_type(type) + first, count);
  }
  std::string where(int, Column column) const override {
    return column == Column::position   ? "the POS block"
           : column == Column::velocity ? "the VEL block"
           : column == Column::id       ? "the ID block"
                                        : "the MASS block";
  }

 private:
  GadgetBinaryFile f_;
};

}  // namespace

std::unique_ptr<ParticleFile> ParticleFile::open(const std::string& path) {
  if (GadgetBinaryFile::detect(path)) return std::make_unique<BinaryParticleFile>(path);
  return std::make_unique<Hdf5ParticleFile>(path);
}

}  // namespace orbis
