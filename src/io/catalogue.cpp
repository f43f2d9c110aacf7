#include "io/catalogue.hpp"

#include <cmath>

#include "core/error.hpp"
#include "io/gadget_units.hpp"
#include "io/hdf5_file.hpp"
#include "io/provenance.hpp"

namespace orbis {
namespace {

std::vector<Vec3d> unflatten(const std::vector<double>& flat, std::size_t n, double scale,
                             const std::string& what) {
  if (flat.size() != 3 * n) fail("{}: {} values, expected 3 x {} groups", what, flat.size(), n);
  std::vector<Vec3d> out(n);
  for (std::size_t i = 0; i < n; ++i)
    for (int d = 0; d < 3; ++d) out[i][d] = flat[3 * i + d] * scale;
  return out;
}

// An (n x 6) per-type table with the particles in column 1 (orbis has PartType1 only).
template <typename T> std::vector<T> type_table(const std::vector<T>& column1) {
  std::vector<T> out(6 * column1.size(), T{0});
  for (std::size_t i = 0; i < column1.size(); ++i) out[6 * i + 1] = column1[i];
  return out;
}

}  // namespace

void write_catalogue(const std::string& path, const GroupCatalogue& c, const Params& params) {
  const std::size_t n = c.size();
  for (const std::size_t size : {c.mass.size(), c.pos.size(), c.vel_pec.size(), c.vel_disp.size(),
                                 c.cm.size(), c.min_pot_id.size(), c.m_crit200.size(),
                                 c.r_crit200.size(), c.m_mean200.size(), c.r_mean200.size(), c.offset.size()})
    if (size != n) fail("catalogue.cpp: '{}': a group column has {} entries for {} groups", path, size, n);
  if (!(c.a > 0)) fail("catalogue.cpp: '{}': scale factor a = {} must be positive", path, c.a);

  H5Writer file(path);
  file.create_group("/Header");
  file.attribute("/Header", "BoxSize", c.box_mpc_h);
  file.attribute("/Header", "Time", c.a);
  file.attribute("/Header", "Redshift", c.redshift());
  file.attribute("/Header", "Ngroups_ThisFile", static_cast<std::int64_t>(n));
  file.attribute("/Header", "Ngroups_Total", static_cast<std::int64_t>(n));
  file.attribute("/Header", "Nids_ThisFile", static_cast<std::int64_t>(c.ids.size()));
  file.attribute("/Header", "Nids_Total", static_cast<std::int64_t>(c.ids.size()));
  file.attribute("/Header", "Nsubhalos_ThisFile", std::int64_t{0});
  file.attribute("/Header", "Nsubhalos_Total", std::int64_t{0});
  // The same under the GADGET-3/AREPO names, with an empty /Subhalo group: yt's gadget_fof
  // reader needs both.
  file.attribute("/Header", "Nsubgroups_ThisFile", std::int64_t{0});
  file.attribute("/Header", "Nsubgroups_Total", std::int64_t{0});
  file.attribute("/Header", "NumFiles", std::int32_t{1});
  file.attribute("/Header", "Omega0", c.omega_m);
  file.attribute("/Header", "OmegaLambda", c.omega_lambda);
  file.attribute("/Header", "HubbleParam", c.h);
  file.attribute("/Header", "ParticleMass", c.particle_mass);
  file.attribute("/Header", "NumPart_Total", static_cast<std::int64_t>(c.num_particles));
  file.attribute("/Header", "LinkingLength", c.linking_length_mpc_h);
  file.attribute("/Header", "LinkingLengthOverSpacing", c.linking_length_over_spacing);
  file.attribute("/Header", "MinGroupMembers", static_cast<std::int64_t>(c.min_members));
  file.attribute("/Header", "SOOverdensity", 200.0);
  file.attribute("/Header", "PotentialSoftening", c.softening_mpc_h);
  file.attribute("/Header", "UnitLength_in_cm", kMpcInCm);
  file.attribute("/Header", "UnitMass_in_g", kMassUnitInG);
  file.attribute("/Header", "UnitVelocity_in_cm_per_s", kKmInCm);
  file.attribute("/Header", "Description",
                 "friends-of-friends groups (orbis): groups by descending GroupLen, ties by smallest "
                 "member ID; /IDs/ID holds each group's member IDs in ascending order");

  file.create_group("/Group");
  file.write("/Group/GroupLen", c.len);
  describe_dataset(file, "/Group/GroupLen", kUnitNone, "number of member particles");
  file.write("/Group/GroupLenType", type_table(c.len).data(), n, 6);
  describe_dataset(file, "/Group/GroupLenType", kUnitNone, "members per particle type (all are type 1)");
  file.write("/Group/GroupMass", c.mass);
  describe_dataset(file, "/Group/GroupMass", kUnitMass, "FoF mass: members x particle mass, 1e10 Msun/h");
  file.write("/Group/GroupMassType", type_table(c.mass).data(), n, 6);
  describe_dataset(file, "/Group/GroupMassType", kUnitMass, "FoF mass per particle type, 1e10 Msun/h");
  file.write("/Group/GroupOffset", c.offset);
  describe_dataset(file, "/Group/GroupOffset", kUnitNone,
            "index of the group's first member in /IDs/ID (not an offset into the snapshot, which "
            "is not ordered by group)");
  file.write("/Group/GroupPos", flatten(c.pos, 1.0).data(), n, 3);
  describe_dataset(file, "/Group/GroupPos", kUnitLength,
            "position of the member with the minimum gravitational potential of the group's own members "
            "(Plummer softening of the run), comoving Mpc/h; the centre of the spherical overdensities");
  file.write("/Group/GroupMinPotID", c.min_pot_id);
  describe_dataset(file, "/Group/GroupMinPotID", kUnitNone, "particle ID of the minimum-potential member (GroupPos)");
  file.write("/Group/GroupCM", flatten(c.cm, 1.0).data(), n, 3);
  describe_dataset(file, "/Group/GroupCM", kUnitLength,
            "centre of mass (members unwrapped around the first member), comoving Mpc/h, in [0, BoxSize)");
  file.write("/Group/GroupVel", flatten(c.vel_pec, c.a).data(), n, 3);
  describe_dataset(file, "/Group/GroupVel", kUnitGroupVelocity,
            "mean member velocity a^2 dx/dt = a v_pec (GADGET-4's GroupVel), km/s; "
            "peculiar velocity = GroupVel / a");
  file.write("/Group/GroupVelDisp", c.vel_disp);
  describe_dataset(file, "/Group/GroupVelDisp", GadgetUnit{0, 0, 0, 0, 1, kKmInCm},
            "1D peculiar velocity dispersion sqrt(sum |v - <v>|^2 / (3 GroupLen)), km/s");
  const std::string so =
      " within the sphere around GroupPos whose mean density (all particles) is 200 x ";
  file.write("/Group/Group_M_Crit200", c.m_crit200);
  describe_dataset(file, "/Group/Group_M_Crit200", kUnitMass,
            "mass, 1e10 Msun/h," + so + "rho_crit(a) (outermost crossing)");
  file.write("/Group/Group_R_Crit200", c.r_crit200);
  describe_dataset(file, "/Group/Group_R_Crit200", kUnitLength, "comoving radius, Mpc/h," + so + "rho_crit(a)");
  file.write("/Group/Group_M_Mean200", c.m_mean200);
  describe_dataset(file, "/Group/Group_M_Mean200", kUnitMass,
            "mass, 1e10 Msun/h," + so + "the mean matter density (outermost crossing)");
  file.write("/Group/Group_R_Mean200", c.r_mean200);
  describe_dataset(file, "/Group/Group_R_Mean200", kUnitLength, "comoving radius, Mpc/h," + so + "the mean matter density");

  file.create_group("/Subhalo");

  file.create_group("/IDs");
  file.write("/IDs/ID", c.ids);
  describe_dataset(file, "/IDs/ID", kUnitNone, "member particle IDs, group after group, ascending within a group");

  write_provenance(file, params);
  file.commit();
}

GroupCatalogue read_catalogue(const std::string& path) {
  H5Reader r(path);
  if (!r.has("/Header") || !r.has("/Group") || !r.has("/IDs"))
    fail("'{}' is not a halo catalogue: expected /Header, /Group and /IDs (GADGET-4 fof_tab layout)", path);
  GroupCatalogue c;
  c.box_mpc_h = r.attribute<double>("/Header", "BoxSize");
  c.a = r.attribute<double>("/Header", "Time");
  c.omega_m = r.attribute<double>("/Header", "Omega0");
  c.omega_lambda = r.attribute<double>("/Header", "OmegaLambda");
  c.h = r.attribute<double>("/Header", "HubbleParam");
  c.particle_mass = r.attribute<double>("/Header", "ParticleMass");
  c.num_particles = r.attribute<std::uint64_t>("/Header", "NumPart_Total");
  c.linking_length_mpc_h = r.attribute<double>("/Header", "LinkingLength");
  c.linking_length_over_spacing = r.attribute<double>("/Header", "LinkingLengthOverSpacing");
  c.min_members = r.attribute<std::uint64_t>("/Header", "MinGroupMembers");
  if (r.has_attribute("/Header", "PotentialSoftening"))
    c.softening_mpc_h = r.attribute<double>("/Header", "PotentialSoftening");
  const auto n = r.attribute<std::uint64_t>("/Header", "Ngroups_ThisFile");
  const auto nids = r.attribute<std::uint64_t>("/Header", "Nids_ThisFile");
  if (r.attribute<std::int32_t>("/Header", "NumFiles") != 1)
    fail("'{}': multi-file catalogues are not supported (NumFiles != 1)", path);

  auto column = [&](const char* name) {
    auto v = r.read<double>(std::string("/Group/") + name);
    if (v.size() != n) fail("'{}': /Group/{} has {} values for {} groups", path, name, v.size(), n);
    return v;
  };
  c.len = r.read<std::uint32_t>("/Group/GroupLen");
  if (c.len.size() != n) fail("'{}': /Group/GroupLen has {} values for {} groups", path, c.len.size(), n);
  c.mass = column("GroupMass");
  c.vel_disp = column("GroupVelDisp");
  c.m_crit200 = column("Group_M_Crit200");
  c.r_crit200 = column("Group_R_Crit200");
  c.m_mean200 = column("Group_M_Mean200");
  c.r_mean200 = column("Group_R_Mean200");
  c.pos = unflatten(r.read<double>("/Group/GroupPos"), n, 1.0, path + ": /Group/GroupPos");
  // v_pec = GroupVel a^a_scaling: a^-1 (GADGET-4's a v_pec; also when the attribute is
  // absent, as in GADGET-4's files) or a^0.5 (the u = v_pec / sqrt(a) of older orbis files).
  const double vel_a_scaling = r.has_attribute("/Group/GroupVel", "a_scaling")
                                   ? r.attribute<double>("/Group/GroupVel", "a_scaling") : -1.0;
  c.vel_pec = unflatten(r.read<double>("/Group/GroupVel"), n, std::pow(c.a, vel_a_scaling),
                        path + ": /Group/GroupVel");
  if (!r.has("/Group/GroupCM") || !r.has("/Group/GroupMinPotID"))
    fail("'{}': no /Group/GroupCM or GroupMinPotID: written by an older orbis, whose GroupPos was the centre "
         "of mass; make it again with `orbis fof SNAPSHOT`", path);
  c.cm = unflatten(r.read<double>("/Group/GroupCM"), n, 1.0, path + ": /Group/GroupCM");
  c.min_pot_id = r.read<std::uint64_t>("/Group/GroupMinPotID");
  c.offset = r.read<std::uint64_t>("/Group/GroupOffset");
  if (c.offset.size() != n || c.min_pot_id.size() != n)
    fail("'{}': /Group/GroupOffset or GroupMinPotID do not match {} groups", path, n);
  c.ids = r.read<std::uint64_t>("/IDs/ID");
  if (c.ids.size() != nids) fail("'{}': /IDs/ID has {} values, Nids_ThisFile says {}", path, c.ids.size(), nids);
  for (std::size_t g = 0; g < n; ++g)
    if (c.offset[g] + c.len[g] > nids)
      fail("'{}': group {} reaches past the end of /IDs/ID ({} + {} > {})", path, g, c.offset[g], c.len[g], nids);
  return c;
}

}  // namespace orbis
