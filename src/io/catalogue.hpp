// Halo catalogues in the HDF5 layout of GADGET-4's fof_tab files (single file), so that tools
// reading GADGET-4 group catalogues read ours:
//   /Header  BoxSize, Time (= a), Redshift, Ngroups_ThisFile, Ngroups_Total, Nids_ThisFile,
//            Nids_Total, NumFiles, Nsubhalos_ThisFile = Nsubhalos_Total = 0 (and the
//            GADGET-3/AREPO Nsubgroups_ThisFile = Nsubgroups_Total = 0), Omega0,
//            OmegaLambda, HubbleParam; orbis additions: ParticleMass, NumPart_Total,
//            LinkingLength (Mpc/h), LinkingLengthOverSpacing (b), MinGroupMembers,
//            SOOverdensity (200), PotentialSoftening (Mpc/h: the Plummer-equivalent softening
//            of the potential whose minimum is GroupPos)
//   /Group   GroupLen, GroupLenType, GroupMass, GroupMassType, GroupPos, GroupVel,
//            Group_M_Crit200, Group_R_Crit200, Group_M_Mean200, Group_R_Mean200 (GADGET-4
//            names); GroupCM (AREPO's name; GADGET-4 writes none for groups); GroupOffset,
//            GroupVelDisp, GroupMinPotID (orbis)
// GroupPos is the position of the member with the minimum potential, as GADGET-4 writes it
// with SUBFIND (there the first subhalo's minimum; orbis: the FoF group's own members, no
// unbinding), and the spherical overdensities are centred on it, as GADGET-4's are.
//   /Subhalo empty (no subhaloes; yt's gadget_fof reader needs the group)
//   /IDs/ID  member IDs, group after group (GADGET-4's FOF_STOREIDS layout), ascending
//            within a group; GroupOffset[g] is the index of group g's first ID. (GADGET-4's
//            GroupOffsetType counts into a group-ordered snapshot; orbis snapshots are not
//            group-ordered, so that name is not written, lest a tool read wrong particles.)
//   /Parameters, /Config (provenance.hpp)
// Units are GADGET's (comoving Mpc/h, 1e10 Msun/h, km/s) and every dataset carries its
// unit attributes (a_scaling, h_scaling, ..., to_cgs, Description) as snapshots do.
// GroupVel is GADGET-4's: the members' mean a^2 dx/dt = a v_pec (GADGET-4 averages its
// internal velocity variable; AREPO documents the same "km/s/a"), so v_pec = GroupVel / a,
// while snapshot Velocities are u = v_pec / sqrt(a). GroupVelDisp is the 1D dispersion of
// peculiar velocities (km/s, no a factor). In memory the catalogue holds peculiar velocities.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/vec3.hpp"

namespace orbis {

class Params;

struct GroupCatalogue {
  // Header
  double box_mpc_h = 0;
  double a = 0;                                 // scale factor (GADGET's Time)
  double omega_m = 0, omega_lambda = 0, h = 0;
  double particle_mass = 0;                     // 1e10 Msun/h
  std::uint64_t num_particles = 0;              // particles searched
  double linking_length_mpc_h = 0;              // comoving
  double linking_length_over_spacing = 0;       // b
  std::uint64_t min_members = 0;
  double softening_mpc_h = 0;                   // of the potential behind GroupPos, comoving

  // One entry per group, in the finder's order (descending length, then smallest ID).
  std::vector<std::uint32_t> len;
  std::vector<double> mass;                     // 1e10 Msun/h
  std::vector<Vec3d> pos;                       // minimum-potential member, comoving Mpc/h
  std::vector<std::uint64_t> min_pot_id;        // its particle ID
  std::vector<Vec3d> cm;                        // centre of mass, comoving Mpc/h
  std::vector<Vec3d> vel_pec;                   // mean peculiar velocity, km/s
  std::vector<double> vel_disp;                 // 1D peculiar velocity dispersion, km/s
  std::vector<double> m_crit200, r_crit200;     // 1e10 Msun/h, comoving Mpc/h
  std::vector<double> m_mean200, r_mean200;
  std::vector<std::uint64_t> offset;            // group g's IDs: ids[offset[g] .. + len[g])
  std::vector<std::uint64_t> ids;               // member particle IDs

  std::size_t size() const { return len.size(); }
  double redshift() const { return 1.0 / a - 1.0; }
};

// Writes atomically, with /Parameters and /Config from `params`.
void write_catalogue(const std::string& path, const GroupCatalogue& catalogue, const Params& params);

// Reads a catalogue written by write_catalogue (a single-file fof_tab).
GroupCatalogue read_catalogue(const std::string& path);

}  // namespace orbis
