// Snapshots and initial conditions in the GADGET-4 HDF5 layout, so
// outputs drop into existing tools and ICs of GADGET-4/N-GenIC, MUSIC and monofonIC read in.
//   /Header     BoxSize, Time (= a), Redshift, NumPart_ThisFile, NumPart_Total (64-bit),
//               NumPart_Total_HighWord (0: see gadget_total_count), MassTable, Omega0,
//               OmegaLambda, HubbleParam, NumFilesPerSnapshot, Flag_DoublePrecision,
//               UnitLength_in_cm, UnitMass_in_g, UnitVelocity_in_cm_per_s
//   /PartType1  Coordinates (Mpc/h), Velocities (u = sqrt(a) dx/dt = v_pec / sqrt(a), km/s),
//               ParticleIDs, optionally Acceleration
//   /Parameters /Config   (provenance.hpp)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/comm.hpp"
#include "core/particles.hpp"

namespace orbis {

class Params;

struct SnapshotHeader {
  double box_mpc_h = 0;
  double a = 0;            // scale factor (GADGET's Time)
  double redshift = 0;
  double omega_m = 0, omega_lambda = 0, h = 0;
  std::uint64_t num_total = 0;
  int num_files = 1;
};

struct Snapshot {
  SnapshotHeader header;
  Particles particles;     // momenta converted to p = a^2 dx/dt
};

// Writes the particles of every rank of `comm` (collective) as output.files_per_snapshot
// files (GADGET-4's NumFilesPerSnapshot): PATH itself for one file, else STEM.0.hdf5,
// STEM.1.hdf5, ... (STEM: PATH without ".hdf5"). The files hold the whole set in ID order,
// file f the positions [f N / F, (f + 1) N / F) of it (N particles, F files), so the files
// are the same for every rank count and every order of the particles on the ranks.
// Serial HDF5 and no gather (io/snapshot_write.cpp): file f is made by rank f P / F of P
// (header, /Parameters, its datasets' storage allocated) and closed; then every rank writes
// its share of the whole set, the positions [r N / P, (r + 1) N / P) of the ID order, at
// once, into the files that share overlaps, with plain writes at the datasets' offsets.
// Every particle travels at most once, straight to the rank whose share it falls in (with
// domains that follow the ID order, as the grid ICs' x-major IDs and the x cut of the ORB
// domains do, most stay where they are); each rank then holds about N / P particles more.
// The ranks find where their particles fall in the ID order together (io/id_order.hpp:
// with dense IDs, such as the grid ICs', from the IDs alone, nothing sorted). The files'
// bytes are the same for every rank count.
// The files are written under temporary names and renamed onto theirs only once every rank
// has written and flushed its rows; a failure on any rank is an error on all. Box and
// cosmology come from `params`. Returns the file names. Particles of several types or
// individual masses (an isolated system's: Particles::type, Particles::masses) go to
// write_typed_snapshot, on one rank only: over several ranks, or in a comoving run, they are
// an error on every rank (nothing written).
//
// Datasets beside positions, velocities and IDs, each null for none, else one value a particle
// in the particles' order: Acceleration (comoving, dp/dt per unit a in a box: see the attribute
// text), Potential (an isolated system's gravitational potential, -G sum_j m_j / s_ij; on one
// rank: isolated systems run on one).
struct SnapshotExtras {
  const std::vector<Vec3d>* accelerations = nullptr;
  const std::vector<double>* potentials = nullptr;
};
std::vector<std::string> write_snapshot(const std::string& path, const Particles& particles, double a,
                                        const Params& params, const SnapshotExtras& extras = {},
                                        const Comm& comm = Comm::self());
// An isolated system's particles of several types or individual masses (write_snapshot hands
// them over; one rank, io/snapshot_write_types.cpp): each type in its own /PartTypeN, by type
// and then ID; MassTable[t] the type's one mass, else 0 and /PartTypeN/Masses; file f of the
// names holds share f of every type.
std::vector<std::string> write_typed_snapshot(const std::vector<std::string>& names, const Particles& particles,
                                              double a, const Params& params, const SnapshotExtras& extras);
// The files write_snapshot makes for PATH and `files` files.
std::vector<std::string> snapshot_file_names(const std::string& path, int files);

// The total particle count from a header's NumPart_Total and NumPart_Total_HighWord. GADGET-2/3
// store the low 32 bits in NumPart_Total and the high ones in HighWord; GADGET-4 (and orbis)
// store the whole count in NumPart_Total (64-bit), where a HighWord, if any, repeats bits
// already there. A NumPart_Total of 2^32 or more is therefore the whole count.
std::uint64_t gadget_total_count(std::uint64_t num_part_total, std::uint64_t high_word);

// The first file of the snapshot named PATH: PATH itself; for PATH ending in ".hdf5" else
// STEM.0.hdf5 (STEM: PATH without ".hdf5", as write_snapshot names a set); for any other PATH
// else PATH.hdf5, else PATH.0.hdf5, else PATH.0 (a GADGET binary set). None there: an error
// listing the names tried.
std::string snapshot_first_file(const std::string& path);
// Every file of the snapshot named PATH: the first (snapshot_first_file), or, when it says it is
// one of a set (NumFilesPerSnapshot, num_files), the set's numbered files in order; a missing
// one is an error naming it.
std::vector<std::string> snapshot_file_set(const std::string& path);

// Reads a snapshot or IC file, found as snapshot_first_file says: one file, or the numbered
// files STEM.0.hdf5, STEM.1.hdf5, ... of a multi-file set (NumFilesPerSnapshot > 1). What a
// cosmological run takes: PartType1 alone, of one mass (MassTable[1], or Masses all equal);
// another type with particles, or unequal masses, is an error naming the file (isolated
// systems read those: io/system_file.hpp). Positions are wrapped into [0, BoxSize).
// Over several ranks (collective), rank r reads the particles [r N / P, (r + 1) N / P) of the
// set, in file order; the header is the whole set's on every rank. GADGET's binary formats
// (io/gadget_binary.hpp: PATH, or the set PATH.0, PATH.1, ...) are read too; they carry no
// units, and their lengths are taken in binary_length_unit Mpc/h (1e-3: kpc/h, GADGET's
// default), velocities in km/s and masses in 1e10 Msun/h.
Snapshot read_snapshot(const std::string& path, const Comm& comm = Comm::self(), double binary_length_unit = 1e-3);

}  // namespace orbis
