// GADGET's binary snapshot formats, read as initial conditions: SnapFormat 1 (GADGET-2/3,
// N-GenIC, 2LPTic, MUSIC's gadget output) and SnapFormat 2 (each block led by a 4-letter
// label), in either byte order, as one file or a numbered set PATH.0, PATH.1, ...
//
// A file is a sequence of Fortran-style records, each framed by its byte count before and
// after: the 256-byte header (npart[6] uint32, massarr[6] double, time, redshift, two flags,
// npartTotal[6] uint32, a flag, num_files, BoxSize, Omega0, OmegaLambda, HubbleParam, two
// flags, npartTotalHighWord[6] uint32, padding), then POS (3 float or double per particle,
// types in order), VEL (u = sqrt(a) dx/dt, km/s, as in the HDF5 layout), ID (uint32 or
// uint64) and, when a type with particles has massarr 0, MASS for those particles. The
// element sizes follow from the record lengths and the particle count; a record whose two
// byte counts differ, or that does not fit the count, is an error naming the file and the
// block. Binary files carry no units: lengths are in the unit the caller names (GADGET's
// default is kpc/h), velocities in km/s, masses in 1e10 Msun/h.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace orbis {

struct GadgetBinaryHeader {
  std::uint32_t npart[6] = {};
  double massarr[6] = {};
  double time = 0, redshift = 0;
  std::uint32_t npart_total[6] = {};
  std::uint32_t npart_total_high[6] = {};
  int num_files = 1;
  double box = 0, omega0 = 0, omega_lambda = 0, hubble = 0;
};

class GadgetBinaryFile {
 public:
  // True when the file starts as a GADGET binary file does (a first record of 256 bytes, or
  // SnapFormat 2's 8-byte label record), in either byte order.
  static bool detect(const std::string& path);
  // Reads the header and finds the blocks; errors name the file and what is wrong.
  explicit GadgetBinaryFile(const std::string& path);

  const GadgetBinaryHeader& header() const { return header_; }
  int format() const { return format_; }
  // Particles [first, first + count) of all types in file order: positions and velocities
  // (x y z per particle), IDs, and the masses of the MASS block's particles (types whose
  // massarr is 0; [first, first + count) of those).
  std::vector<double> positions(std::uint64_t first, std::uint64_t count) const;
  std::vector<double> velocities(std::uint64_t first, std::uint64_t count) const;
  std::vector<std::uint64_t> ids(std::uint64_t first, std::uint64_t count) const;
  std::vector<double> masses(std::uint64_t first, std::uint64_t count) const;
  bool has_masses() const { return mass_.bytes > 0; }
  // Where type t's particles begin in the blocks above (the counts of the types before it),
  // and in the MASS block (the counts of the types before it with massarr 0).
  std::uint64_t first_of_type(int type) const;
  std::uint64_t first_mass_of_type(int type) const;

 private:
  struct Block {
    std::uint64_t offset = 0;   // of the data, after the leading byte count
    std::uint64_t bytes = 0;
    int element = 0;            // bytes per value: 4 or 8
  };
  std::vector<double> reals(const Block& block, const char* name, int per_particle, std::uint64_t first,
                            std::uint64_t count) const;

  std::string path_;
  int format_ = 1;
  bool swap_ = false;
  GadgetBinaryHeader header_;
  Block pos_, vel_, id_, mass_;
};

}  // namespace orbis
