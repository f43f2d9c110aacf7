// What made an output file: /Parameters (every run parameter in force, as typed attributes
// named "section.key") and /Config (version, git revision, build options). Every HDF5 file
// orbis writes carries both.
//
// /Parameters also carries the parameters GADGET-4 stores there under its own names, which
// readers of GADGET-4 files (pynbody, yt) take units, box and cosmology from:
//   UnitLength_in_cm = 3.085678e24, UnitMass_in_g = 1.989e43, UnitVelocity_in_cm_per_s = 1e5
//     (GADGET's units carry no h: a length x in the file is x UnitLength_in_cm / h cm, so
//     these say comoving Mpc/h, 1e10 Msun/h and km/s), GravityConstantInternal (G in these
//     units), Hubble (H0 = 100 in these units), HubbleParam, Omega0, OmegaLambda,
//     OmegaBaryon, BoxSize (Mpc/h), ComovingIntegrationOn = 1;
//   SofteningComovingClass0 = SofteningMaxPhysClass0 = the Plummer-equivalent softening
//     (comoving Mpc/h, constant in comoving coordinates) and SofteningClassOfPartType0..5 = 0.
#pragma once

namespace orbis {

class H5Writer;
class Params;

void write_provenance(H5Writer& file, const Params& params);

}  // namespace orbis
