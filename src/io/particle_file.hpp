// One file of a GADGET snapshot or IC set as the readers take it, whatever its format (HDF5 in
// the GADGET-2/3/4 layout, or GADGET's binary formats 1 and 2: io/gadget_binary.hpp): the
// particles of each type, in the file's order and the file's units, a range at a time. The
// cosmological reader (io/snapshot.hpp) takes type 1 alone, the isolated systems' reader
// (io/system_file.hpp) every type.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace orbis {

using TypeCounts = std::array<std::uint64_t, 6>;   // particles of GADGET types 0..5

class ParticleFile {
 public:
  enum class Column { position, velocity, id, mass };

  // The file opened as the format its first bytes say (GadgetBinaryFile::detect, else HDF5);
  // errors name the file and what is wrong with it.
  static std::unique_ptr<ParticleFile> open(const std::string& path);
  virtual ~ParticleFile() = default;

  const std::string& path() const { return path_; }
  // This file's particles of each type (NumPart_ThisFile, npart) and the header's mass of
  // each type (MassTable, massarr; 0: each particle has its own, in Masses or the MASS block).
  const TypeCounts& counts() const { return counts_; }
  const std::array<double, 6>& mass_table() const { return mass_table_; }
  // Whether the file holds per-particle masses of `type` (/PartTypeN/Masses; in binary files
  // the MASS block, which holds those of every type with particles and massarr 0, in type order).
  virtual bool has_masses(int type) const = 0;
  // Particles [first, first + count) of `type` in this file: positions and velocities (x y z
  // each, as stored: GADGET's u = sqrt(a) dx/dt in comoving files, dx/dt otherwise), IDs, masses.
  virtual std::vector<double> positions(int type, std::uint64_t first, std::uint64_t count) = 0;
  virtual std::vector<double> velocities(int type, std::uint64_t first, std::uint64_t count) = 0;
  virtual std::vector<std::uint64_t> ids(int type, std::uint64_t first, std::uint64_t count) = 0;
  virtual std::vector<double> masses(int type, std::uint64_t first, std::uint64_t count) = 0;
  // The dataset or block a column of `type` comes from, for messages ("/PartType1/Coordinates",
  // "the POS block").
  virtual std::string where(int type, Column column) const = 0;

 protected:
  explicit ParticleFile(std::string path) : path_(std::move(path)) {}
  TypeCounts counts_{};
  std::array<double, 6> mass_table_{};

 private:
  std::string path_;
};

}  // namespace orbis
