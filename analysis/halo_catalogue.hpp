// The halo-finding step of an output, as the run loop and `orbis fof` call it: FoF groups,
// their properties, the GADGET-4-layout catalogue (io/catalogue.hpp) and the mass function.
//
// Mass function (text, next to the catalogue: NAME.hdf5 -> NAME_massfn.txt): bins of 0.2 dex
// in M [Msun/h] starting at log10(min_members x particle mass), for the FoF mass (GroupMass)
// and for M200m (Group_M_Mean200); dn/dlog10M = N / (V dlog10M) in (h/Mpc)^3 with V = box^3
// and Poisson errors sqrt(N) / (V dlog10M). analysis/python/plot_mass_function.py plots it
// against the Reed et al. (2007, FoF) and Tinker et al. (2008, 200m) fits.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/fof_ranks.hpp"
#include "analysis/halo_properties.hpp"
#include "core/comm.hpp"
#include "io/catalogue.hpp"

namespace orbis {
class Params;
}

namespace orbis::halo {

// Catalogue of the given groups; the header's cosmology comes from `params`.
GroupCatalogue make_catalogue(const Particles& particles, const fof::FofGroups& groups,
                              const std::vector<HaloProperties>& haloes, double box_mpc_h, double a,
                              const fof::FofConfig& config, const Params& params);

// Grid, FoF ([analysis] fof_linking_length, fof_min_members), properties and catalogue for
// particles in a periodic box at scale factor a; cosmology from [cosmology]; the potential's
// softening is the run's, [gravity] softening_over_spacing x box / [box] particles_per_side.
GroupCatalogue find_haloes(const Particles& particles, double box_mpc_h, double a, const Params& params);

// find_haloes' catalogue from groups linked elsewhere (label: fof::groups_from_labels', the
// CUDA step engine's, StepEngine::fof_labels): the same groups, properties and catalogue,
// without the linking (the grid is still built: the overdensity spheres search it).
GroupCatalogue find_haloes_from_labels(const Particles& particles, const std::vector<std::uint32_t>& label,
                                       double box_mpc_h, double a, const Params& params);

// Collective over comm: the catalogue find_haloes makes of every rank's particles together
// (each rank passes its own), on root and empty elsewhere, without gathering the particles:
// groups across ranks (fof_ranks.hpp), each group's member properties on one rank (the
// potential minimum included: it needs the members alone; halo_members_ranks.hpp), and the
// particles around the overdensity spheres' centres counted by the ranks that hold them.
// Bitwise the same catalogue as one rank's (the same members in the same order, the same
// distances). `links`: this rank's particles (`local`, in the same order) and ghosts linked
// already (fof::link_locally on a comm of the same ranks, e.g. on the GPU before the output's
// thread started: integrate/outputs.hpp), so that only the merge and gather remain here.
GroupCatalogue find_haloes_across_ranks(const Particles& local, double box_mpc_h, double a, const Params& params,
                                        const Comm& comm, const fof::LocalLinks* links = nullptr);

// "fof_tab_003.hdf5" for output number 3 (GADGET-4's naming).
std::string catalogue_file_name(int output_number);
std::string mass_function_path(const std::string& catalogue_path);

// The mass-function table (see above) as text with '#' header lines.
std::string mass_function_text(const GroupCatalogue& catalogue);

// Writes the catalogue (HDF5) and its mass function (text), both atomically.
void write_halo_outputs(const std::string& catalogue_path, const GroupCatalogue& catalogue,
                        const Params& params);

}  // namespace orbis::halo
